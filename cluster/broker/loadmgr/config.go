package loadmgr

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/telemetry"
)

// Config configures one broker's load manager. The broker's ServiceConfig
// holds the operator's settings (OwnershipTTL, Lookup, LoadBalance) and
// fills the rest from its own; this is not a second place to set them.
type Config struct {
	// Region is the region the broker serves in.
	Region string
	// Self is this broker: its id, stable across restarts, and where
	// clients reach it. It is written into the broker's registration, its
	// ownership keys and its leader candidacy.
	Self Owner
	// OwnershipTTL is the session lease under which the broker registers
	// and holds its bundles. When the broker dies, its topics can be
	// served elsewhere after at most this long; shorter means faster
	// takeover but more keep-alive traffic and more spurious unloads when
	// etcd is slow. At least 1s.
	OwnershipTTL time.Duration
	// Lookup bounds how a lookup finds, places or takes over a bundle's
	// owner.
	Lookup LookupConfig
	// LoadBalance configures load reports, shedding and bundle split.
	LoadBalance BalanceConfig
	// CloseTimeout bounds closing one topic in a hand-off (a whole
	// hand-off gets three: fence, seal and release), the leader's resign,
	// and deleting the keys of a hand-off or split that failed. At least
	// 100ms.
	CloseTimeout time.Duration
	// TopicLoadTimeout bounds one automatic split, and is the least a
	// shedding round may take, since each move fences and closes topics.
	// At least 1s.
	TopicLoadTimeout time.Duration
	// Clock drives the load manager's behaviour: the load reports and
	// their timestamps, the leader's shedding and cluster-record tickers
	// and its campaign retries, a pending hand-off's retries, and the
	// owner probe's memory of live brokers. Lease TTLs run on the store's
	// clock; hand-off durations are logged on the wall clock. The broker
	// hands its own (broker.ServiceConfig.Clock). Required.
	Clock clockwork.Clock
	// Metrics says whether the load manager records its metrics.
	Metrics telemetry.MetricsConfig
	// Registerer receives the load manager's meridian_* metrics; nil
	// registers them nowhere.
	Registerer prometheus.Registerer
}

// Validate checks every field against its bounds.
func (c Config) Validate() error {
	switch {
	case c.Region == "" || c.Self.BrokerID == "" || c.Self.ServiceURL == "":
		return fmt.Errorf("%w: Region, Self.BrokerID and Self.ServiceURL are required", ErrInvalidConfig)
	case c.OwnershipTTL < time.Second:
		return fmt.Errorf("%w: OwnershipTTL %v, want at least 1s", ErrInvalidConfig, c.OwnershipTTL)
	case c.CloseTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: CloseTimeout %v, want at least 100ms", ErrInvalidConfig, c.CloseTimeout)
	case c.TopicLoadTimeout < time.Second:
		return fmt.Errorf("%w: TopicLoadTimeout %v, want at least 1s", ErrInvalidConfig, c.TopicLoadTimeout)
	case c.Clock == nil:
		return fmt.Errorf("%w: Clock is required (the broker hands its ServiceConfig.Clock)", ErrInvalidConfig)
	}
	if err := c.Metrics.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.LoadBalance.Validate(); err != nil {
		return err
	}
	return c.Lookup.Validate()
}

// BalanceConfig configures load reports, shedding and bundle split.
// The names in brackets are Pulsar's broker.conf settings, which the
// assembly maps onto these fields.
type BalanceConfig struct {
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

// DefaultBalanceConfig returns Pulsar's defaults, but for
// MinSheddingThroughput (see there).
func DefaultBalanceConfig() BalanceConfig {
	return BalanceConfig{
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
func (c BalanceConfig) Validate() error {
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

// LookupConfig bounds how a lookup finds, places or takes over a bundle's
// owner.
type LookupConfig struct {
	// MetadataTimeout bounds the metadata reads and writes of one lookup.
	// Past it the lookup answers ServiceNotReady, on which clients
	// reconnect and retry (but a first CreateProducer or Subscribe fails
	// with it), so a region whose etcd is away answers within it and never
	// with a guessed owner. Longer rides out a slow etcd (a burst of
	// placements through one broker is serialised), shorter frees the
	// client sooner; past the client's operation timeout (30s by default)
	// it only keeps work alive that nobody waits for. Default 15s; at
	// least 100ms.
	MetadataTimeout time.Duration
	// ProbeTimeout bounds the probe of an owner found by a lookup: dialling
	// its service URL and waiting for any reply to CONNECT. A refused
	// connection proves the owner dead, and the lookup takes its bundles;
	// a probe that times out, or a connection closed without a reply,
	// proves nothing, and the lookup answers the owner. Shorter answers sooner for
	// an owner that is paused; too short on a loaded host only means the
	// owner is reported as is, never taken over. Default 500ms; 10ms..10s.
	ProbeTimeout time.Duration
	// ProbeAliveFor is how long a broker that answered a probe is taken to
	// be alive without another probe, so that a burst of lookups of its
	// bundles dials it once (probes under way are shared anyway). It is
	// also the most a takeover after a crash waits on an answer from just
	// before it: a broker that dies within it keeps its bundles until the
	// next probe after it. Default 250ms; 0 probes on every lookup; at most
	// 1m.
	ProbeAliveFor time.Duration
}

// DefaultLookupConfig returns the defaults documented on LookupConfig.
func DefaultLookupConfig() LookupConfig {
	return LookupConfig{MetadataTimeout: 15 * time.Second, ProbeTimeout: 500 * time.Millisecond, ProbeAliveFor: 250 * time.Millisecond}
}

// Validate checks every field against its bounds.
func (c LookupConfig) Validate() error {
	switch {
	case c.MetadataTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: Lookup.MetadataTimeout %v, want at least 100ms", ErrInvalidConfig, c.MetadataTimeout)
	case c.ProbeTimeout < 10*time.Millisecond || c.ProbeTimeout > 10*time.Second:
		return fmt.Errorf("%w: Lookup.ProbeTimeout %v, want 10ms..10s", ErrInvalidConfig, c.ProbeTimeout)
	case c.ProbeAliveFor < 0 || c.ProbeAliveFor > time.Minute:
		return fmt.Errorf("%w: Lookup.ProbeAliveFor %v, want 0..1m", ErrInvalidConfig, c.ProbeAliveFor)
	}
	return nil
}
