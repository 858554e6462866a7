package admin

import (
	"context"
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
// global.MinAutoFailoverRegions replication clusters, and while a broker
// of one of them may not gate its dispatch by it (gatesDispatch); a delay
// below 1 second is 400. A switch it made is kept in lastSwitch; setting the delay
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
		for _, region := range p.ReplicationClusters {
			if err := h.gatesDispatch(r.Context(), region); err != nil {
				return err
			}
		}
		a, _ := p.AutoFailover()
		a.DelaySeconds = body.DelaySeconds
		p.SetAutoFailover(&a)
		return nil
	})
}

// gatesDispatch refuses automatic failover while a broker of region may
// not gate its dispatch by it: a broker that predates it never stops
// dispatching on its own timer, so a region running one could deliver
// beside the region that took over. Every broker that knows automatic
// failover holds a failover session; each broker the region's cluster
// record lists (its leader keeps the list, while the record is the
// region's) must hold one, and a region whose record an operator wrote
// must show at least one.
func (h *handler) gatesDispatch(ctx context.Context, region string) error {
	sessions, err := h.svc.Global().FailoverSessions(ctx, region)
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, ss := range sessions {
		_, hosts, _ := global.ServiceHosts(ss.ServiceURL)
		for _, host := range hosts {
			held[host] = true
		}
	}
	refuse := func(why string) error {
		return pulsarReason{ErrPrecondition, fmt.Sprintf("Automatic failover needs every broker of region %s to gate its dispatch by it: %s"+
			" (upgrade them first, or wait for them to start)", region, why)}
	}
	if len(sessions) == 0 {
		return refuse("none holds a failover session")
	}
	c, ok := h.svc.Policies().Cluster(region)
	if !ok || !c.MaintainedByRegion {
		return nil
	}
	_, hosts, _ := global.ServiceHosts(c.BrokerServiceURL)
	var missing []string
	for _, host := range hosts {
		if !held[host] {
			missing = append(missing, host)
		}
	}
	if len(missing) > 0 {
		return refuse(fmt.Sprintf("%v hold no failover session", missing))
	}
	return nil
}
