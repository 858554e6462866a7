package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Topic-level policies: the overrides global.TopicPolicies holds (message
// TTL, retention, backlog quotas, deduplication, replication clusters,
// schema compatibility strategy), kept in the topic's record in the global
// store. A GET answers the topic's own value (null when unset), or with
// applied=true the effective one (topic, then namespace, then broker).
// Pulsar's other topic policies (max producers, rates, …) are stored and
// answered but not enforced; see stored.go.

func (h *handler) routeTopicPolicies() {
	const p = "/admin/v2"
	h.handleTopic("GET", p, "/messageTTL", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.MessageTTLInSeconds
		}
		return tp.MessageTTLInSeconds
	}))
	h.handleTopic("POST", p, "/messageTTL", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		v, err := strconv.Atoi(r.URL.Query().Get("messageTTL"))
		if err != nil {
			if err := h.mustReadJSON(r, &v); err != nil {
				return err
			}
		}
		tp.MessageTTLInSeconds = &v
		return nil
	}))
	h.handleTopic("DELETE", p, "/messageTTL", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.MessageTTLInSeconds = nil }))

	h.handleTopic("GET", p, "/retention", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.Retention
		}
		return tp.RetentionPolicies
	}))
	h.handleTopic("POST", p, "/retention", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		var v global.RetentionPolicies
		if err := h.mustReadJSON(r, &v); err != nil {
			return err
		}
		tp.RetentionPolicies = &v
		return nil
	}))
	h.handleTopic("DELETE", p, "/retention", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.RetentionPolicies = nil }))

	h.handleTopic("GET", p, "/backlogQuotaMap", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.BacklogQuotas
		}
		if tp.BacklogQuotaMap == nil {
			return map[global.BacklogQuotaType]global.BacklogQuota{}
		}
		return tp.BacklogQuotaMap
	}))
	h.handleTopic("POST", p, "/backlogQuota", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		var b backlogQuotaBody
		if err := h.mustReadJSON(r, &b); err != nil {
			return err
		}
		if tp.BacklogQuotaMap == nil {
			tp.BacklogQuotaMap = map[global.BacklogQuotaType]global.BacklogQuota{}
		}
		tp.BacklogQuotaMap[backlogQuotaType(r)] = b.quota()
		return nil
	}))
	h.handleTopic("DELETE", p, "/backlogQuota", opTenantAdmin, h.clearTopicPolicyReq(func(r *http.Request, tp *global.TopicPolicies) {
		delete(tp.BacklogQuotaMap, backlogQuotaType(r))
	}))

	h.handleTopic("GET", p, "/deduplicationEnabled", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.DeduplicationEnabled
		}
		return tp.DeduplicationEnabled
	}))
	h.handleTopic("POST", p, "/deduplicationEnabled", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		var v bool
		if err := h.mustReadJSON(r, &v); err != nil {
			return err
		}
		tp.DeduplicationEnabled = &v
		return nil
	}))
	h.handleTopic("DELETE", p, "/deduplicationEnabled", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.DeduplicationEnabled = nil }))

	h.handleTopic("GET", p, "/replication", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.ReplicationClusters
		}
		return tp.ReplicationClusters
	}))
	h.handleTopic("POST", p, "/replication", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		var v []string
		if err := h.mustReadJSON(r, &v); err != nil {
			return err
		}
		if v == nil {
			v = []string{}
		}
		tp.ReplicationClusters = v
		return nil
	}))
	h.handleTopic("DELETE", p, "/replication", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.ReplicationClusters = nil }))

	h.handleTopic("GET", p, "/schemaCompatibilityStrategy", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		if applied {
			return e.SchemaCompatibilityStrategy
		}
		if tp.SchemaCompatibilityStrategy == "" {
			return nil
		}
		return tp.SchemaCompatibilityStrategy
	}))
	h.handleTopic("PUT", p, "/schemaCompatibilityStrategy", opTenantAdmin, h.setTopicPolicy(func(r *http.Request, tp *global.TopicPolicies) error {
		s, err := h.readSchemaStrategy(r)
		if err != nil {
			return err
		}
		tp.SchemaCompatibilityStrategy = s
		return nil
	}))
	h.handleTopic("DELETE", p, "/schemaCompatibilityStrategy", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.SchemaCompatibilityStrategy = "" }))
}

