package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/cluster/broker"
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
	rep, found := h.svc.LoadReport()
	if !found {
		return fmt.Errorf("%w: this broker has not made its first load report yet; retry", ErrNotReady)
	}
	return ok(w, rep)
}

// leaderBroker answers the region's elected leader as Pulsar's
// BrokerInfo: its broker id and its web service URL.
func (h *handler) leaderBroker(w http.ResponseWriter, r *http.Request) error {
	leader, err := h.svc.Leader(r.Context())
	if errors.Is(err, broker.ErrNoLeader) {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	if err != nil {
		return err
	}
	return ok(w, brokerInfo{BrokerID: leader.BrokerID, ServiceURL: leader.WebURL})
}

// namespaceBundle validates bundleRange against tenant/ns's bundles with
// Pulsar's statuses and reasons: 404 for a namespace that does not exist,
// 412 for a range that does not parse or is not one of its bundles.
func (h *handler) namespaceBundle(tenant, ns, bundleRange string) (topology.Bundle, error) {
	bundles, err := h.svc.NamespaceBundles(tenant, ns)
	if errors.Is(err, broker.ErrNamespaceNotFound) {
		return topology.Bundle{}, pulsarReason{ErrNotFound, "Namespace does not exist"}
	}
	if err != nil {
		return topology.Bundle{}, err
	}
	lo, hi, found := strings.Cut(bundleRange, "_")
	lower, err1 := strconv.ParseUint(lo, 0, 32)
	upper, err2 := strconv.ParseUint(hi, 0, 32)
	if !found || err1 != nil || err2 != nil {
		return topology.Bundle{}, pulsarReason{ErrPrecondition, "Invalid bundle range: " + bundleRange}
	}
	for _, b := range bundles {
		if uint64(b.Lower) == lower {
			if uint64(b.Upper) != upper {
				return topology.Bundle{}, pulsarReason{ErrPrecondition, "Invalid upper boundary for bundle"}
			}
			return b, nil
		}
	}
	return topology.Bundle{}, pulsarReason{ErrPrecondition, "Cannot find bundle in the bundles list"}
}

// splitAlgorithm is the one split algorithm Meridian has, Pulsar's
// default.
const splitAlgorithm = "range_equally_divide"

// splitBundle splits a bundle in two (range_equally_divide) on its owner,
// redirecting there from any other broker. With unload=true the halves'
// topics loaded here are unloaded afterwards, so that their clients look
// them up again.
func (h *handler) splitBundle(w http.ResponseWriter, r *http.Request) error {
	tenant, ns := r.PathValue("tenant"), r.PathValue("namespace")
	unload, err := queryBool(r, "unload")
	if err != nil {
		return err
	}
	if alg := r.URL.Query().Get("splitAlgorithmName"); alg != "" && alg != splitAlgorithm {
		return pulsarReason{ErrPrecondition, "Unsupported namespace bundle split algorithm, supported algorithms are [" + splitAlgorithm + "]"}
	}
	b, err := h.namespaceBundle(tenant, ns, r.PathValue("bundle"))
	if err != nil {
		return err
	}
	owner, mine, err := h.svc.BundleOwner(r.Context(), tenant, ns, b)
	if err != nil {
		return err
	}
	if !mine {
		if owner.WebURL == "" {
			return fmt.Errorf("%w: bundle %s is served by %s, which has no web service URL", ErrNotReady, b, owner.BrokerID)
		}
		return &redirect{url: strings.TrimSuffix(owner.WebURL, "/") + r.URL.RequestURI()}
	}
	if err := h.svc.SplitBundle(r.Context(), tenant, ns, b); err != nil {
		if errors.Is(err, broker.ErrBundleNotFound) {
			return pulsarReason{ErrPrecondition, "Cannot find bundle in the bundles list"}
		}
		return err
	}
	if unload {
		for _, name := range h.svc.Loaded() {
			t, err := topology.ParseTopicName(name)
			if err != nil || t.Tenant != tenant || t.Namespace != ns {
				continue
			}
			if tb, err := h.svc.Bundle(t); err == nil && tb.Lower >= b.Lower && tb.Upper <= b.Upper {
				h.svc.Unload(t)
			}
		}
	}
	return noContent(w)
}
