// Package bookie is Meridian's storage server: a BookKeeper-style bookie that
// stores ledger entries for the ledger client (cluster/ledger) and serves the
// protocol in cluster/bookie/bkproto.
//
// # Write path
//
// An add is checked (size, CRC32C over ledger id, entry id and payload,
// fence), then queued to the journal. The journal goroutine group-commits:
// it writes everything queued in one write, fdatasyncs, applies the batch to
// the entry store and only then acknowledges it. Acks therefore never
// precede durability, and under load each sync carries all that arrived
// during the previous one.
//
// # Storage layout, and why
//
// Entries and an index both live in pebble, with pebble's own WAL disabled;
// the journal is the write-ahead log. Pebble's memtable is rebuilt after a
// crash by replaying the journal from the last checkpoint (records are
// idempotent), and a checkpoint is taken on every journal roll: flush pebble,
// record the first journal file still needed, delete the older ones.
//
// The alternative, BookKeeper's own design, keeps entries in the journal or
// a separate entry log and only (ledger, entry) -> offset in an index. It
// writes each byte to disk once less than pebble's flush does and makes
// garbage collection a matter of compacting entry-log files. We chose pebble
// for entries because the durable, latency-critical write is the journal's
// either way (pebble's memtable insert costs microseconds, its flushes and
// compactions run in the background, off the ack path), because it gives
// ledger deletion as one range tombstone instead of an entry-log compactor
// of our own, and because one store holds entries, fence flags and LACs
// consistently. The benchmarks in this package measure the result against
// the raw disk (BenchmarkDiskCeiling) so the cost stays visible: see
// BenchmarkAdd's ratio to it. Should pebble's write amplification on large
// entries become the bottleneck, the entry log plus index design can replace
// store without touching the journal or the protocol.
//
// # Faults
//
// As DESIGN §4 requires: a failed journal fsync (or write other than
// ENOSPC) is fatal: the bookie stops and Err reports ErrJournalSync; the
// command exits non-zero. ENOSPC on the journal turns the bookie read-only:
// adds are refused with ReadOnly, the registration says readOnly:true, and
// reads go on; every ReadOnlyProbeInterval a small probe record tests the
// disk, and the first durable one makes the bookie writable again. A stored entry failing its CRC fails that read with
// ChecksumMismatch and counts in meridian_bookie_checksum_errors_total. The
// journal's filesystem is the FS interface; FaultFS and Failpoints inject
// these faults in tests and in the real binary (MERIDIAN_FAILPOINTS).
//
// # Fencing and LAC
//
// A fence is a journal record like an add, so it is durable before a Fence
// or fencing read is answered, and the journal order alone decides whether
// an add raced ahead of a fence. Each ledger's LAC is the maximum of the
// LACs piggybacked on adds and written explicitly; LAC long-polls wait on
// it.
//
// # Goroutines and locks
//
// Owners: a connection's reader dispatches and its writer alone writes the
// socket; the journal's sync stage alone owns the journal file; its apply
// stage alone writes ledger state; the checkpointer alone writes CHECKPOINT
// and deletes journal files. Bookie.Close stops and waits for all of them.
//
// Lock order (a lock may be taken while holding those above it, never the
// reverse): serverConn.timers, then store.mu. Bookie.mu (the connection set)
// and bkproto.Conn.mu are leaves. No lock is held across I/O or a channel
// send, except that the apply stage's pebble write happens under no lock at
// all (phase 2 of store.apply).
//
// # Metadata
//
// The bookie registers at /meridian/regions/<r>/bookies/<id> under a lease
// (bkproto.Registration) and deletes local ledgers whose
// /meridian/regions/<r>/ledgers/<id> key is gone (CollectGarbage).
package bookie
