package loadmgr

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/telemetry"
)

// metrics are the load manager's meridian_broker_* families, and its
// figures under the names Pulsar's modular load manager serves them
// (pulsar_lb_*, which Pulsar's stock load-balancing dashboard queries). A
// nil *metrics (metrics disabled) records nothing.
type metrics struct {
	ownership *prometheus.CounterVec
	leader    prometheus.Gauge
	balance   *prometheus.CounterVec

	// unloadedBundles and unloadedBrokers are pulsar_lb_unload_bundle_total
	// and pulsar_lb_unload_broker_total: the bundles this broker's shedder
	// moved as leader, and per round the brokers it moved at least one
	// off. splitBundles is pulsar_lb_bundles_split_total: the bundles this
	// broker split because they passed a LoadBalance bound (an admin's
	// split is not counted, as in Pulsar). In Pulsar the leader splits
	// every broker's bundles; here each broker splits its own, so the
	// region's total is the sum over its brokers.
	unloadedBundles, unloadedBrokers, splitBundles prometheus.Counter
}

// The label Pulsar's load manager metrics carry besides cluster (and
// broker, for the usage): which of its metric sets a figure belongs to.
const labelLBMetric = "metric"

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

// newMetrics returns the load manager's metrics, registered; report reads
// the latest load report, which the pulsar_lb_*_usage gauges show.
func newMetrics(cfg Config, report func() (LoadReport, bool)) (*metrics, error) {
	if cfg.Metrics.Disabled {
		return nil, nil
	}
	lbCounter := func(name, set, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help,
			ConstLabels: prometheus.Labels{telemetry.LabelCluster: cfg.Region, labelLBMetric: set}})
	}
	m := &metrics{
		unloadedBundles: lbCounter("pulsar_lb_unload_bundle_total", "bundleUnloading",
			"Bundles this broker's shedder moved off an overloaded broker, or onto one that had none, while it led the region."),
		unloadedBrokers: lbCounter("pulsar_lb_unload_broker_total", "bundleUnloading",
			"Brokers this broker's shedder moved bundles off, counted once per shedding round, while it led the region."),
		splitBundles: lbCounter("pulsar_lb_bundles_split_total", "bundlesSplit",
			"Bundles this broker split because they passed a load balancer bound (loadBalancerNamespaceBundleMax*)."),
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
		usage := &usageCollector{report: report, broker: cfg.Self.BrokerID, region: cfg.Region}
		for _, c := range []prometheus.Collector{m.ownership, m.leader, m.balance, m.unloadedBundles, m.unloadedBrokers, m.splitBundles, usage} {
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

// shed counts one shedding round's successful moves: bundles, and the
// brokers they left.
func (m *metrics) shed(bundles, brokers int) {
	if m != nil {
		m.unloadedBundles.Add(float64(bundles))
		m.unloadedBrokers.Add(float64(brokers))
	}
}

// split counts a bundle the load manager split for passing a bound.
func (m *metrics) split() {
	if m != nil {
		m.splitBundles.Inc()
	}
}

// usageCollector serves the resources of the broker's latest load report
// as Pulsar's pulsar_lb_*_usage gauges: in percent of their limit, by
// Pulsar's rule (ResourceUsage.percentUsage), which is 0 when the limit is
// unknown. So memory reads 0 unless GOMEMLIMIT is set, and bandwidth
// always does: Meridian knows no NIC capacity. Pulsar's
// pulsar_lb_directMemory_usage is not served: a Go process has no direct
// memory. Nothing is served before the first report.
type usageCollector struct {
	report         func() (LoadReport, bool)
	broker, region string
}

// usageFamilies are the gauges usageCollector serves, and the resource of
// the report each reads.
var usageFamilies = []struct {
	desc     *prometheus.Desc
	resource func(*LoadReport) ResourceUsage
}{
	{usageDesc("pulsar_lb_cpu_usage", "CPU time of the broker process, in percent of all the host's cores, over the last load report's interval."),
		func(r *LoadReport) ResourceUsage { return r.CPU }},
	{usageDesc("pulsar_lb_memory_usage", "Go heap in use, in percent of GOMEMLIMIT; 0 when no limit is set."),
		func(r *LoadReport) ResourceUsage { return r.Memory }},
	{usageDesc("pulsar_lb_bandwidth_in_usage", "Message bytes in, in percent of the NIC's capacity: always 0, as Meridian knows no capacity (the load report has the rate in kbit/s)."),
		func(r *LoadReport) ResourceUsage { return r.BandwidthIn }},
	{usageDesc("pulsar_lb_bandwidth_out_usage", "Message bytes out, in percent of the NIC's capacity: always 0, as Meridian knows no capacity (the load report has the rate in kbit/s)."),
		func(r *LoadReport) ResourceUsage { return r.BandwidthOut }},
}

// percent is Pulsar's ResourceUsage.percentUsage: the usage in percent of
// the limit, 0 when the limit is unknown (0).
func (u ResourceUsage) percent() float64 {
	if u.Limit <= 0 {
		return 0
	}
	return 100 * u.Usage / u.Limit
}

func usageDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{telemetry.LabelCluster, "broker"}, prometheus.Labels{labelLBMetric: "loadBalancing"})
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range usageFamilies {
		ch <- f.desc
	}
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.report()
	if !ok {
		return
	}
	for _, f := range usageFamilies {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, f.resource(&r).percent(), c.region, c.broker)
	}
}