// policyTopic checks that t exists (a partitioned topic, or one stored in
// this region) and returns the name its policies are kept under: the
// partitioned topic's for a partition.
func (h *handler) policyTopic(r *http.Request, t topology.TopicName) (topology.TopicName, error) {
	base := t.Base()
	n, err := h.partitionCount(base)
	if err != nil {
		return base, err
	}
	if n > 0 {
		return base, nil
	}
	found, err := h.exists(r, t)
	if err != nil {
		return base, err
	}
	if !found {
		return base, fmt.Errorf("%w: topic %s does not exist", ErrNotFound, t)
	}
	return base, nil
}

func (h *handler) getTopicPolicy(field func(tp global.TopicPolicies, e global.Effective, applied bool) any) topicRoute {
	return func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
		applied, err := queryBool(r, "applied")
		if err != nil {
			return err
		}
		base, err := h.policyTopic(r, t)
		if err != nil {
			return err
		}
		tp, _ := h.svc.Policies().Topic(base)
		eff, err := h.svc.Policies().Resolve(base, h.cfg.PolicyDefaults)
		if err != nil {
			return err
		}
		v := field(tp, eff, applied)
		if isNil(v) {
			return ok(w, nil)
		}
		return ok(w, v)
	}
}

// updateTopicPolicies applies mutate to t's record, creating the record
// (with no partitions) when t has none.
func (h *handler) updateTopicPolicies(r *http.Request, t topology.TopicName, mutate func(*global.TopicPolicies) error) error {
	_, rc, err := h.svc.Global().UpdateTopic(r.Context(), t, mutate)
	if errors.Is(err, global.ErrNotFound) {
		var tp global.TopicPolicies
		if err := mutate(&tp); err != nil {
			return err
		}
		rc, err = h.svc.Global().CreateTopic(r.Context(), t, tp)
		if errors.Is(err, global.ErrExists) { // a concurrent create: apply over it
			_, rc, err = h.svc.Global().UpdateTopic(r.Context(), t, mutate)
		}
	}
	if err != nil {
		return err
	}
	h.await(r, rc)
	return nil
}

func (h *handler) setTopicPolicy(set func(r *http.Request, tp *global.TopicPolicies) error) topicRoute {
	return func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
		base, err := h.policyTopic(r, t)
		if err != nil {
			return err
		}
		// Read the body once: the mutation may run again on a conflict.
		var staged global.TopicPolicies
		if err := set(r, &staged); err != nil {
			return err
		}
		err = h.updateTopicPolicies(r, base, func(tp *global.TopicPolicies) error {
			mergeTopicPolicy(tp, staged)
			return nil
		})
		if err != nil {
			return err
		}
		h.warnUnbuiltTopic(w, r, base)
		return noContent(w)
	}
}

// mergeTopicPolicy copies the fields set in staged onto tp.
func mergeTopicPolicy(tp *global.TopicPolicies, staged global.TopicPolicies) {
	if staged.MessageTTLInSeconds != nil {
		tp.MessageTTLInSeconds = staged.MessageTTLInSeconds
	}
	if staged.RetentionPolicies != nil {
		tp.RetentionPolicies = staged.RetentionPolicies
	}
	if staged.DeduplicationEnabled != nil {
		tp.DeduplicationEnabled = staged.DeduplicationEnabled
	}
	if staged.ReplicationClusters != nil {
		tp.ReplicationClusters = staged.ReplicationClusters
	}
	if staged.SchemaCompatibilityStrategy != "" {
		tp.SchemaCompatibilityStrategy = staged.SchemaCompatibilityStrategy
	}
	for k, v := range staged.BacklogQuotaMap {
		if tp.BacklogQuotaMap == nil {
			tp.BacklogQuotaMap = map[global.BacklogQuotaType]global.BacklogQuota{}
		}
		tp.BacklogQuotaMap[k] = v
	}
}

func (h *handler) clearTopicPolicy(clear func(tp *global.TopicPolicies)) topicRoute {
	return h.clearTopicPolicyReq(func(_ *http.Request, tp *global.TopicPolicies) { clear(tp) })
}

func (h *handler) clearTopicPolicyReq(clear func(r *http.Request, tp *global.TopicPolicies)) topicRoute {
	return func(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
		base, err := h.policyTopic(r, t)
		if err != nil {
			return err
		}
		_, rc, err := h.svc.Global().UpdateTopic(r.Context(), base, func(tp *global.TopicPolicies) error {
			clear(r, tp)
			return nil
		})
		if err != nil && !errors.Is(err, global.ErrNotFound) {
			return err
		}
		if err == nil {
			h.await(r, rc)
		}
		return noContent(w)
	}
}
