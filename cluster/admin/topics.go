package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

func (h *handler) routeTopics() {
	const p = "/admin/v2"
	for _, d := range domains {
		h.handle("GET "+p+"/"+string(d)+"/{tenant}/{namespace}", opTenantAdmin, h.listTopics(d, false))
		h.handle("GET "+p+"/"+string(d)+"/{tenant}/{namespace}/partitioned", opTenantAdmin, h.listTopics(d, true))
	}
	h.handleTopic("PUT", p, "", opTenantAdmin, h.createTopic)
	h.handleTopic("DELETE", p, "", opTenantAdmin, h.deleteTopic)
	h.handleTopic("PUT", p, "/partitions", opTenantAdmin, h.createPartitioned)
	h.handleTopic("POST", p, "/partitions", opTenantAdmin, h.updatePartitions)
	h.handleTopic("DELETE", p, "/partitions", opTenantAdmin, h.deletePartitioned)
	h.handleTopic("GET", p, "/stats", opTenantAdmin, h.stats)
	h.handleTopic("GET", p, "/partitioned-stats", opTenantAdmin, h.partitionedStats)
	h.handleTopic("GET", p, "/internalStats", opTenantAdmin, h.internalStats)
	h.handleTopic("GET", p, "/lastMessageId", opConsume, h.lastMessageID)
	h.handleTopic("GET", p, "/messageid/{timestamp}", opConsume, h.messageIDByTime)
	h.handleTopic("POST", p, "/terminate", opTenantAdmin, h.terminate)
	h.handleTopic("PUT", p, "/unload", opTenantAdmin, h.unload)
	h.handleTopic("GET", p, "/subscriptions", opConsume, h.subscriptions)
	h.handleTopic("PUT", p, "/subscription/{sub}", opConsume, h.createSubscription)
	h.handleTopic("DELETE", p, "/subscription/{sub}", opConsume, h.deleteSubscription)
	h.handleTopic("POST", p, "/subscription/{sub}/skip/{n}", opConsume, h.skip)
	h.handleTopic("POST", p, "/subscription/{sub}/skip_all", opConsume, h.skipAll)
	h.handleTopic("POST", p, "/subscription/{sub}/resetcursor/{timestamp}", opConsume, h.resetToTime)
	h.handleTopic("POST", p, "/subscription/{sub}/resetcursor", opConsume, h.resetToID)
	h.handleTopic("POST", p, "/subscription/{sub}/expireMessages/{seconds}", opConsume, h.expire)
	h.handleTopic("POST", p, "/all_subscription/expireMessages/{seconds}", opConsume, h.expireAll)
	h.handleTopic("GET", p, "/subscription/{sub}/position/{n}", opConsume, h.peek)
	h.handleTopic("POST", p, "/subscription/{sub}/replicatedSubscriptionStatus", opTenantAdmin, h.setReplicatedSubscriptionStatus)
	h.handleTopic("GET", p, "/subscription/{sub}/replicatedSubscriptionStatus", opTenantAdmin, h.replicatedSubscriptionStatus)
	h.handleTopic("GET", p, "/ledger/{ledger}/entry/{entry}", opConsume, h.messageByID)
	h.handleTopic("GET", p, "/permissions", opTenantAdmin, h.topicPermissions)
	h.handleTopic("POST", p, "/permissions/{role}", opTenantAdmin, h.grantTopicPermission)
	h.handleTopic("DELETE", p, "/permissions/{role}", opTenantAdmin, h.revokeTopicPermission)
}

// ---- listing ----

// listTopics lists a namespace's topics of domain d: those stored in this
// region, partitions one by one (Pulsar's GET /persistent/{t}/{ns}), or
// the partitioned topics (…/partitioned). Meridian has no non-persistent
// topics, so their lists are empty.
func (h *handler) listTopics(d topology.Domain, partitioned bool) route {
	return func(w http.ResponseWriter, r *http.Request) error {
		tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
		if err := h.namespaceExists(tenant, ns); err != nil {
			return err
		}
		out := []string{}
		switch {
		case d != topology.Persistent:
		case partitioned:
			for t := range h.svc.PartitionedTopics(tenant, ns) {
				if t.Domain == d {
					out = append(out, t.String())
				}
			}
			slices.Sort(out)
		default:
			names, err := h.svc.TopicsOfNamespace(r.Context(), tenant, ns)
			if err != nil {
				return err
			}
			out = append(out, names...)
		}
		return ok(w, out)
	}
}

