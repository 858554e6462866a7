package admin

import (
	"fmt"
	"net/http"
	"path"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Policies that do nothing in Meridian are never taken in silence. There
// are two kinds:
//
//   - Accepted but not built (global.UnbuiltPolicies, the one table of
//     them): Pulsar tools set them as part of a policy set (pulsaradmin's
//     own suite sets each), so they are stored and answered back, but a set
//     of one answers with `Warning: 299 - "<feature> is not built: <what
//     Meridian does instead>"`, this broker logs the change, and
//     meridian_policies_not_built counts the namespaces and topics holding
//     each.
//   - Refused (refusedPolicies): no tool needs them, so a set answers 405,
//     Pulsar's status for a feature that is not enabled, with the reason,
//     and stores nothing; a GET answers the unset value, a DELETE succeeds.

// warnUnbuilt adds a Warning to a set's answer for each of rows (the
// policies the written record holds) that the request's path stores, and
// logs it. A DELETE warns of nothing: it removes.
func (h *handler) warnUnbuilt(w http.ResponseWriter, r *http.Request, rows []global.Unbuilt, where string) {
	if r.Method == http.MethodDelete {
		return
	}
	policy := path.Base(r.URL.Path)
	for _, u := range rows {
		if !u.SetBy(policy) {
			continue
		}
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", u.Feature+" is not built: "+u.Reason))
		h.log.Warn("policy stored but not enforced: "+u.Feature+" is not built",
			"policy", policy, "where", where, "reason", u.Reason)
	}
}

// warnUnbuiltTopic is warnUnbuilt for a topic's record, as this broker's
// cache shows it once the write is in.
func (h *handler) warnUnbuiltTopic(w http.ResponseWriter, r *http.Request, t topology.TopicName) {
	tp, _ := h.svc.Policies().Topic(t)
	h.warnUnbuilt(w, r, global.UnbuiltInTopic(tp), t.String())
}

// refusedPolicy is a Pulsar policy route that Meridian refuses to set.
type refusedPolicy struct {
	path   string // after the namespace or the topic
	unset  string // what GET answers: "" is no body (204 or null)
	reason string
}

var refusedNamespacePolicies = []refusedPolicy{
	{path: "inactiveTopicPolicies", reason: "inactive topic deletion is not supported by Meridian: topics are deleted by an admin delete only"},
	{path: "encryptionRequired", unset: "false", reason: "encryption required is not supported by Meridian: the broker does not check that messages are encrypted"},
}

var refusedTopicPolicies = []refusedPolicy{
	{path: "inactiveTopicPolicies", reason: "inactive topic deletion is not supported by Meridian: topics are deleted by an admin delete only"},
}

func (h *handler) routeRefusedPolicies() {
	const ns = "/admin/v2/namespaces/{tenant}/{namespace}/"
	for _, rp := range refusedNamespacePolicies {
		h.handle("GET "+ns+rp.path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
			tenant, name := r.PathValue("tenant"), r.PathValue("namespace")
			if _, found := h.svc.Policies().Namespace(tenant, name); !found {
				return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, name)
			}
			return rp.answer(w, false)
		})
		refuse := func(http.ResponseWriter, *http.Request) error { return pulsarReason{ErrMethodNotAllowed, rp.reason} }
		h.handle("POST "+ns+rp.path, opTenantAdmin, refuse)
		h.handle("PUT "+ns+rp.path, opTenantAdmin, refuse)
		h.handle("DELETE "+ns+rp.path, opTenantAdmin, func(w http.ResponseWriter, _ *http.Request) error { return noContent(w) })
	}
	const p = "/admin/v2"
	for _, rp := range refusedTopicPolicies {
		h.handleTopic("GET", p, "/"+rp.path, opTenantAdmin, func(w http.ResponseWriter, _ *http.Request, _ topology.TopicName) error {
			return rp.answer(w, true)
		})
		refuse := func(http.ResponseWriter, *http.Request, topology.TopicName) error {
			return pulsarReason{ErrMethodNotAllowed, rp.reason}
		}
		h.handleTopic("POST", p, "/"+rp.path, opTenantAdmin, refuse)
		h.handleTopic("PUT", p, "/"+rp.path, opTenantAdmin, refuse)
		h.handleTopic("DELETE", p, "/"+rp.path, opTenantAdmin, func(w http.ResponseWriter, _ *http.Request, _ topology.TopicName) error {
			return noContent(w)
		})
	}
}

// answer is the unset value, as the stored policies answer theirs.
func (rp refusedPolicy) answer(w http.ResponseWriter, topic bool) error {
	return storedPolicy{unset: rp.unset}.answer(w, nil, topic)
}

// UnbuiltCollector serves meridian_policies_not_built{feature, level}: how
// many namespaces (level "namespace") and topic records (level "topic")
// hold each policy of global.UnbuiltPolicies, read from a broker's watched
// cache of the global configuration at each scrape. Every feature and
// level is served, 0 included, so that an alert can watch it rise.
type UnbuiltCollector struct {
	policies *global.Cache
	desc     *prometheus.Desc
}

// NewUnbuiltCollector returns the collector of the policies in cache.
func NewUnbuiltCollector(cache *global.Cache) *UnbuiltCollector {
	return &UnbuiltCollector{policies: cache, desc: prometheus.NewDesc("meridian_policies_not_built",
		"Namespaces and topics holding a policy that Meridian stores but does not enforce, by feature.",
		[]string{"feature", "level"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *UnbuiltCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *UnbuiltCollector) Collect(ch chan<- prometheus.Metric) {
	namespaces, topics := map[string]int{}, map[string]int{}
	for _, tenant := range c.policies.Tenants() {
		for _, ns := range c.policies.Namespaces(tenant) {
			p, _ := c.policies.Namespace(tenant, ns)
			for _, u := range global.UnbuiltIn(p) {
				namespaces[u.Feature]++
			}
			for _, name := range c.policies.Topics(tenant, ns) {
				t, err := topology.ParseTopicName(name)
				if err != nil {
					continue
				}
				tp, _ := c.policies.Topic(t)
				for _, u := range global.UnbuiltInTopic(tp) {
					topics[u.Feature]++
				}
			}
		}
	}
	for _, u := range global.UnbuiltPolicies {
		if u.InNamespace != nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(namespaces[u.Feature]), u.Feature, "namespace")
		}
		if u.InTopic != nil {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(topics[u.Feature]), u.Feature, "topic")
		}
	}
}
