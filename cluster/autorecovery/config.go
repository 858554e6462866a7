package autorecovery

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a process's auto-recovery: its candidacy for the
// region's auditor and its replication workers. Flags (`--autorecovery-*`)
// and Pulsar's bookkeeper.conf keys map onto it.
type Config struct {
	// Region whose bookies and ledgers are audited and repaired. Required.
	Region string
	// WorkerID names this process in the claims it takes (shown by
	// `meridian admin bookies under-replicated`). Required.
	WorkerID string
	// Auditor makes this process a candidate for the region's auditor;
	// one candidate leads at a time. Default true.
	Auditor bool
	// Workers is how many ledgers this process repairs at once; 0 runs
	// the auditor alone. Each worker holds one claim and copies with
	// CopyInFlight entries in flight. 0..64, default 1.
	Workers int
	// LostBookieRecoveryDelay is how long a bookie must have been gone
	// (its registration absent) before its ledgers are marked
	// under-replicated, BookKeeper's lostBookieRecoveryDelay. A bookie
	// back within it costs nothing; one gone for good costs this much
	// exposure (its entries on one copy fewer) before the copy starts.
	// BookKeeper's default of 0 turns every restart into a mass copy; the
	// default here, 5 minutes, is well above a rolling restart's few
	// seconds per bookie. A bookie an operator marks lost or
	// decommissions does not wait. 0..24h.
	LostBookieRecoveryDelay time.Duration
	// AuditInterval is how often the auditor compares every ledger's
	// ensembles with the registered bookies even when no bookie came or
	// went (a safety net for a missed watch event); it lists every
	// ledger's metadata each time. 1s..24h, default 5 minutes.
	AuditInterval time.Duration
	// CheckInterval is how often the auditor checks that sampled entries
	// of every closed ledger are on all Qw bookies of their write set
	// (BookKeeper's auditorPeriodicCheckInterval, a week by default);
	// 0 turns it off. Each check reads CheckSampleRate of the region's
	// entries from every copy. 0 or 1m..30d, default 24h.
	CheckInterval time.Duration
	// CheckSampleRate is the fraction of each ledger's entries a check
	// reads (from each copy), at least one per fragment: the check's cost
	// is this fraction of the region's data, read Qw times. (0, 1],
	// default 0.01.
	CheckSampleRate float64
	// RateBytesPerSecond bounds what this process's workers copy, in
	// bytes per second, together, so that production keeps its latency
	// (the replacement bookies' journals take the copies as recovery
	// adds, beside the producers' adds). Must be positive: to stop copying,
	// pause recovery. Default 20 MiB/s.
	RateBytesPerSecond int64
	// CopyInFlight bounds the entries a worker has in flight (read, then
	// written). 1..1024, default 16.
	CopyInFlight int
	// ClaimTTL is the lease time to live of a worker's claims: how long a
	// dead worker's ledger waits before another worker takes it. 2s..5m,
	// default 10s.
	ClaimTTL time.Duration
	// RetryInterval is how long a worker leaves a ledger it could not
	// finish (a bookie unreachable, no spare bookie, a ledger in recovery,
	// the last fragment of an open ledger still its writer's) before it
	// tries again, and how often workers look for marks when no watch
	// event woke them. 100ms..1h, default 30s.
	RetryInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the auditor's and workers' metrics; nil
	// registers nowhere.
	Registerer prometheus.Registerer
	// Clock drives the auditor's and workers' behaviour over time: the
	// audit and check tickers, the lost-bookie recovery delay, the
	// campaign and watch retries, a ledger left for RetryInterval, the
	// re-replication rate, and the times stamped on claims, operators'
	// states and noted errors. Latency metrics stay on the wall clock.
	// The region's assembly (cluster/node) sets its one clock here.
	// Required; DefaultConfig sets the wall clock.
	Clock clockwork.Clock
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig(region, workerID string) Config {
	return Config{
		Region:                  region,
		WorkerID:                workerID,
		Auditor:                 true,
		Workers:                 1,
		LostBookieRecoveryDelay: 5 * time.Minute,
		AuditInterval:           5 * time.Minute,
		CheckInterval:           24 * time.Hour,
		CheckSampleRate:         0.01,
		RateBytesPerSecond:      20 << 20,
		CopyInFlight:            16,
		ClaimTTL:                10 * time.Second,
		RetryInterval:           30 * time.Second,
		Clock:                   clockwork.NewRealClock(),
	}
}

// Validate checks every field against its documented bounds.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Region == "":
		return bad("Region is required")
	case c.WorkerID == "":
		return bad("WorkerID is required")
	case c.Workers < 0 || c.Workers > 64:
		return bad("Workers %d out of range 0..64", c.Workers)
	case c.LostBookieRecoveryDelay < 0 || c.LostBookieRecoveryDelay > 24*time.Hour:
		return bad("LostBookieRecoveryDelay %s out of range 0..24h", c.LostBookieRecoveryDelay)
	case c.AuditInterval < time.Second || c.AuditInterval > 24*time.Hour:
		return bad("AuditInterval %s out of range 1s..24h", c.AuditInterval)
	case c.CheckInterval != 0 && (c.CheckInterval < time.Minute || c.CheckInterval > 30*24*time.Hour):
		return bad("CheckInterval %s: 0 (off) or 1m..30d", c.CheckInterval)
	case !(c.CheckSampleRate > 0 && c.CheckSampleRate <= 1):
		return bad("CheckSampleRate %v out of range (0, 1]", c.CheckSampleRate)
	case c.RateBytesPerSecond <= 0:
		return bad("RateBytesPerSecond %d: the re-replication rate must be positive (pause recovery to stop it)", c.RateBytesPerSecond)
	case c.CopyInFlight < 1 || c.CopyInFlight > 1024:
		return bad("CopyInFlight %d out of range 1..1024", c.CopyInFlight)
	case c.ClaimTTL < 2*time.Second || c.ClaimTTL > 5*time.Minute:
		return bad("ClaimTTL %s out of range 2s..5m", c.ClaimTTL)
	case c.RetryInterval < 100*time.Millisecond || c.RetryInterval > time.Hour:
		return bad("RetryInterval %s out of range 100ms..1h", c.RetryInterval)
	case c.Clock == nil:
		return bad("Clock is required (DefaultConfig sets the wall clock)")
	}
	return nil
}
