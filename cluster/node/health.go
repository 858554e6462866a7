package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"

	"github.com/meridian-mq/meridian/telemetry"
)

// The health and readiness endpoints of every role, at the paths that
// orchestrators and Pulsar's and BookKeeper's tooling already probe:
//
//	broker, on its web port:
//	  GET /status.html              200 "OK" while the broker serves; 503 once it drains (Pulsar's chart probes it)
//	  GET /health                   200 "OK" while the process answers: liveness, never a dependency's state
//	  GET /admin/v2/brokers/ready   the admin API's, which also asks the region's etcd
//	a region's own metrics listener (RegionConfig.MetricsAddr: bookie, replicator):
//	  GET /metrics                  the region's Prometheus registry
//	  GET /health                   as above
//	  GET /ready                    200 "OK" once every part of the region in this process is ready, else 503 and why
//	  GET /api/v1/bookie/is_ready   BookKeeper's: 200 "OK" while the bookies are registered, else 503
//	  GET /api/v1/bookie/state      BookKeeper's JSON state: running, readOnly, shuttingDown, availableForHighPriorityWrites
//
// A bookie is ready while it is registered under a live lease (read-only
// included: it still serves reads, as BookKeeper's is_ready says). A
// replication worker is ready while it is registered under a live lease
// in its region's store, whether it holds tasks or not: a remote region's
// outage never makes it unready, and readiness is never a liveness probe
// (a worker cut off from etcd recovers by itself once etcd is back).
// etcd serves its own /health on its client URLs.

// healthOK is the body of every positive answer, as Pulsar and BookKeeper
// write it.
const healthOK = "OK"

// addLiveness serves GET /health: the process answers HTTP.
func addLiveness(mux *http.ServeMux) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, healthOK)
	})
}

// addPprof serves Go's runtime profiles under /debug/pprof/ (heap,
// goroutine, allocs, profile?seconds=N, trace, ...), as net/http/pprof
// registers them on the default mux, which Meridian does not serve.
func addPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// metricsHandler is what a region's own metrics listener serves: /metrics,
// liveness, readiness, BookKeeper's routes when the region runs bookies in
// this process, and the profiles with pprof.
func (r *Region) metricsHandler(pprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.MetricsHandler(r.parts.registry))
	addLiveness(mux)
	if pprof {
		addPprof(mux)
	}
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.Ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeText(w, http.StatusOK, healthOK)
	})
	if len(r.bookies) > 0 {
		mux.HandleFunc("GET /api/v1/bookie/is_ready", func(w http.ResponseWriter, _ *http.Request) {
			if err := r.bookiesReady(); err != nil {
				writeText(w, http.StatusServiceUnavailable, err.Error())
				return
			}
			writeText(w, http.StatusOK, healthOK)
		})
		mux.HandleFunc("GET /api/v1/bookie/state", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(r.bookieState())
		})
	}
	return mux
}

// BookieState is BookKeeper's /api/v1/bookie/state answer. For a region
// with several bookies in this process it is their conjunction: running
// only if all run, read-only if any is.
type BookieState struct {
	Running                        bool `json:"running"`
	ReadOnly                       bool `json:"readOnly"`
	ShuttingDown                   bool `json:"shuttingDown"`
	AvailableForHighPriorityWrites bool `json:"availableForHighPriorityWrites"`
}

func (r *Region) bookieState() BookieState {
	s := BookieState{Running: true}
	for _, b := range r.bookies {
		stopped := false
		select {
		case <-b.Done():
			stopped = true
		default:
		}
		s.Running = s.Running && b.Registered()
		s.ReadOnly = s.ReadOnly || b.ReadOnly()
		s.ShuttingDown = s.ShuttingDown || stopped
	}
	s.AvailableForHighPriorityWrites = s.Running && !s.ReadOnly
	return s
}

// Ready is nil once every part of the region in this process is ready:
// each bookie registered under a live lease, the replication worker
// registered under its lease, and the broker serving and not draining.
// Otherwise it says which part is not, and why.
func (r *Region) Ready() error {
	errs := []error{r.bookiesReady()}
	if r.replicator != nil && !r.replicator.Ready() {
		errs = append(errs, fmt.Errorf("replicator %s is not registered in region %s's etcd (unreachable for longer than its lease?)", r.replicator.ID(), r.parts.name))
	}
	if r.broker != nil {
		errs = append(errs, r.broker.Ready())
	}
	return errors.Join(errs...)
}

func (r *Region) bookiesReady() error {
	var errs []error
	for _, b := range r.bookies {
		if !b.Registered() {
			errs = append(errs, fmt.Errorf("bookie at %s is not registered in region %s's etcd (starting, stopping, or etcd unreachable)", b.Addr(), r.parts.name))
		}
	}
	return errors.Join(errs...)
}

// Ready is nil while the broker serves clients and is not draining its
// bundles for a stop.
func (n *Broker) Ready() error {
	if n.draining.Load() {
		return errors.New("broker " + n.id + " is draining: it hands its bundles to the other brokers and stops")
	}
	return nil
}

// statusPage serves Pulsar's /status.html: "OK" while ready, 503 while
// draining, so that a load balancer or a Service stops sending new clients
// to a broker that is stopping.
func (n *Broker) statusPage(w http.ResponseWriter, _ *http.Request) {
	if err := n.Ready(); err != nil {
		writeText(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeText(w, http.StatusOK, healthOK)
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, body)
}
