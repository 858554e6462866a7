package mledger

import (
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// Config configures a Factory and every managed ledger it opens.
type Config struct {
	// Region whose metadata keys the managed ledgers live under. Required.
	Region string

	// DisableMetrics skips recording each append's latency and entry size
	// (WriteStats): telemetry.MetricsConfig.Disabled, for measuring what
	// recording costs.
	DisableMetrics bool

	// EnsembleSize, WriteQuorum and AckQuorum are the E/Qw/Qa of every new
	// ledger (E >= Qw >= Qa >= 1).
	EnsembleSize, WriteQuorum, AckQuorum int

	// MaxEntriesPerLedger rolls the ledger over once it holds this many
	// entries (Pulsar's managedLedgerMaxEntriesPerLedger). 1..1<<30.
	MaxEntriesPerLedger int64
	// MaxSizePerLedger rolls the ledger over once it holds this many bytes
	// (managedLedgerMaxSizePerLedgerMbytes). 1KiB..1TiB.
	MaxSizePerLedger int64
	// MaxLedgerRolloverTime rolls a non-empty ledger over once it is this
	// old, even without appends (managedLedgerMaxLedgerRolloverTimeMinutes).
	// Bounds how long a consumed ledger waits for retention.
	MaxLedgerRolloverTime time.Duration
	// MinLedgerRolloverTime keeps a ledger at least this long whatever the
	// other limits say (managedLedgerMinLedgerRolloverTimeMinutes), so that
	// a burst does not create a storm of tiny ledgers and metadata writes.
	// 0..MaxLedgerRolloverTime.
	MinLedgerRolloverTime time.Duration

	// CursorPersistInterval is the shortest time between two writes of one
	// cursor's state to the store: acks within it are coalesced into one
	// write. Longer means less etcd load and a longer redelivery window
	// after a crash (see the package doc). 0 writes on every change.
	// The default, 1s, is Pulsar's mark-delete rate limit; measured on a
	// 2-core machine, 1,000 busy cursors then cost about 1,000 etcd
	// writes/s (100-800 KiB/s), which is what one embedded etcd there can
	// take, so 100ms buys nothing but a saturated etcd. 0..1h.
	CursorPersistInterval time.Duration
	// MaxPersistedAckRanges caps the individually acked ranges written for
	// one cursor (Pulsar's managedLedgerMaxUnackedRangesToPersistInMetadataStore,
	// also 1000). The ranges past the cap are written as unacked: after a
	// restart those entries are delivered again, never lost. Bounds the
	// value at about 30 bytes per range (30 KB at the default), well under
	// etcd's request limit. 1..1<<20.
	MaxPersistedAckRanges int

	// CacheMaxBytes bounds one managed ledger's entry cache. Entries are
	// cached when confirmed, served to tailing cursors, and evicted once
	// every active cursor has read past them, or oldest first when the
	// cache is full. 0 disables caching.
	CacheMaxBytes int64

	// RetentionTime keeps a fully consumed ledger this long after its
	// creation; negative keeps it forever. RetentionSize keeps consumed
	// ledgers while the topic is under this many bytes; negative means no
	// size limit. A consumed ledger is deleted once it is past the time OR
	// the topic is over the size (Pulsar's retention), and never while a
	// durable cursor, owned here or elsewhere, still needs it.
	RetentionTime time.Duration
	RetentionSize int64
	// HousekeepingInterval is how often time-based rollover and retention
	// are checked. 1ms..1h.
	HousekeepingInterval time.Duration

	// MetaTimeout bounds one metadata store operation. 1ms..10m.
	MetaTimeout time.Duration
	// ForeignCursorPrefixes name cursors written by another process (the
	// replicator's meridian.repl.<remote>). The topic's owner reads them
	// through a watch, for retention, and never writes them.
	ForeignCursorPrefixes []string
	// Clock tells the time and runs the timers: broker timestamps, ledger
	// ages for rollover and retention, the housekeeping ticker and the
	// cursors' persistence timers. Required: DefaultConfig sets the wall
	// clock, the assembly hands the region's one clock, and tests inject a
	// fake one (clockwork.NewFakeClock) and move it by hand.
	Clock clockwork.Clock
}

// DefaultConfig returns Pulsar's defaults for region.
func DefaultConfig(region string) Config {
	return Config{
		Region:                region,
		EnsembleSize:          2,
		WriteQuorum:           2,
		AckQuorum:             2,
		MaxEntriesPerLedger:   50000,
		MaxSizePerLedger:      2048 << 20,
		MaxLedgerRolloverTime: 240 * time.Minute,
		MinLedgerRolloverTime: 10 * time.Minute,
		CursorPersistInterval: time.Second,
		MaxPersistedAckRanges: 1000,
		CacheMaxBytes:         64 << 20,
		RetentionTime:         0,
		RetentionSize:         0,
		HousekeepingInterval:  time.Minute,
		MetaTimeout:           10 * time.Second,
		ForeignCursorPrefixes: []string{"meridian.repl."},
		Clock:                 clockwork.NewRealClock(),
	}
}

// Validate checks every field against its documented bounds.
func (c Config) Validate() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(f, args...))
	}
	switch {
	case c.Region == "":
		return bad("Region is required")
	case c.Clock == nil:
		return bad("Clock is required (DefaultConfig sets the wall clock)")
	case c.AckQuorum < 1 || c.WriteQuorum < c.AckQuorum || c.EnsembleSize < c.WriteQuorum:
		return bad("need E >= Qw >= Qa >= 1, have %d/%d/%d", c.EnsembleSize, c.WriteQuorum, c.AckQuorum)
	case c.MaxEntriesPerLedger < 1 || c.MaxEntriesPerLedger > 1<<30:
		return bad("MaxEntriesPerLedger %d outside [1, 2^30]", c.MaxEntriesPerLedger)
	case c.MaxSizePerLedger < 1<<10 || c.MaxSizePerLedger > 1<<40:
		return bad("MaxSizePerLedger %d outside [1KiB, 1TiB]", c.MaxSizePerLedger)
	case c.MaxLedgerRolloverTime <= 0:
		return bad("MaxLedgerRolloverTime must be positive")
	case c.MinLedgerRolloverTime < 0 || c.MinLedgerRolloverTime > c.MaxLedgerRolloverTime:
		return bad("MinLedgerRolloverTime %v outside [0, MaxLedgerRolloverTime]", c.MinLedgerRolloverTime)
	case c.CursorPersistInterval < 0 || c.CursorPersistInterval > time.Hour:
		return bad("CursorPersistInterval %v outside [0, 1h]", c.CursorPersistInterval)
	case c.MaxPersistedAckRanges < 1 || c.MaxPersistedAckRanges > 1<<20:
		return bad("MaxPersistedAckRanges %d outside [1, 2^20]", c.MaxPersistedAckRanges)
	case c.CacheMaxBytes < 0:
		return bad("CacheMaxBytes must not be negative")
	case c.HousekeepingInterval < time.Millisecond || c.HousekeepingInterval > time.Hour:
		return bad("HousekeepingInterval %v outside [1ms, 1h]", c.HousekeepingInterval)
	case c.MetaTimeout < time.Millisecond || c.MetaTimeout > 10*time.Minute:
		return bad("MetaTimeout %v outside [1ms, 10m]", c.MetaTimeout)
	}
	for _, p := range c.ForeignCursorPrefixes {
		if p == "" {
			return bad("an empty ForeignCursorPrefixes entry would make every cursor foreign")
		}
	}
	return nil
}

// foreign reports whether a cursor name belongs to another process.
func (c *Config) foreign(name string) bool {
	for _, p := range c.ForeignCursorPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
