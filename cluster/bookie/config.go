package bookie

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a bookie. Flags of `meridian bookie` map onto it.
type Config struct {
	// Region is the region the bookie belongs to; it names the metadata
	// prefixes it registers under and garbage-collects against. Required.
	Region string
	// ID names the bookie in its registration. Required; stable across
	// restarts so that a restart can revoke its previous run's lease.
	ID string
	// Rack is the failure domain used by rack-aware placement; may be empty.
	Rack string
	// DataDir holds the journal (DataDir/journal) and the entry index
	// (DataDir/index). Required.
	DataDir string
	// ListenAddr is the TCP address to serve on, e.g. "127.0.0.1:3181";
	// port 0 picks a free port.
	ListenAddr string
	// AdvertiseAddr is the address written in the registration; empty means
	// the listener's actual address.
	AdvertiseAddr string

	// AuthToken, when set, is the token every client must present in an
	// AuthRequest as the first frame of each connection (BookKeeper's
	// authentication plugins, with a shared secret): the region's
	// brokers, replicators and auto-recovery workers share it. Until a
	// connection has presented it, the bookie answers every request with
	// Unauthorized and closes the connection, so nothing unauthenticated
	// reaches the add, read or fence paths. Empty, the default: no token
	// is asked for (anyone who reaches ListenAddr may read, and may write
	// to ledgers whose master key it knows or that have none yet).
	// At most bkproto.MaxCredentialsSize bytes.
	AuthToken string
	// TLS, when set, serves the protocol over TLS with this server
	// configuration (Certificates required). With ClientAuth set to
	// tls.RequireAndVerifyClientCert and ClientCAs the region's CA, it is
	// mutual TLS: a client without a certificate of that CA never gets a
	// frame through. With AuthToken too, a client needs both. Nil, the
	// default: plain TCP.
	TLS *tls.Config

	// Meta is the metadata store used to register and to find deleted
	// ledgers. Nil runs the bookie without either (unit tests only).
	Meta meta.Store
	// LeaseTTL is the registration lease's time to live: how long a dead
	// bookie stays listed. 2s..5m.
	LeaseTTL time.Duration
	// GCInterval is the period of garbage collection of ledgers whose
	// metadata is gone; 0 disables it. Each pass lists the region's ledger
	// keys, so very small values load etcd. 0 or >= 1s.
	GCInterval time.Duration

	// ReadOnlyProbeInterval is how often a bookie made read-only by a full
	// disk writes a small probe record to its journal; when one succeeds, the
	// bookie accepts adds again and says so in its registration. Each probe
	// costs one journal write and sync. 1s..1h.
	ReadOnlyProbeInterval time.Duration

	// JournalQueue bounds the adds (and fences, LAC writes) waiting for the
	// journal. A full queue blocks the connections feeding it, which is the
	// backpressure the writers see. 1..1<<20.
	JournalQueue int
	// JournalQueueBytes bounds the payload bytes of the adds between the
	// connections and their acknowledgement (queued, being written, being
	// applied). A writer beyond it waits, like one beyond JournalQueue.
	// It is the bookie's memory bound for writes. 1 MiB..16 GiB.
	JournalQueueBytes int64
	// JournalMaxBatchBytes caps one group commit's size, so that one sync
	// never waits behind an unbounded write. 64 KiB..256 MiB.
	JournalMaxBatchBytes int
	// JournalMaxWait caps how long a group commit keeps collecting records
	// while they keep arriving; it is never a fixed delay: a commit starts as
	// soon as the queue is empty. 0..1s.
	JournalMaxWait time.Duration
	// JournalFileSize is the size at which the journal rolls to a new file
	// and checkpoints, so it bounds the replay after a crash. Journal files
	// are also the entry log: a file is deleted when GC has deleted every
	// ledger with an entry in it, or compacted (see CompactionThreshold),
	// so it is also the unit of space reclamation. 1 MiB..4 GiB.
	JournalFileSize int64

	// MaxEntrySize is the largest payload accepted; larger adds get TooLarge.
	// 1..bkproto.MaxPayloadSize.
	MaxEntrySize int
	// MaxConnInFlight bounds the requests one connection may have
	// outstanding (including answers not yet written to a client that reads
	// slowly); the bookie stops reading from a connection at the bound. Times
	// the entry size it bounds a connection's memory: 1024 × 64 KiB entries
	// is 64 MiB. 1..65536.
	MaxConnInFlight int
	// IndexCacheSize is pebble's block cache, in bytes. >= 0.
	IndexCacheSize int64

	// CompactionThreshold: a checkpointed journal file whose live bytes
	// (entries of ledgers not yet deleted) fall below this fraction of its
	// size is compacted: its live entries are written again at the journal's
	// head and the file is deleted. Higher reclaims space sooner and
	// rewrites more: compacting a file costs up to threshold × its size in
	// journal writes, shared with the adds. 0 turns compaction off (space
	// is then reclaimed only from files that empty entirely). 0..0.95.
	CompactionThreshold float64
	// CompactionInterval is how often the compactor looks for files below
	// CompactionThreshold; looking is cheap (in memory), 0 turns it off.
	// 0 or >= 1s.
	CompactionInterval time.Duration

	// NoSync skips every fdatasync of the journal, its checkpoint and its
	// directory (`meridian bookie --storage memory`): an add is
	// acknowledged once written to the page cache, so a machine crash or
	// power loss loses acknowledged entries (a crash of the bookie process
	// alone does not). For benchmarks only; the bookie warns at start.
	// Everything else, replay included, is the same code path.
	NoSync bool
	// FS is the journal's filesystem; nil is the real one.
	FS FS
	// Failpoints are injected faults (see Failpoints), armed at start;
	// NoFailpoints() (the default) arms none.
	Failpoints Failpoints
	// FailpointEndpoint, when set, is a TCP address on which the bookie
	// serves an HTTP endpoint, /failpoints, that shows (GET), replaces
	// (PUT or POST, a body in ParseFailpoints' syntax) and clears (DELETE)
	// its failpoints while it runs. For tests only: it has no
	// authentication, and whoever reaches it can fail the bookie's disk.
	// Setting it also puts the journal on a FaultFS (one uncontended mutex
	// per journal write and sync). Empty, the default: no endpoint, and
	// failpoints stay as they were at start.
	FailpointEndpoint string
	// Registerer receives the bookie's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Clock drives timeouts (long-polls) and periodic work. Required:
	// DefaultConfig sets the wall clock, the assembly hands the process's
	// one clock, and tests inject clockwork.NewFakeClock, as mledger's and
	// the dispatcher's do.
	Clock clockwork.Clock
}

