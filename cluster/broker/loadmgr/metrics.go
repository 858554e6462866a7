package loadmgr

import "github.com/prometheus/client_golang/prometheus"

// metrics are the load manager's meridian_broker_* families. A nil
// *metrics (metrics disabled) records nothing.
type metrics struct {
	ownership *prometheus.CounterVec
	leader    prometheus.Gauge
	balance   *prometheus.CounterVec
}

// The values of meridian_broker_load_balance_total's action label.
const (
	balanceShed       = "shed"        // the leader moved a bundle off a broker
	balanceShedFailed = "shed_failed" // the leader asked for a move that did not happen
	balanceSplit      = "split"       // this broker split one of its bundles
)

// The values of meridian_broker_ownership_changes_total's change label.
const (
	ownershipAcquired = "acquired" // this broker claimed a bundle
	ownershipReleased = "released" // it gave every bundle up on a clean stop
	ownershipLost     = "lost"     // its lease ended: every topic was unloaded
	ownershipHanded   = "handed"   // a bundle was handed to another broker (unload, drain)
	ownershipUnloaded = "unloaded" // a bundle was unloaded with no broker to hand it to
	ownershipPlaced   = "placed"   // it placed an unowned bundle on another broker
	ownershipRevoked  = "revoked"  // it revoked the session of an owner a probe found dead
)

func newMetrics(cfg Config) (*metrics, error) {
	if cfg.Metrics.Disabled {
		return nil, nil
	}
	m := &metrics{
		ownership: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_broker_ownership_changes_total",
			Help: "Changes of this broker's bundle ownership: acquired (a bundle claimed), released (all given up on a clean stop), lost (the lease ended), handed (a bundle handed to another broker), unloaded (a bundle given up with no broker to take it), placed (an unowned bundle placed on another broker), revoked (a dead owner's session revoked to take its bundles).",
		}, []string{"change"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_broker_region_leader",
			Help: "1 while this broker is its region's elected leader (it runs the shedder), else 0.",
		}),
		balance: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_broker_load_balance_total",
			Help: "Load balancing done by this broker: shed (as leader, a bundle moved off a broker), shed_failed (a move asked for that did not happen), split (one of its bundles split in two).",
		}, []string{"action"}),
	}
	for _, a := range []string{balanceShed, balanceShedFailed, balanceSplit} {
		m.balance.WithLabelValues(a)
	}
	for _, c := range []string{ownershipAcquired, ownershipReleased, ownershipLost, ownershipHanded, ownershipUnloaded, ownershipPlaced, ownershipRevoked} {
		m.ownership.WithLabelValues(c)
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.ownership, m.leader, m.balance} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) ownershipChanged(change string) {
	if m != nil {
		m.ownership.WithLabelValues(change).Inc()
	}
}

func (m *metrics) leading(on bool) {
	if m != nil {
		v := 0.0
		if on {
			v = 1
		}
		m.leader.Set(v)
	}
}

func (m *metrics) balanced(action string) {
	if m != nil {
		m.balance.WithLabelValues(action).Inc()
	}
}
