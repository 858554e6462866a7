package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator/remote"
	"github.com/meridian-mq/meridian/telemetry"
)

// Config configures one replicator worker of a region.
type Config struct {
	// Region is the region the worker replicates from: its topics are read
	// from this region's bookies. Required.
	Region string
	// WorkerID names the worker among the region's workers, under
	// /meridian/regions/<r>/replicator-workers/. Default: a random id.
	WorkerID string
	// LeaseTTL is the lease on the worker's registration and its tasks'
	// keys: how long the tasks of a worker that died stay without a
	// holder. Default 3s; 1s..1m.
	LeaseTTL time.Duration
	// ScanInterval is how often the worker compares the tasks the region's
	// topics and policies need with those held, and claims the ones
	// without a holder; a policy change also wakes it. It is also how
	// often a task reads its replicator dispatch rate again, so a change
	// of rate applies within it. Default 1s; 10ms..1m.
	ScanInterval time.Duration
	// ClaimGrace is how long a task stays without a holder before a
	// worker other than its preferred one (rendezvous hashing over the
	// live workers) claims it. Default 2s; 0..5m.
	ClaimGrace time.Duration
	// ReadBatch is how many entries one read from the tailer returns at
	// most. Default 256; 1..10000.
	ReadBatch int
	// CursorPersistInterval is the longest a task waits before writing
	// its cursor after a receipt: one etcd write per interval per task, and
	// at most one interval of entries sent again after a crash (the remote
	// drops them as duplicates). Default 100ms; 1ms..1m.
	CursorPersistInterval time.Duration
	// RetryInitial and RetryMax bound the backoff between a task's failed
	// attempts (the remote unreachable or refusing): exponential with
	// jitter, capped. The cap is also how long a remote that comes back
	// may wait for the next attempt. Defaults 100ms and 5s; RetryInitial
	// <= RetryMax.
	RetryInitial, RetryMax time.Duration
	// StatsInterval is how often the worker publishes its tasks' state
	// (connection, counters, cursor, last error) into its one record,
	// mledger.ReplicationStateKey, which the brokers read for topic stats;
	// it writes only when the state changed. Default 1s; 10ms..1m.
	StatsInterval time.Duration
	// Tailer tunes the reading of a topic's ledgers; its Region is set
	// from Region.
	Tailer mledger.TailerConfig
	// Remote tunes the producers that publish to the other regions (the
	// in-flight window, timeouts); their source region, topic and cluster
	// are set per task.
	Remote remote.Config
	// Schemas reads the region's schema registry, so that a topic's
	// schemas reach the remote region and a replicated message's
	// schema_version means the same schema there. Nil sends schema_version
	// as stored, which is right only while the regions' registries agree.
	// The assembly sets it (the registry lives with the broker code, which
	// this package does not import).
	Schemas SchemaSource
	// Tracing, when set, traces the replication of every entry whose
	// metadata carries a W3C traceparent (see trace.go); nil traces
	// nothing and costs nothing. The assembly sets it.
	Tracing *telemetry.Tracing
	// Registerer receives the worker's meridian_replicator_* metrics; nil
	// registers them nowhere.
	Registerer prometheus.Registerer
	// DisableMetrics skips recording them (telemetry.MetricsConfig.Disabled).
	DisableMetrics bool
	// Clock drives the worker's scans and claim grace, its tasks' retry
	// backoff, cursor persistence, message TTL and dispatch rate, the
	// state it publishes, and the producers' keep-alives (it is copied
	// into Remote.Clock). Lease TTLs run on the metadata store's own
	// clock, and the receipt latency metric on the wall clock. The
	// region's assembly (cluster/node) sets its one clock here. Required;
	// DefaultConfig sets the wall clock.
	Clock clockwork.Clock
}

// SchemaSource lists a source topic's schemas, oldest first, with the
// versions its messages carry; partitions share their topic's.
type SchemaSource interface {
	Schemas(ctx context.Context, topic string) ([]remote.SourceSchema, error)
}

// DefaultConfig returns the defaults for a worker of region.
func DefaultConfig(region string) Config {
	return Config{
		Region:                region,
		LeaseTTL:              3 * time.Second,
		ScanInterval:          time.Second,
		ClaimGrace:            2 * time.Second,
		ReadBatch:             256,
		CursorPersistInterval: 100 * time.Millisecond,
		RetryInitial:          100 * time.Millisecond,
		RetryMax:              5 * time.Second,
		StatsInterval:         time.Second,
		Tailer:                mledger.DefaultTailerConfig(region),
		Remote:                remote.DefaultConfig("", "", global.ClusterData{}),
		Clock:                 clockwork.NewRealClock(),
	}
}

// Validate checks every field against its bounds.
func (c Config) Validate() error {
	if c.Region == "" {
		return errors.New("replicator: Config.Region is required")
	}
	if c.Clock == nil {
		return errors.New("replicator: Config.Clock is required (DefaultConfig sets the wall clock)")
	}
	for _, d := range []struct {
		name     string
		v        time.Duration
		min, max time.Duration
	}{
		{"LeaseTTL", c.LeaseTTL, time.Second, time.Minute},
		{"ScanInterval", c.ScanInterval, 10 * time.Millisecond, time.Minute},
		{"ClaimGrace", c.ClaimGrace, 0, 5 * time.Minute},
		{"CursorPersistInterval", c.CursorPersistInterval, time.Millisecond, time.Minute},
		{"RetryInitial", c.RetryInitial, time.Millisecond, c.RetryMax},
		{"RetryMax", c.RetryMax, c.RetryInitial, time.Hour},
		{"StatsInterval", c.StatsInterval, 10 * time.Millisecond, time.Minute},
	} {
		if d.v < d.min || d.v > d.max {
			return fmt.Errorf("replicator: Config.%s = %v, want %v..%v", d.name, d.v, d.min, d.max)
		}
	}
	if c.ReadBatch < 1 || c.ReadBatch > 10000 {
		return fmt.Errorf("replicator: Config.ReadBatch = %d, want 1..10000", c.ReadBatch)
	}
	return c.Tailer.Validate()
}
