package admin

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/meridian-mq/meridian/global"
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
		return pulsarReason{ErrPrecondition, fmt.Sprintf("%s %s is not one of the namespace's replication clusters %v", what, region, p.ReplicationClusters)}
	}
	return nil
}
