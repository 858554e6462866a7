package telemetry

import (
	"fmt"
	"sync/atomic"
	"time"
)

// MetricsConfig is how a region records and exposes its metrics. Its zero
// value records everything and exposes topic-level series, as Pulsar does
// by default, over DefaultStatsPeriod.
type MetricsConfig struct {
	// Disabled turns recording off: the per-operation observations this
	// issue's metrics add (managed-ledger write latency and entry sizes,
	// lookup latency, dispatch read sizes, metadata operation latency, the
	// replicator's read-to-receipt latency) are skipped, and the broker's
	// Pulsar series are not served. It exists to measure what recording
	// costs; the counters the admin API's stats read are kept either way.
	Disabled bool
	// NamespaceLevel aggregates the topic-level pulsar_* series into one
	// series per namespace (Pulsar's exposeTopicLevelMetricsInPrometheus
	// set to false), so that a broker with 100k topics serves a few series
	// per namespace instead of a few per topic. Subscription series are
	// then not served, as in Pulsar.
	NamespaceLevel bool
	// StatsPeriod is the window over which rates and the latency and size
	// buckets are reported (Pulsar's statsUpdateFrequencyInSecs): each
	// reported value covers the last completed period, and is the same for
	// every scraper within the next one. Zero means DefaultStatsPeriod;
	// otherwise at least 10ms.
	StatsPeriod time.Duration
}

// DefaultStatsPeriod is Pulsar's statsUpdateFrequencyInSecs default.
const DefaultStatsPeriod = 60 * time.Second

// DefaultMetricsConfig returns Pulsar's defaults: recording on, topic-level
// series, a 60s stats period.
func DefaultMetricsConfig() MetricsConfig {
	return MetricsConfig{StatsPeriod: DefaultStatsPeriod}
}

// Validate checks the period's bounds.
func (c MetricsConfig) Validate() error {
	if c.StatsPeriod != 0 && c.StatsPeriod < 10*time.Millisecond {
		return fmt.Errorf("%w: StatsPeriod %v, want 0 (the default, %v) or at least 10ms", ErrInvalidMetricsConfig, c.StatsPeriod, DefaultStatsPeriod)
	}
	return nil
}

// Period is StatsPeriod with the default applied.
func (c MetricsConfig) Period() time.Duration {
	if c.StatsPeriod == 0 {
		return DefaultStatsPeriod
	}
	return c.StatsPeriod
}

// The label names of Pulsar's series.
const (
	LabelCluster       = "cluster"
	LabelNamespace     = "namespace"
	LabelTopic         = "topic"
	LabelSubscription  = "subscription"
	LabelRemoteCluster = "remote_cluster"
)

// Pulsar's storage write latency buckets (ManagedLedger add latency), in
// milliseconds: pulsar_storage_write_latency_le_0_5 counts adds of at most
// 0.5 ms, ..., and pulsar_storage_write_latency_overflow those above 1 s.
// Each bucket counts only the values in its own range (not cumulative),
// as Pulsar's StatsBuckets do. The bounds are in microseconds.
var (
	WriteLatencyBoundsMicros = []int64{500, 1_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 1_000_000}
	WriteLatencyBucketNames  = []string{
		"pulsar_storage_write_latency_le_0_5", "pulsar_storage_write_latency_le_1", "pulsar_storage_write_latency_le_5",
		"pulsar_storage_write_latency_le_10", "pulsar_storage_write_latency_le_20", "pulsar_storage_write_latency_le_50",
		"pulsar_storage_write_latency_le_100", "pulsar_storage_write_latency_le_200", "pulsar_storage_write_latency_le_1000",
		"pulsar_storage_write_latency_overflow",
	}
	// EntrySizeBounds are Pulsar's entry size buckets, in bytes.
	EntrySizeBounds      = []int64{128, 512, 1 << 10, 2 << 10, 4 << 10, 16 << 10, 100 << 10, 1 << 20}
	EntrySizeBucketNames = []string{
		"pulsar_entry_size_le_128", "pulsar_entry_size_le_512", "pulsar_entry_size_le_1_kb", "pulsar_entry_size_le_2_kb",
		"pulsar_entry_size_le_4_kb", "pulsar_entry_size_le_16_kb", "pulsar_entry_size_le_100_kb", "pulsar_entry_size_le_1_mb",
		"pulsar_entry_size_le_overflow",
	}
)

// maxBuckets is the most buckets a StatsBuckets holds (bounds plus the
// overflow): enough for Pulsar's write latency buckets, the widest set.
const maxBuckets = 10

// StatsBuckets counts values into fixed buckets, as Pulsar's StatsBuckets:
// each bucket counts the values above the previous bound and at most its
// own, the last one every value above the last bound. Record is a few
// atomic adds and never allocates; a reader takes a Snapshot and computes
// what changed over a period by subtracting an older one. The zero value
// is not usable: NewStatsBuckets.
type StatsBuckets struct {
	bounds []int64
	counts [maxBuckets]atomic.Int64
	count  atomic.Int64
	sum    atomic.Int64
}

// NewStatsBuckets returns buckets with the given ascending bounds (at most
// 9) and an overflow bucket.
func NewStatsBuckets(bounds []int64) *StatsBuckets {
	if len(bounds) >= maxBuckets {
		panic(fmt.Sprintf("telemetry: %d bounds, at most %d", len(bounds), maxBuckets-1))
	}
	return &StatsBuckets{bounds: bounds}
}

// Record counts v.
func (b *StatsBuckets) Record(v int64) {
	i := 0
	for i < len(b.bounds) && v > b.bounds[i] {
		i++
	}
	b.counts[i].Add(1)
	b.count.Add(1)
	b.sum.Add(v)
}

// BucketCounts is a snapshot of StatsBuckets, or the difference of two.
type BucketCounts struct {
	// Counts has one count per bucket, the overflow last.
	Counts [maxBuckets]int64
	// N is how many buckets Counts uses.
	N          int
	Count, Sum int64
}

// Snapshot returns the counts so far.
func (b *StatsBuckets) Snapshot() BucketCounts {
	s := BucketCounts{N: len(b.bounds) + 1, Count: b.count.Load(), Sum: b.sum.Load()}
	for i := range s.N {
		s.Counts[i] = b.counts[i].Load()
	}
	return s
}

// Sub returns what was recorded between older and c.
func (c BucketCounts) Sub(older BucketCounts) BucketCounts {
	d := BucketCounts{N: c.N, Count: c.Count - older.Count, Sum: c.Sum - older.Sum}
	for i := range c.N {
		d.Counts[i] = c.Counts[i] - older.Counts[i]
	}
	return d
}

// Add returns the sum of two snapshots of buckets with the same bounds.
func (c BucketCounts) Add(o BucketCounts) BucketCounts {
	s := BucketCounts{N: max(c.N, o.N), Count: c.Count + o.Count, Sum: c.Sum + o.Sum}
	for i := range s.N {
		s.Counts[i] = c.Counts[i] + o.Counts[i]
	}
	return s
}