// DefaultConfig returns a Config with every tunable at its default and the
// required identity fields empty.
func DefaultConfig() Config {
	return Config{
		ListenAddr:            "127.0.0.1:3181",
		LeaseTTL:              10 * time.Second,
		GCInterval:            5 * time.Minute,
		ReadOnlyProbeInterval: 30 * time.Second,
		JournalQueue:          16384,
		JournalQueueBytes:     256 << 20,
		JournalMaxBatchBytes:  4 << 20,
		JournalMaxWait:        2 * time.Millisecond,
		JournalFileSize:       256 << 20,
		MaxEntrySize:          bkproto.MaxPayloadSize,
		MaxConnInFlight:       1024,
		IndexCacheSize:        64 << 20,
		CompactionThreshold:   0.5,
		CompactionInterval:    time.Minute,
		Failpoints:            NoFailpoints(),
		Clock:                 clockwork.NewRealClock(),
	}
}

// Validate checks the bounds documented on each field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Region == "":
		return bad("Region is required")
	case c.ID == "":
		return bad("ID is required")
	case c.DataDir == "":
		return bad("DataDir is required")
	case c.ListenAddr == "":
		return bad("ListenAddr is required")
	case c.Clock == nil:
		return bad("Clock is required (DefaultConfig sets the wall clock)")
	case len(c.AuthToken) > bkproto.MaxCredentialsSize:
		return bad("AuthToken of %d bytes exceeds %d", len(c.AuthToken), bkproto.MaxCredentialsSize)
	case c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil:
		return bad("TLS needs the bookie's certificate (Certificates or GetCertificate)")
	case c.LeaseTTL < 2*time.Second || c.LeaseTTL > 5*time.Minute:
		return bad("LeaseTTL %s out of range 2s..5m", c.LeaseTTL)
	case c.GCInterval != 0 && c.GCInterval < time.Second:
		return bad("GCInterval %s: 0 (off) or at least 1s", c.GCInterval)
	case c.ReadOnlyProbeInterval < time.Second || c.ReadOnlyProbeInterval > time.Hour:
		return bad("ReadOnlyProbeInterval %s out of range 1s..1h", c.ReadOnlyProbeInterval)
	case c.JournalQueue < 1 || c.JournalQueue > 1<<20:
		return bad("JournalQueue %d out of range 1..%d", c.JournalQueue, 1<<20)
	case c.JournalQueueBytes < 1<<20 || c.JournalQueueBytes > 16<<30:
		return bad("JournalQueueBytes %d out of range 1MiB..16GiB", c.JournalQueueBytes)
	case c.JournalMaxBatchBytes < 64<<10 || c.JournalMaxBatchBytes > 256<<20:
		return bad("JournalMaxBatchBytes %d out of range 64KiB..256MiB", c.JournalMaxBatchBytes)
	case c.JournalMaxWait < 0 || c.JournalMaxWait > time.Second:
		return bad("JournalMaxWait %s out of range 0..1s", c.JournalMaxWait)
	case c.JournalFileSize < 1<<20 || c.JournalFileSize > 4<<30:
		return bad("JournalFileSize %d out of range 1MiB..4GiB", c.JournalFileSize)
	case c.MaxEntrySize < 1 || c.MaxEntrySize > bkproto.MaxPayloadSize:
		return bad("MaxEntrySize %d out of range 1..%d", c.MaxEntrySize, bkproto.MaxPayloadSize)
	case c.MaxConnInFlight < 1 || c.MaxConnInFlight > 1<<16:
		return bad("MaxConnInFlight %d out of range 1..65536", c.MaxConnInFlight)
	case c.IndexCacheSize < 0:
		return bad("IndexCacheSize %d is negative", c.IndexCacheSize)
	case !(c.CompactionThreshold >= 0 && c.CompactionThreshold <= 0.95):
		return bad("CompactionThreshold %v out of range 0..0.95", c.CompactionThreshold)
	case c.CompactionInterval != 0 && c.CompactionInterval < time.Second:
		return bad("CompactionInterval %s: 0 (off) or at least 1s", c.CompactionInterval)
	case c.Failpoints.JournalSyncDelay < 0 || c.Failpoints.JournalSyncDelay > MaxSyncDelay:
		return bad("Failpoints.JournalSyncDelay %s out of range 0..%s", c.Failpoints.JournalSyncDelay, MaxSyncDelay)
	}
	return nil
}
