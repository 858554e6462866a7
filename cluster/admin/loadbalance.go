package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/topology"
)

// This file is the admin side of load balancing: the broker's load report
// (pulsaradmin's BrokerStats().GetLoadReport), the region's elected leader
// (Brokers().GetLeaderBroker) and bundle split
// (Namespaces().SplitNamespaceBundle).

func (h *handler) routeLoadBalance() {
	h.handle("GET /admin/v2/broker-stats/load-report", opSuperUser, h.loadReport)
	h.handle("GET /admin/v2/brokers/leaderBroker", opSuperUser, h.leaderBroker)
	h.handle("PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split", opTenantAdmin, h.splitBundle)
}

// loadReport answers this broker's latest load report, Pulsar's
// LocalBrokerData.
func (h *handler) loadReport(w http.ResponseWriter, r *http.Request) error {
	rep, found := h.lm.LoadReport()
	if !found {
		return fmt.Errorf("%w: this broker has not made its first load report yet; retry", ErrNotReady)
	}
	return ok(w, rep)
}

// leaderBroker answers the region's elected leader as Pulsar's
// BrokerInfo: its broker id and its web service URL.
func (h *handler) leaderBroker(w http.ResponseWriter, r *http.Request) error {
	leader, err := h.lm.Leader(r.Context())
	if errors.Is(err, loadmgr.ErrNoLeader) {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if err != nil {
		return err
	}
	return ok(w, brokerInfo{BrokerID: leader.BrokerID, ServiceURL: leader.WebURL})
}

// splitAlgorithm is the one split algorithm Meridian has, Pulsar's
// default.
const splitAlgorithm = "range_equally_divide"

// splitBundle splits a bundle in two (range_equally_divide) on its owner,
// redirecting there from any other broker. With unload=true both halves
// are then unloaded (handed to the brokers placement chooses), as Pulsar
// unloads the split bundles.
func (h *handler) splitBundle(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	unload, err := queryBool(r, "unload")
	if err != nil {
		return err
	}
	if alg := r.URL.Query().Get("splitAlgorithmName"); alg != "" && alg != splitAlgorithm {
		return pulsarReason{ErrPrecondition, "Unsupported namespace bundle split algorithm, supported algorithms are [" + splitAlgorithm + "]"}
	}
	if err := h.namespaceExists(tenant, ns); err != nil {
		return err
	}
	b, err := h.namespaceBundle(tenant, ns, r.PathValue("bundle"))
	if err != nil {
		return err
	}
	owner, mine, err := h.lm.BundleOwner(r.Context(), tenant, ns, b)
	if err != nil {
		return err
	}
	if !mine {
		if owner.WebURL == "" {
			return fmt.Errorf("%w: bundle %s is served by %s, which has no web service URL", ErrNotReady, b, owner.BrokerID)
		}
		return &redirect{url: strings.TrimSuffix(owner.WebURL, "/") + r.URL.RequestURI()}
	}
	lo, hi, err := h.lm.SplitBundle(r.Context(), tenant, ns, b)
	if errors.Is(err, loadmgr.ErrBundleNotFound) {
		return pulsarReason{ErrPrecondition, "Cannot find bundle in the bundles list"}
	}
	if err != nil {
		return err
	}
	if unload {
		for _, half := range []topology.Bundle{lo, hi} {
			if err := h.lm.UnloadBundle(r.Context(), tenant, ns, half, ""); err != nil {
				return fmt.Errorf("split %s into %s and %s, but unloading them failed: %w", b, lo, hi, err)
			}
		}
	}
	return noContent(w)
}