// exists reports whether t is stored in this region (it has a managed
// ledger), from the namespace listing.
func (h *handler) exists(r *http.Request, t topology.TopicName) (bool, error) {
	names, err := h.svc.TopicsOfNamespace(r.Context(), t.Tenant, t.Namespace)
	if err != nil {
		return false, err
	}
	return slices.Contains(names, t.String()), nil
}

// ---- create, update, delete ----

// createTopic creates a non-partitioned topic (409 when it, or a
// partitioned topic of the same name, exists). Properties in the body are
// accepted and not kept.
func (h *handler) createTopic(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	var props map[string]string
	if _, err := h.readJSON(r, &props); err != nil {
		return err
	}
	if err := h.checkNewTopic(r, t); err != nil {
		return err
	}
	if err := h.localOrRedirect(r, t); err != nil {
		return err
	}
	if _, err := h.svc.Topic(r.Context(), t, true); err != nil {
		if errors.Is(err, wire.ErrTopicNotFound) {
			return fmt.Errorf("%w: %s cannot be created while the namespace's auto topic creation is off (%v)", ErrPrecondition, t, err)
		}
		return err
	}
	if len(props) > 0 {
		err := h.updateTopicPolicies(r, t.Base(), func(tp *global.TopicPolicies) error {
			var err error
			tp.Extra, err = propertiesExtra(tp.Extra, props)
			return err
		})
		if err != nil {
			return fmt.Errorf("topic %s created, but storing its properties: %w", t, err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkNewTopic refuses a name in a missing namespace (404), or one that
// is taken by a topic or a partitioned topic (409).
func (h *handler) checkNewTopic(r *http.Request, t topology.TopicName) error {
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: partitioned topic %s already exists", ErrConflict, t)
	}
	if t.Domain != topology.Persistent {
		return fmt.Errorf("%w: non-persistent topics are not supported: %s", ErrPrecondition, t)
	}
	found, err := h.exists(r, t)
	if err != nil {
		return err
	}
	if found {
		return fmt.Errorf("%w: topic %s already exists", ErrConflict, t)
	}
	return nil
}

// partitionsBody reads the body of a partitioned create or update: a bare
// number (pulsar-admin's) or {"partitions": n, "properties": {...}}
// (pulsaradmin's, with the partitioned-topic-metadata media type).
func (h *handler) partitionsBody(r *http.Request) (int, map[string]string, error) {
	var raw json.RawMessage
	if err := h.mustReadJSON(r, &raw); err != nil {
		return 0, nil, err
	}
	var (
		n     int
		props map[string]string
	)
	if err := json.Unmarshal(raw, &n); err != nil {
		var meta struct {
			Partitions *int              `json:"partitions"`
			Properties map[string]string `json:"properties"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil || meta.Partitions == nil {
			return 0, nil, fmt.Errorf("%w: the body is neither a partition count nor {\"partitions\": n}", ErrBadRequest)
		}
		n, props = *meta.Partitions, meta.Properties
	}
	if n < 1 {
		return 0, nil, fmt.Errorf("%w: the number of partitions must be at least 1, got %d", ErrPrecondition, n)
	}
	if err := h.cfg.PolicyDefaults.PartitionsAllowed(n); err != nil {
		return 0, nil, err
	}
	return n, props, nil
}

// createPartitioned stores a partitioned topic's metadata. Its partitions
// are created and loaded where they are served when first used (a client
// attaches to them, or an admin request names them), not here: Pulsar
// creates each partition's managed ledger at once, but loading them all
// from one request would make its cost the request's count, where a
// client's use pays for what it uses. Listings name them from the start
// all the same (Service.TopicsOfNamespace).
func (h *handler) createPartitioned(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	n, props, err := h.partitionsBody(r)
	if err != nil {
		return err
	}
	extra, err := propertiesExtra(nil, props)
	if err != nil {
		return err
	}
	if t.IsPartition() {
		return fmt.Errorf("%w: %s is a partition name; a partitioned topic cannot have it", ErrPrecondition, t)
	}
	if err := h.checkNewTopic(r, t); err != nil {
		return err
	}
	if err := h.svc.AdmitTopics(r.Context(), t, n); err != nil {
		return err
	}
	rc, err := h.svc.Global().CreateTopic(r.Context(), t, global.TopicPolicies{Partitions: n, Created: time.Now().UnixMilli(), Extra: extra})
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// await waits until this broker's cache shows a write, so that the
// caller's next read here sees it. The write is done either way: a cache
// that lags (a slow watch) is logged, not failed.
func (h *handler) await(r *http.Request, rc global.Receipt) {
	if err := h.svc.Policies().Await(r.Context(), rc); err != nil {
		h.log.Warn("the global cache has not shown an admin write yet", "err", err)
	}
}

func (h *handler) updatePartitions(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	n, _, err := h.partitionsBody(r)
	if err != nil {
		return err
	}
	old, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	switch {
	case old == 0:
		return fmt.Errorf("%w: partitioned topic %s does not exist", ErrNotFound, t)
	case n <= old:
		return fmt.Errorf("%w: the number of partitions can only grow (%d now, %d asked)", ErrPrecondition, old, n)
	}
	if err := h.svc.AdmitTopics(r.Context(), t, n-old); err != nil {
		return err
	}
	_, rc, err := h.svc.Global().UpdateTopic(r.Context(), t, func(tp *global.TopicPolicies) error {
		if n <= tp.Partitions {
			return fmt.Errorf("%w: the number of partitions can only grow (%d now, %d asked)", ErrPrecondition, tp.Partitions, n)
		}
		tp.Partitions = n
		return nil
	})
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// deleteTopic deletes a non-partitioned topic on the broker that serves
// it (412 while clients are connected, unless force), and its topic-level
// policies.
func (h *handler) deleteTopic(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	force, err := queryBool(r, "force")
	if err != nil {
		return err
	}
	if n, err := h.partitionCount(t); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%w: %s is a partitioned topic: delete it with DELETE …/partitions", ErrPrecondition, t)
	}
	if err := h.localOrRedirect(r, t); err != nil {
		return err
	}
	if err := h.svc.DeleteTopic(r.Context(), t, force); err != nil {
		return err
	}
	if !t.IsPartition() {
		if rc, err := h.svc.Global().DeleteTopic(r.Context(), t); err == nil {
			h.await(r, rc)
		} else if !errors.Is(err, global.ErrNotFound) {
			h.log.Warn("deleting the policies of a deleted topic", "topic", t.String(), "err", err)
		}
	}
	return noContent(w)
}

// deletePartitioned deletes every partition created in this region (where
// it is served), then the metadata. The partitions never created, which
// may be most of a large topic's, cost nothing: they are found with one
// listing (Service.StoredPartitions), not looked up one by one.
func (h *handler) deletePartitioned(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	force, err := queryBool(r, "force")
	if err != nil {
		return err
	}
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: partitioned topic %s does not exist", ErrNotFound, t)
	}
	stored, err := h.svc.StoredPartitions(r.Context(), t, n)
	if err != nil {
		return err
	}
	err = h.onEachPartition(r, stored, "DELETE", "", nil, func(p topology.TopicName) ([]byte, error) {
		return nil, h.svc.DeleteTopic(r.Context(), p, force)
	}, nil)
	if err != nil {
		return err
	}
	rc, err := h.svc.Global().DeleteTopic(r.Context(), t)
	if err != nil {
		return err
	}
	h.await(r, rc)
	return noContent(w)
}

// ---- partitions, locally or on their owners ----

// onPartitions runs an operation on partitions 0..n-1 of t: local for the
// partitions this broker serves, and for the others the request method
// suffix (a path below the topic) sent to their owner, with the caller's
// credentials. Each answer's body goes to collect, when set. A partition
// that does not exist is skipped (Pulsar creates partitions lazily too).
func (h *handler) onPartitions(r *http.Request, t topology.TopicName, n int, method, suffix string, body []byte,
	local func(p topology.TopicName) ([]byte, error), collect func(p topology.TopicName, b []byte) error) error {
	ps := make([]topology.TopicName, n)
	for i := range n {
		ps[i] = t.PartitionN(i)
	}
	return h.onEachPartition(r, ps, method, suffix, body, local, collect)
}

// onEachPartition is onPartitions over the partitions ps.
func (h *handler) onEachPartition(r *http.Request, ps []topology.TopicName, method, suffix string, body []byte,
	local func(p topology.TopicName) ([]byte, error), collect func(p topology.TopicName, b []byte) error) error {
	for _, p := range ps {
		isLocal, url, err := h.owner(r, p)
		if err != nil {
			return err
		}
		var b []byte
		if isLocal {
			b, err = local(p)
		} else {
			b, err = h.forward(r, url, method, p, suffix, body)
		}
		if errors.Is(err, wire.ErrTopicNotFound) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("partition %d: %w", p.Partition, err)
		}
		if collect != nil {
			if err := collect(p, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// statusError is an answer from another broker that was not a success.
type statusError struct {
	status int
	reason string
}

func (e *statusError) Error() string { return e.reason }

// Is gives a forwarded 404 the meaning of a local one.
func (e *statusError) Is(target error) bool {
	return target == ErrNotFound && e.status == http.StatusNotFound
}

// forward sends method <owner>/admin/v2/<p>suffix with the request's query
// and credentials, and returns the answer's body.
func (h *handler) forward(r *http.Request, owner, method string, p topology.TopicName, suffix string, body []byte) ([]byte, error) {
	u := strings.TrimSuffix(owner, "/") + "/admin/v2/" + string(p.Domain) + "/" + url.PathEscape(p.Tenant) + "/" +
		url.PathEscape(p.Namespace) + "/" + url.PathEscape(p.Local) + suffix
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(r.Context(), method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: forwarding to %s: %v", wire.ErrServiceNotReady, owner, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s's answer: %v", wire.ErrServiceNotReady, owner, err)
	}
	if resp.StatusCode/100 != 2 {
		var rs reason
		if json.Unmarshal(b, &rs) != nil || rs.Reason == "" {
			rs.Reason = resp.Status
		}
		return nil, &statusError{status: resp.StatusCode, reason: owner + ": " + rs.Reason}
	}
	return b, nil
}

// pathBelowTopic is the escaped path of an /admin/v2 topic request after
// the topic's segment ("/subscription/s/skip/3").
func pathBelowTopic(r *http.Request) string {
	segs := strings.SplitN(r.URL.EscapedPath(), "/", 8) // "", admin, v2, domain, tenant, ns, topic, rest
	if len(segs) < 8 {
		return ""
	}
	return "/" + segs[7]
}

// eachTopic runs op on t, or on each partition of a partitioned t (the
// subscription operations of a partitioned topic apply to all its
// partitions, as in Pulsar). A non-partitioned topic served elsewhere is a
// redirect.
func (h *handler) eachTopic(r *http.Request, t topology.TopicName, op func(tp *broker.Topic) error) error {
	return h.eachTopicAnswer(r, t, func(tp *broker.Topic) ([]byte, error) { return nil, op(tp) }, nil)
}

// eachTopicCreating is eachTopic on a topic that the operation creates when
// it does not exist and auto topic creation allows (the namespace's
// override, else the broker's), as Pulsar's internalCreateSubscription
// does: it reads the partitioned metadata allowing auto-creation, so that
// a missing topic is created partitioned when that is the auto-creation
// type, and loads a non-partitioned topic creating it.
func (h *handler) eachTopicCreating(r *http.Request, t topology.TopicName, op func(tp *broker.Topic) error) error {
	if err := h.namespaceExists(t.Tenant, t.Namespace); err != nil {
		return err
	}
	n, err := h.svc.Partitions(r.Context(), t)
	if err != nil {
		return err
	}
	if n > 0 {
		return h.eachTopic(r, t, op)
	}
	if err := h.localOrRedirect(r, t); err != nil {
		return err
	}
	tp, err := h.svc.Topic(r.Context(), t, true)
	if err != nil {
		return err
	}
	return op(tp)
}

// eachTopicAnswer is eachTopic for an operation that answers: collect,
// when set, gets each topic's answer, local or from the partition's owner.
func (h *handler) eachTopicAnswer(r *http.Request, t topology.TopicName, op func(tp *broker.Topic) ([]byte, error), collect func(b []byte) error) error {
	if collect == nil {
		collect = func([]byte) error { return nil }
	}
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n == 0 {
		if err := h.localOrRedirect(r, t); err != nil {
			return err
		}
		tp, err := h.svc.Topic(r.Context(), t, false)
		if err != nil {
			return err
		}
		b, err := op(tp)
		if err != nil {
			return err
		}
		return collect(b)
	}
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return h.onPartitions(r, t, n, r.Method, pathBelowTopic(r), body, func(p topology.TopicName) ([]byte, error) {
		tp, err := h.svc.Topic(r.Context(), p, true)
		if err != nil {
			return nil, err
		}
		return op(tp)
	}, func(_ topology.TopicName, b []byte) error { return collect(b) })
}

// loaded returns non-partitioned t loaded on this broker, or a redirect to
// the broker that serves it.
func (h *handler) loaded(r *http.Request, t topology.TopicName) (*broker.Topic, error) {
	if err := h.localOrRedirect(r, t); err != nil {
		return nil, err
	}
	return h.svc.Topic(r.Context(), t, false)
}

// ---- statistics ----

func (h *handler) dedup(t topology.TopicName) bool {
	eff, err := h.svc.Policies().Resolve(t, h.cfg.PolicyDefaults)
	return err == nil && eff.DeduplicationEnabled
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	f, err := statsFilterOf(r)
	if err != nil {
		return err
	}
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	out := h.renderStats(t.String(), tp.Stats(), h.dedup(t))
	h.renderReplication(r.Context(), tp, &out)
	f.apply(&out)
	return ok(w, out)
}

// partitionedStats sums the partitions' statistics (each from the broker
// that serves it); perPartition=true (the default, as in Pulsar) also
// lists them.
func (h *handler) partitionedStats(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	per := true
	if v := r.URL.Query().Get("perPartition"); v != "" {
		var err error
		if per, err = queryBool(r, "perPartition"); err != nil {
			return err
		}
	}
	f, err := statsFilterOf(r)
	if err != nil {
		return err
	}
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: partitioned topic %s does not exist", ErrNotFound, t)
	}
	out := partitionedTopicStats{Metadata: partitionedMetadata{Partitions: n}}
	out.Publishers, out.Subscriptions, out.Replication = []publisherStats{}, map[string]subscriptionStats{}, map[string]replicatorStats{}
	if per {
		out.Partitions = map[string]topicStats{}
	}
	dedup := h.dedup(t)
	// The partitions created so far: the others, never used, have nothing
	// to count, and asking for their statistics would create them.
	stored, err := h.svc.StoredPartitions(r.Context(), t, n)
	if err != nil {
		return err
	}
	err = h.onEachPartition(r, stored, "GET", "/stats", nil, func(p topology.TopicName) ([]byte, error) {
		tp, err := h.svc.Topic(r.Context(), p, false)
		if err != nil {
			return nil, err
		}
		ps := h.renderStats(p.String(), tp.Stats(), dedup)
		h.renderReplication(r.Context(), tp, &ps)
		return json.Marshal(ps)
	}, func(p topology.TopicName, b []byte) error {
		var ps topicStats
		if err := json.Unmarshal(b, &ps); err != nil {
			return fmt.Errorf("%w: stats of %s: %v", wire.ErrServiceNotReady, p, err)
		}
		f.apply(&ps)
		out.add(ps)
		if per {
			out.Partitions[p.String()] = ps
		}
		return nil
	})
	if err != nil {
		return err
	}
	if out.DeduplicationStatus == "" {
		out.DeduplicationStatus = map[bool]string{true: "Enabled", false: "Disabled"}[dedup]
	}
	if tp, found := h.svc.Policies().Topic(t); found {
		// Created before any partition was (they are, when first used).
		out.add(topicStats{TopicCreationTimeStamp: tp.Created})
	}
	return ok(w, out)
}

func (h *handler) internalStats(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	return ok(w, renderInternalStats(tp.InternalStats()))
}

func (h *handler) lastMessageID(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	return ok(w, positionID(tp.LastMessageID(), t.Partition))
}

// terminate seals a topic and answers its last message id.
func (h *handler) terminate(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	tp, err := h.loaded(r, t)
	if err != nil {
		return err
	}
	p, err := tp.Terminate(r.Context())
	if err != nil {
		return err
	}
	return ok(w, positionID(p, t.Partition))
}

// unload closes the topic (every partition of a partitioned one) where it
// is served; clients reconnect and it loads again.
func (h *handler) unload(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n > 0 {
		err = h.onPartitions(r, t, n, "PUT", "/unload", nil, func(p topology.TopicName) ([]byte, error) {
			h.svc.Unload(p)
			return nil, nil
		}, nil)
		if err != nil {
			return err
		}
		return noContent(w)
	}
	if err := h.localOrRedirect(r, t); err != nil {
		return err
	}
	h.svc.Unload(t)
	return noContent(w)
}

// ---- subscriptions ----

// subscriptions lists the subscriptions of t (of all its partitions).
func (h *handler) subscriptions(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	var names []string
	var collected [][]byte
	n, err := h.partitionCount(t)
	if err != nil {
		return err
	}
	if n == 0 {
		tp, err := h.loaded(r, t)
		if err != nil {
			return err
		}
		names = tp.Subscriptions()
	} else {
		err = h.onPartitions(r, t, n, "GET", "/subscriptions", nil, func(p topology.TopicName) ([]byte, error) {
			tp, err := h.svc.Topic(r.Context(), p, false)
			if err != nil {
				return nil, err
			}
			return json.Marshal(tp.Subscriptions())
		}, func(_ topology.TopicName, b []byte) error {
			collected = append(collected, b)
			return nil
		})
		if err != nil {
			return err
		}
		for _, b := range collected {
			var part []string
			if err := json.Unmarshal(b, &part); err != nil {
				return fmt.Errorf("%w: subscriptions of a partition: %v", wire.ErrServiceNotReady, err)
			}
			names = append(names, part...)
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	if names == nil {
		names = []string{}
	}
	return ok(w, names)
}

// createSubscription creates a durable subscription at the message id in
// the body (that message is the first delivered), or at the end when there
// is none; pulsaradmin's Latest and Earliest ids mean the end and the
// beginning. A topic that does not exist yet is created first when auto
// topic creation allows it, as on Pulsar; otherwise the answer is 404.
func (h *handler) createSubscription(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	sub := r.PathValue("sub")
	var id *messageID
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		id = new(messageID)
		if err := decodeJSON(body, id); err != nil {
			return err
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var start *mledger.Position
	switch {
	case id == nil || id.LedgerID == math.MaxInt64:
	case id.LedgerID < 0:
		start = &mledger.Position{Ledger: -1, Entry: -1}
	default:
		start = &mledger.Position{Ledger: id.LedgerID, Entry: id.EntryID - 1}
	}
	err = h.eachTopicCreating(r, t, func(tp *broker.Topic) error {
		if slices.Contains(tp.Subscriptions(), sub) {
			return fmt.Errorf("%w: subscription %s already exists on %s", ErrConflict, sub, tp.Name())
		}
		return tp.CreateSubscription(r.Context(), sub, start)
	})
	if err != nil {
		return err
	}
	return noContent(w)
}

func (h *handler) deleteSubscription(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	force, err := queryBool(r, "force")
	if err != nil {
		return err
	}
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.DeleteSubscription(r.Context(), sub, force) })
}

// onSubscription runs op on the subscription named in the path, on t or
// on each of its partitions, and answers 204.
func (h *handler) onSubscription(w http.ResponseWriter, r *http.Request, t topology.TopicName, op func(tp *broker.Topic, sub string) error) error {
	sub := r.PathValue("sub")
	if err := h.eachTopic(r, t, func(tp *broker.Topic) error { return op(tp, sub) }); err != nil {
		return err
	}
	return noContent(w)
}

func (h *handler) skip(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%w: number of messages %q is not a non-negative number", ErrBadRequest, r.PathValue("n"))
	}
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.Skip(sub, n) })
}

func (h *handler) skipAll(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.Skip(sub, -1) })
}

func (h *handler) resetToTime(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	at, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not a number of milliseconds", ErrBadRequest, r.PathValue("timestamp"))
	}
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.ResetCursor(r.Context(), sub, nil, &at) })
}

// resetToID moves a subscription so that the message in the body is the
// next delivered.
func (h *handler) resetToID(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	var id messageID
	if err := decodeJSON(body, &id); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if n, err := h.partitionCount(t); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("%w: reset-cursor to a message id is not allowed on a partitioned topic (as in Pulsar); reset a partition", ErrPrecondition)
	}
	sub := r.PathValue("sub")
	p := mledger.Position{Ledger: id.LedgerID, Entry: id.EntryID}
	if err := h.eachTopic(r, t, func(tp *broker.Topic) error { return tp.ResetCursor(r.Context(), sub, &p, nil) }); err != nil {
		return err
	}
	return noContent(w)
}

// setReplicatedSubscriptionStatus turns a subscription's replication on or
// off, on every partition of a partitioned topic: Pulsar's
// POST …/subscription/{sub}/replicatedSubscriptionStatus with the body true
// or false (204; 404 for a subscription that does not exist, 405 on a
// non-persistent topic, whose subscriptions keep nothing to carry).
func (h *handler) setReplicatedSubscriptionStatus(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	var on bool
	if err := decodeJSON(body, &on); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if t.Domain != topology.Persistent {
		return fmt.Errorf("%w: cannot enable or disable replicated subscriptions on a non-persistent topic", ErrMethodNotAllowed)
	}
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.SetSubscriptionReplicated(sub, on) })
}

// replicatedSubscriptionStatus answers whether a subscription is
// replicated, as Pulsar's GET does: a map from each topic (each partition
// of a partitioned topic) to true or false.
func (h *handler) replicatedSubscriptionStatus(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	sub := r.PathValue("sub")
	out := map[string]bool{}
	err := h.eachTopicAnswer(r, t, func(tp *broker.Topic) ([]byte, error) {
		on, err := tp.SubscriptionReplicated(sub)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]bool{tp.Name(): on})
	}, func(b []byte) error {
		var m map[string]bool
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%w: an owner's answer: %v", ErrNotReady, err)
		}
		maps.Copy(out, m)
		return nil
	})
	if err != nil {
		return err
	}
	return ok(w, out)
}

func (h *handler) expireSeconds(r *http.Request) (time.Duration, error) {
	s, err := strconv.ParseInt(r.PathValue("seconds"), 10, 64)
	if err != nil || s < 0 {
		return 0, fmt.Errorf("%w: expiry %q is not a non-negative number of seconds", ErrBadRequest, r.PathValue("seconds"))
	}
	return time.Duration(s) * time.Second, nil
}

func (h *handler) expire(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	age, err := h.expireSeconds(r)
	if err != nil {
		return err
	}
	return h.onSubscription(w, r, t, func(tp *broker.Topic, sub string) error { return tp.ExpireMessages(r.Context(), sub, age) })
}

func (h *handler) expireAll(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	age, err := h.expireSeconds(r)
	if err != nil {
		return err
	}
	err = h.eachTopic(r, t, func(tp *broker.Topic) error {
		for _, sub := range tp.Subscriptions() {
			if err := tp.ExpireMessages(r.Context(), sub, age); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return noContent(w)
}

// ---- permissions on one topic (kept in its namespace's policies) ----

func (h *handler) topicPermissions(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	p, found := h.svc.Policies().Namespace(t.Tenant, t.Namespace)
	if !found {
		return fmt.Errorf("%w: namespace %s does not exist", ErrNotFound, t.NamespaceName())
	}
	out := map[string][]global.AuthAction{}
	for role, acts := range p.AuthPolicies.NamespaceAuth {
		out[role] = slices.Clone(acts)
	}
	for role, acts := range p.AuthPolicies.DestinationAuth[t.Base().String()] {
		out[role] = append(out[role], acts...)
		slices.Sort(out[role])
		out[role] = slices.Compact(out[role])
	}
	return ok(w, out)
}

func (h *handler) grantTopicPermission(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	var acts []global.AuthAction
	if err := h.mustReadJSON(r, &acts); err != nil {
		return err
	}
	role, name := r.PathValue("role"), t.Base().String()
	return h.updateNamespace(w, r, t.Tenant, t.Namespace, func(p *global.Policies) error {
		if p.AuthPolicies.DestinationAuth == nil {
			p.AuthPolicies.DestinationAuth = map[string]map[string][]global.AuthAction{}
		}
		if p.AuthPolicies.DestinationAuth[name] == nil {
			p.AuthPolicies.DestinationAuth[name] = map[string][]global.AuthAction{}
		}
		p.AuthPolicies.DestinationAuth[name][role] = acts
		return nil
	})
}

func (h *handler) revokeTopicPermission(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	role, name := r.PathValue("role"), t.Base().String()
	return h.updateNamespace(w, r, t.Tenant, t.Namespace, func(p *global.Policies) error {
		if _, ok := p.AuthPolicies.DestinationAuth[name][role]; !ok {
			return fmt.Errorf("%w: role %s has no permission on %s", ErrPrecondition, role, name)
		}
		delete(p.AuthPolicies.DestinationAuth[name], role)
		if len(p.AuthPolicies.DestinationAuth[name]) == 0 {
			delete(p.AuthPolicies.DestinationAuth, name)
		}
		return nil
	})
}
