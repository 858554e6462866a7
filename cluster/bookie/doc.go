// Package bookie is Meridian's storage server: a BookKeeper-style bookie that
// stores ledger entries for the ledger client (cluster/ledger) and serves the
// protocol in cluster/bookie/bkproto.
//
// # Write path
//
// An add is checked (size, CRC32C over ledger id, entry id and payload,
// fence), then queued to the journal. The journal goroutine group-commits:
// it writes everything queued in one write, fdatasyncs, applies the batch to
// the index and only then acknowledges it, each connection's answers in one
// write. Acks therefore never precede durability, and under load each sync
// carries all that arrived during the previous one. When others are already
// waiting for the disk, a second goroutine applies and answers instead, so
// that the next sync starts at once, and the fdatasync itself goes to a
// syncer goroutine while the journal goroutine writes the next batch
// (journal's doc says who does what, and why the order holds). The one record acknowledged before it
// is durable is an explicit LAC sent alone: a hint for tailing readers,
// whose loss in a crash only lowers the LAC (journal.syncDeferred).
//
// # Storage layout, and why
//
// Each payload byte is written to disk once: the journal files are the
// entry log. Pebble holds only small keys: the index (ledger, entry) ->
// (journal file, offset, size), each ledger's state (fence flag, LAC,
// master key) and each checkpointed journal file's accounting (its size and,
// per ledger, the bytes of its indexed entries). A read looks the entry up
// and preads its record from the journal file, then verifies the entry's
// CRC32C; a tailing reader is served from the page cache, since the record
// was written moments before.
//
// Pebble runs without its WAL: on restart the journal is replayed from the
// last checkpoint and rebuilds the index entries of the records after it
// (records are idempotent). A checkpoint, taken on every journal roll,
// flushes pebble and records the first file replay still needs. Journal
// files are no longer deleted at a checkpoint: a file goes when no entry in
// it is live any more (GC deleted every ledger with entries in it), or when
// the compactor has copied its live entries forward because they fell below
// CompactionThreshold of its size. space.go states the invariant that keeps
// an index entry from ever naming a deleted file, crashes included.
//
// Why: the previous layout kept the entries themselves in pebble. Every
// payload byte was written twice (journal, then pebble's flush, plus
// compactions), and BenchmarkAdd reached about 0.45 of BenchmarkDiskCeiling
// (a plain append + fdatasync loop on the same disk) with 64 KiB entries.
// Measured on a shared 2-core VM whose disk speed drifts by 2x within
// minutes, BenchmarkAddVsCeiling (64 KiB adds, 256 in flight, interleaved
// with 4 MiB fdatasynced appends so both see the same disk) gave a median
// of 0.78 (0.55 to 0.97 over 8 runs) for this layout, against 0.59 (0.48
// to 0.74 over 4 runs) for the previous one in the same session, and the
// disk writes 1.00 byte per payload byte at 64 KiB (BenchmarkAdd's
// disk-B/payload-B; 1.07 at 1 KiB, the records' headers).
//
// What it costs: space amplification. A file stays whole while any of its
// entries is live, so disk use is the live data plus, per file, up to
// (1 − CompactionThreshold) of dead bytes, plus the files not yet
// checkpointed; and compaction writes the live part of a file again (at
// most CompactionThreshold × JournalFileSize per file). Reads cost a pread
// per entry instead of a block-cache hit, which is the page cache when
// tailing and a disk read for a catch-up reader (as for any entry log).
// Journal records are also larger than the payload by their header and
// master key. The rejected alternative of enabling pebble's WAL for the
// index would add a second (small) synced write on the ack path; replaying
// the journal costs nothing while running.
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
// these faults in tests and in the real binary (MERIDIAN_FAILPOINTS), and a
// slow disk (journal-fsync=delay:D). With Config.FailpointEndpoint, an HTTP
// endpoint for tests switches them while the bookie runs (SetFailpoints);
// without it the journal runs on no FaultFS at all.
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
// socket; the journal's sync stage alone appends to the journal file; its
// apply stage alone writes ledger state and the index entries of new
// records; the checkpointer alone writes CHECKPOINT. Journal files are
// deleted, and their persisted accounting written, only under store.maint,
// by the checkpointer, GC or the compactor. Bookie.Close stops and waits for
// all of them.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
//
// # Metadata
//
// The bookie registers at /meridian/regions/<r>/bookies/<id> under a lease
// (bkproto.Registration) and deletes local ledgers whose
// /meridian/regions/<r>/ledgers/<id> key is gone (CollectGarbage). It
// follows the operator's state for it (bkproto.BookieStateKey): while an
// operator decommissions it, it refuses writers' adds with ReadOnly and
// registers as read-only, so writers and placement move off it, and
// auto-recovery (cluster/autorecovery) copies what it holds elsewhere;
// reads and recovery adds go on (decommission.go).
//
// # Where things are
//
// bookie.go starts and stops a Bookie, which config.go configures, and
// server.go serves its connections. journal.go is the journal, its replay
// and its group commit, in records of record.go's format; store.go is the
// pebble index, the ledger state and the read path; space.go is the life of
// the journal files (checkpoint, accounting, deletion, compaction).
// register.go keeps the registration and gc.go collects garbage. fs.go,
// failpoint.go and failpoint_endpoint.go inject faults, and metrics.go
// declares every metric.
package bookie
