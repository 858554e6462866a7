package broker

import (
	"fmt"
	"time"
)

// Load balancing spreads a region's bundles over its brokers, in four
// parts that share this file's Config:
//
//   - every broker publishes a load report (loadreport.go) under its
//     registration each ReportInterval;
//   - one broker per region is elected leader (leader.go);
//   - the leader runs the shedder (shedder.go) each SheddingInterval: it
//     reads the reports and asks overloaded brokers to give bundles to the
//     least-loaded ones, and gives a broker that joined bundles of its own;
//   - every broker splits the bundles it owns that grew past the
//     loadBalancerNamespaceBundleMax* bounds (split.go), after each report.
//
// Placement of a bundle nobody owns is the lookup's business (the least
// loaded live broker, from the same reports); moving a bundle is the
// owner's (requestUnload).

// LoadBalanceConfig configures load reports, shedding and bundle split.
// The names in brackets are Pulsar's broker.conf settings, which the
// assembly maps onto these fields.
type LoadBalanceConfig struct {
	// ReportInterval is how often the broker computes and publishes its
	// load report; its rates are averages over one interval
	// [loadBalancerReportUpdateMinIntervalMillis, 5s]. Shorter reacts
	// sooner and writes etcd more often (one small write per broker per
	// interval). At least 100ms.
	ReportInterval time.Duration

	// SheddingEnabled lets the leader move bundles off overloaded brokers
	// [loadBalancerSheddingEnabled, true].
	SheddingEnabled bool
	// SheddingInterval is how often the leader looks for overloaded
	// brokers [loadBalancerSheddingIntervalMinutes, 1 minute]. A broker
	// that joins a running region receives bundles within one interval.
	// At least ReportInterval: a round needs fresh reports.
	SheddingInterval time.Duration
	// SheddingThreshold is how far, in percentage points of the region's
	// load, a broker's load may sit above the region's average before it
	// sheds [loadBalancerBrokerThresholdShedderPercentage, 10]. 1..100.
	SheddingThreshold float64
	// SheddingGracePeriod is how long a moved bundle stays where it was
	// put before it may move again, so that bundles do not ping-pong
	// [loadBalancerSheddingGracePeriodMinutes, 30 minutes]. At least 0.
	SheddingGracePeriod time.Duration
	// MinSheddingThroughput is the smallest throughput, in and out, in
	// bytes per second, of a bundle worth moving for load: an idle bundle
	// moved buys nothing and costs its clients a reconnect
	// [loadBalancerBundleUnloadMinThroughputThreshold, in MB; Pulsar's 10
	// MB is for hosts of their own, Meridian's default is 1 MiB]. A broker
	// that joined gets bundles whatever their throughput. At least 0.
	MinSheddingThroughput float64

	// AutoBundleSplit lets a broker split the bundles it owns that pass
	// one of the bounds below [loadBalancerAutoBundleSplitEnabled, true].
	AutoBundleSplit bool
	// BundleMaxTopics bounds the topics of a bundle
	// [loadBalancerNamespaceBundleMaxTopics, 1000]. At least 1.
	BundleMaxTopics int
	// BundleMaxSessions bounds the producers and consumers of a bundle
	// [loadBalancerNamespaceBundleMaxSessions, 1000]. At least 1.
	BundleMaxSessions int
	// BundleMaxMsgRate bounds the messages per second in and out of a
	// bundle [loadBalancerNamespaceBundleMaxMsgRate, 30000]. At least 1.
	BundleMaxMsgRate float64
	// BundleMaxThroughput bounds the bytes per second in and out of a
	// bundle [loadBalancerNamespaceBundleMaxBandwidthMbytes, 100 MB]. At
	// least 1.
	BundleMaxThroughput float64
	// MaxBundles is the most bundles a namespace is split into
	// [loadBalancerNamespaceMaximumBundles, 128]. 1..1024.
	MaxBundles int
}

// DefaultLoadBalanceConfig returns Pulsar's defaults, but for
// MinSheddingThroughput (see there).
func DefaultLoadBalanceConfig() LoadBalanceConfig {
	return LoadBalanceConfig{
		ReportInterval:        5 * time.Second,
		SheddingEnabled:       true,
		SheddingInterval:      time.Minute,
		SheddingThreshold:     10,
		SheddingGracePeriod:   30 * time.Minute,
		MinSheddingThroughput: 1 << 20,
		AutoBundleSplit:       true,
		BundleMaxTopics:       1000,
		BundleMaxSessions:     1000,
		BundleMaxMsgRate:      30000,
		BundleMaxThroughput:   100 << 20,
		MaxBundles:            128,
	}
}

// Validate checks every field against its bounds.
func (c LoadBalanceConfig) Validate() error {
	switch {
	case c.ReportInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: LoadBalance.ReportInterval %v, want at least 100ms", ErrInvalidConfig, c.ReportInterval)
	case c.SheddingInterval < c.ReportInterval:
		return fmt.Errorf("%w: LoadBalance.SheddingInterval %v, want at least ReportInterval (%v)", ErrInvalidConfig, c.SheddingInterval, c.ReportInterval)
	case c.SheddingThreshold < 1 || c.SheddingThreshold > 100:
		return fmt.Errorf("%w: LoadBalance.SheddingThreshold %v, want 1..100 (percent)", ErrInvalidConfig, c.SheddingThreshold)
	case c.SheddingGracePeriod < 0:
		return fmt.Errorf("%w: LoadBalance.SheddingGracePeriod %v, want at least 0", ErrInvalidConfig, c.SheddingGracePeriod)
	case c.MinSheddingThroughput < 0:
		return fmt.Errorf("%w: LoadBalance.MinSheddingThroughput %v, want at least 0", ErrInvalidConfig, c.MinSheddingThroughput)
	case c.BundleMaxTopics < 1 || c.BundleMaxSessions < 1:
		return fmt.Errorf("%w: LoadBalance.BundleMaxTopics %d and BundleMaxSessions %d, want at least 1", ErrInvalidConfig, c.BundleMaxTopics, c.BundleMaxSessions)
	case c.BundleMaxMsgRate < 1 || c.BundleMaxThroughput < 1:
		return fmt.Errorf("%w: LoadBalance.BundleMaxMsgRate %v and BundleMaxThroughput %v, want at least 1", ErrInvalidConfig, c.BundleMaxMsgRate, c.BundleMaxThroughput)
	case c.MaxBundles < 1 || c.MaxBundles > 1024:
		return fmt.Errorf("%w: LoadBalance.MaxBundles %d, want 1..1024", ErrInvalidConfig, c.MaxBundles)
	}
	return nil
}
