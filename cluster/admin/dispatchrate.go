package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/meridian-mq/meridian/global"
)

// The replicator dispatch rate (Pulsar's replicatorDispatchRate), which the
// replicator enforces (replicator/ratelimit.go). A namespace keeps one rate
// per source region, as Pulsar keys it by cluster: the admin API of a
// region sets, answers and removes that region's rate, which limits the
// namespace's replication out of it. A topic keeps one rate for its
// replication out of every region; it is a row of the stored-policy table
// (stored.go) whose body is checked as a DispatchRate.

func (h *handler) routeReplicatorDispatchRate() {
	const path = "/admin/v2/namespaces/{tenant}/{namespace}/replicatorDispatchRate"
	h.handle("GET "+path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
		tenant, name := r.PathValue("tenant"), r.PathValue("namespace")
		p, found := h.svc.Policies().Namespace(tenant, name)
		if !found {
			return fmt.Errorf("%w: namespace %s/%s does not exist", ErrNotFound, tenant, name)
		}
		rate, set := global.NamespaceReplicatorDispatchRates(p.Extra)[h.svc.Region()]
		if !set {
			return noContent(w) // as Pulsar answers an unset rate
		}
		return ok(w, rate)
	})
	set := func(w http.ResponseWriter, r *http.Request) error {
		b, err := h.readBody(r)
		if err != nil {
			return err
		}
		rate, err := parseDispatchRate(b)
		if err != nil {
			return err
		}
		return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
			return setRegionRate(p, h.svc.Region(), &rate)
		})
	}
	h.handle("POST "+path, opTenantAdmin, set)
	h.handle("PUT "+path, opTenantAdmin, set)
	h.handle("DELETE "+path, opTenantAdmin, func(w http.ResponseWriter, r *http.Request) error {
		return h.updateNamespace(w, r, r.PathValue("tenant"), r.PathValue("namespace"), func(p *global.Policies) error {
			return setRegionRate(p, h.svc.Region(), nil)
		})
	})
}

// parseDispatchRate reads a DispatchRate body. A field left out takes
// Pulsar's default (no limit, a period of one second), so that a body with
// only dispatchThrottlingRateInMsg means that many messages per second.
func parseDispatchRate(body []byte) (global.DispatchRate, error) {
	rate := global.DispatchRate{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if len(bytes.TrimSpace(body)) == 0 {
		return rate, fmt.Errorf("%w: a JSON body is required", ErrBadRequest)
	}
	if err := strictJSON(body, &rate); err != nil {
		return rate, fmt.Errorf("%w: Invalid value for replicatorDispatchRate: want {dispatchThrottlingRateInMsg, dispatchThrottlingRateInByte, ratePeriodInSecond}: %v",
			ErrPrecondition, err)
	}
	return rate, rate.Validate()
}

// setRegionRate sets region's entry of p's rates, or removes it when rate is
// nil (and the policy with its last entry).
func setRegionRate(p *global.Policies, region string, rate *global.DispatchRate) error {
	rates := global.NamespaceReplicatorDispatchRates(p.Extra)
	if rates == nil {
		rates = map[string]global.DispatchRate{}
	}
	if rate != nil {
		rates[region] = *rate
	} else {
		delete(rates, region)
	}
	if len(rates) == 0 {
		delete(p.Extra, global.ExtraReplicatorDispatchRate)
		return nil
	}
	b, err := json.Marshal(rates)
	if err != nil {
		return err
	}
	if p.Extra == nil {
		p.Extra = global.Extra{}
	}
	p.Extra[global.ExtraReplicatorDispatchRate] = b
	return nil
}
