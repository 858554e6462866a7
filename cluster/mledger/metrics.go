package mledger

import (
	"time"

	"github.com/meridian-mq/meridian/telemetry"
)

// writeStats are a managed ledger's add latency and entry sizes in Pulsar's
// buckets (ManagedLedgerMBean's addEntryLatency and entrySize), which the
// broker reports as pulsar_storage_write_latency_* and pulsar_entry_size_*.
// Recording is a clock read and a few atomic adds per entry on the
// writer's confirmation, and nothing at all with Config.DisableMetrics
// (the ledger then has no writeStats).
type writeStats struct {
	latency *telemetry.StatsBuckets // microseconds from append to confirmation
	size    *telemetry.StatsBuckets // bytes of the stored entry
}

func newWriteStats(cfg *Config) *writeStats {
	if cfg.DisableMetrics {
		return nil
	}
	return &writeStats{
		latency: telemetry.NewStatsBuckets(telemetry.WriteLatencyBoundsMicros),
		size:    telemetry.NewStatsBuckets(telemetry.EntrySizeBounds),
	}
}

// confirmed records one entry of n bytes confirmed after took.
func (w *writeStats) confirmed(took time.Duration, n int) {
	w.latency.Record(took.Microseconds())
	w.size.Record(int64(n))
}

// WriteStats are the counts of a managed ledger's confirmed appends by
// latency and by entry size since it opened, in Pulsar's buckets
// (telemetry.WriteLatencyBoundsMicros, telemetry.EntrySizeBounds). Both
// are empty when Config.DisableMetrics is set.
type WriteStats struct {
	Latency, EntrySize telemetry.BucketCounts
}

// WriteStats returns the counts so far.
func (ml *ManagedLedger) WriteStats() WriteStats {
	if ml.writes == nil {
		return WriteStats{}
	}
	return WriteStats{Latency: ml.writes.latency.Snapshot(), EntrySize: ml.writes.size.Snapshot()}
}

// newReadLatency returns the buckets of a managed ledger's storage reads
// (the runs of entries it reads from the bookies; reads the entry cache
// serves are not storage reads), in microseconds in Pulsar's write latency
// buckets, which the broker reports as pulsar_storage_read_latency_*; nil
// with Config.DisableMetrics.
func newReadLatency(cfg *Config) *telemetry.StatsBuckets {
	if cfg.DisableMetrics {
		return nil
	}
	return telemetry.NewStatsBuckets(telemetry.WriteLatencyBoundsMicros)
}

// ReadLatency returns the counts of the storage reads so far, by latency
// in microseconds (telemetry.WriteLatencyBoundsMicros); empty when
// Config.DisableMetrics is set.
func (ml *ManagedLedger) ReadLatency() telemetry.BucketCounts {
	if ml.reads == nil {
		return telemetry.BucketCounts{}
	}
	return ml.reads.Snapshot()
}
