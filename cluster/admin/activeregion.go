package admin

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// The active region of a namespace (DESIGN §6): the region whose brokers
// answer its lookups, and the regions that take over from it, in order.
// Meridian's own endpoint, as Pulsar has none:
//
//	GET    /admin/v2/namespaces/{tenant}/{namespace}/activeRegion  {"activeRegion":"r1","fallbackRegions":["r2"]}, or 204 when unset
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/activeRegion  the same body; fallbackRegions may be left out
//	DELETE /admin/v2/namespaces/{tenant}/{namespace}/activeRegion  every region serves its own clients again
//
// It is a namespace admin's (tenant admin or superuser), as Pulsar's
// namespace policies are. A region that does not exist or is not one of the
// namespace's replication clusters, and a fallback list that names the
// active region or a region twice, are refused with 412 and a reason;
// nothing is stored. The checks run on the record the update replaces, so
// a concurrent change of the replication clusters cannot slip past them,
// and the global store checks the result again as a whole.

func (h *handler) routeActiveRegion() {
	const path = "/admin/v2/namespaces/{tenant}/{namespace}/activeRegion"
	h.handle("GET "+path, opTenantAdmin, h.policy(func(p global.Policies) any {
		if p.ActiveRegion == "" {
			return nil
		}
		return activeRegionBody{ActiveRegion: p.ActiveRegion, FallbackRegions: p.FallbackRegions()}
	}))
	h.handle("POST "+path, opTenantAdmin, h.setActiveRegion)
	h.handle("DELETE "+path, opTenantAdmin, h.clearPolicy(func(p *global.Policies) {
		p.ActiveRegion = ""
		p.SetFallbackRegions(nil)
	}))
}

// A topic's own active region (global.TopicPolicies.ActiveRegion), over
// the namespace's, as Pulsar's topic policies override namespace ones:
//
//	GET    /admin/v2/persistent/{tenant}/{namespace}/{topic}/activeRegion  {"activeRegion":"r1"}, or null when unset, as Pulsar's topic policies answer (?applied=true: the topic's, else the namespace's)
//	POST   /admin/v2/persistent/{tenant}/{namespace}/{topic}/activeRegion  {"activeRegion":"r1"}
//	DELETE /admin/v2/persistent/{tenant}/{namespace}/{topic}/activeRegion  the namespace's active region applies again
//
// It moves one topic (a partitioned topic's partitions with it) as the
// namespace's moves all of them, and is switched by hand only: fallback
// regions, which exist for automatic failover, are refused here, and a
// namespace's automatic failover neither watches nor gates such a topic.
// A namespace admin's, as the namespace's is. The region must exist and
// be one of the topic's replication clusters (its own, else the
// namespace's), or the request is refused with 412 and nothing is stored.
func (h *handler) routeTopicActiveRegion() {
	const p = "/admin/v2"
	h.handleTopic("GET", p, "/activeRegion", opTenantAdmin, h.getTopicPolicy(func(tp global.TopicPolicies, e global.Effective, applied bool) any {
		region := tp.ActiveRegion()
		if applied {
			region = e.ActiveRegion
		}
		if region == "" {
			return nil
		}
		return activeRegionBody{ActiveRegion: region}
	}))
	h.handleTopic("POST", p, "/activeRegion", opTenantAdmin, h.setTopicActiveRegion)
	h.handleTopic("DELETE", p, "/activeRegion", opTenantAdmin, h.clearTopicPolicy(func(tp *global.TopicPolicies) { tp.SetActiveRegion("") }))
}

func (h *handler) setTopicActiveRegion(w http.ResponseWriter, r *http.Request, t topology.TopicName) error {
	var body activeRegionBody
	if err := h.mustReadJSON(r, &body); err != nil {
		return err
	}
	switch {
	case body.ActiveRegion == "":
		return fmt.Errorf("%w: activeRegion is required (DELETE removes the topic's active region)", ErrBadRequest)
	case len(body.FallbackRegions) > 0:
		return pulsarReason{ErrPrecondition, "A topic's active region is switched by hand and takes no fallback regions: " +
			"they belong to a namespace's automatic failover"}
	}
	base, err := h.policyTopic(r, t)
	if err != nil {
		return err
	}
	ns, found := h.svc.Policies().Namespace(t.Tenant, t.Namespace)
	if !found {
		return fmt.Errorf("%w: namespace %s does not exist", ErrNotFound, t.NamespaceName())
	}
	err = h.updateTopicPolicies(r, base, func(tp *global.TopicPolicies) error {
		set := ns
		if tp.ReplicationClusters != nil {
			set.ReplicationClusters = tp.ReplicationClusters
		}
		if err := h.checkRegion(&set, "Active region", body.ActiveRegion); err != nil {
			return err
		}
		tp.SetActiveRegion(body.ActiveRegion)
		return nil
	})
	if err != nil {
		return err
	}
	return noContent(w)
}

// activeRegionBody is the endpoint's body and answer.
type activeRegionBody struct {
	ActiveRegion    string   `json:"activeRegion"`
	FallbackRegions []string `json:"fallbackRegions,omitempty"`
}

func (h *handler) setActiveRegion(w http.ResponseWriter, r *http.Request) error {
	var body activeRegionBody
	if err := h.mustReadJSON(r, &body); err != nil {
		return err
	}
	if body.ActiveRegion == "" {
		return fmt.Errorf("%w: activeRegion is required (DELETE removes the active region)", ErrBadRequest)
	}
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		if err := h.checkRegion(p, "Active region", body.ActiveRegion); err != nil {
			return err
		}
		for i, fb := range body.FallbackRegions {
			switch {
			case fb == body.ActiveRegion:
				return pulsarReason{ErrPrecondition, fmt.Sprintf("Fallback region %s is the active region", fb)}
			case slices.Contains(body.FallbackRegions[:i], fb):
				return pulsarReason{ErrPrecondition, fmt.Sprintf("Fallback region %s is named twice", fb)}
			}
			if err := h.checkRegion(p, "Fallback region", fb); err != nil {
				return err
			}
		}
		p.ActiveRegion = body.ActiveRegion
		p.SetFallbackRegions(body.FallbackRegions)
		return nil
	})
}

// checkRegion refuses a region that is not in the cluster registry or not
// one of p's replication clusters; what names the region's role.
func (h *handler) checkRegion(p *global.Policies, what, region string) error {
	if _, found := h.svc.Policies().Cluster(region); !found {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("%s %s does not exist", what, region)}
	}
	if !slices.Contains(p.ReplicationClusters, region) {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("%s %s is not one of the replication clusters %v", what, region, p.ReplicationClusters)}
	}
	return nil
}
