package admin

import (
	"fmt"
	"net/http"

	"github.com/meridian-mq/meridian/global"
)

// A namespace's automatic region failover (cluster/broker's failover.go).
// Meridian's own endpoint, as Pulsar has none:
//
//	GET    /admin/v2/namespaces/{tenant}/{namespace}/autoFailover  {"delaySeconds":30,"lastSwitch":{...}}, or 204 when off
//	POST   /admin/v2/namespaces/{tenant}/{namespace}/autoFailover  {"delaySeconds":30}
//	DELETE /admin/v2/namespaces/{tenant}/{namespace}/autoFailover  off again
//
// Turning it on or off is a superuser's, as Pulsar's migration and
// failover settings are: it decides which region may deliver the
// namespace's messages. Reading it is a namespace admin's. It is refused
// with 412 and a reason, and nothing is stored, unless the namespace has
// an active region, a fallback region, and at least
// global.MinAutoFailoverRegions replication clusters; a delay below 1
// second is 400. A switch it made is kept in lastSwitch; setting the delay
// again keeps it.

func (h *handler) routeAutoFailover() {
	const path = "/admin/v2/namespaces/{tenant}/{namespace}/autoFailover"
	h.handle("GET "+path, opTenantAdmin, h.policy(func(p global.Policies) any {
		if a, on := p.AutoFailover(); on {
			return a
		}
		return nil
	}))
	h.handle("POST "+path, opSuperUser, h.setAutoFailover)
	h.handle("DELETE "+path, opSuperUser, h.clearPolicy(func(p *global.Policies) { p.SetAutoFailover(nil) }))
}

// autoFailoverBody is the POST's body.
type autoFailoverBody struct {
	DelaySeconds int `json:"delaySeconds"`
}

func (h *handler) setAutoFailover(w http.ResponseWriter, r *http.Request) error {
	var body autoFailoverBody
	if err := h.mustReadJSON(r, &body); err != nil {
		return err
	}
	if body.DelaySeconds < 1 {
		return fmt.Errorf("%w: delaySeconds must be at least 1, got %d", ErrBadRequest, body.DelaySeconds)
	}
	return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
		switch {
		case p.ActiveRegion == "":
			return pulsarReason{ErrPrecondition, "Automatic failover needs an active region (set-active-region first)"}
		case len(p.FallbackRegions()) == 0:
			return pulsarReason{ErrPrecondition, "Automatic failover needs at least one fallback region (set-active-region --fallback)"}
		case len(p.ReplicationClusters) < global.MinAutoFailoverRegions:
			return pulsarReason{ErrPrecondition, fmt.Sprintf("Automatic failover needs at least %d replication clusters, so that a majority of them decides; the namespace has %v",
				global.MinAutoFailoverRegions, p.ReplicationClusters)}
		}
		a, _ := p.AutoFailover()
		a.DelaySeconds = body.DelaySeconds
		p.SetAutoFailover(&a)
		return nil
	})
}
