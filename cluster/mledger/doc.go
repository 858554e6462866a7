// Package mledger is Meridian's managed ledger: a topic stored as an ordered
// list of ledgers (cluster/ledger), written through the last one, and read
// by cursors that remember what their subscription has consumed.
//
// # The ledger list
//
// A topic's record, /meridian/regions/<r>/mledgers/<topic>, is versioned
// JSON {"v":1,"ledgers":[{id,entries,size,ctime}],"terminated":bool}. Only
// the instance that owns the topic changes it, always by CAS on the revision
// it last wrote. Opening a topic
//
//  1. reads the record and claims it by rewriting it by CAS (or creates
//     it): a previous owner still running fails its next CAS on it;
//  2. recovers the last ledger with OpenAndRecover, which fences whatever
//     writer it had: a previous owner, crashed or alive, can never confirm
//     another entry to it;
//  3. reads the last entry back to continue the index;
//  4. creates a NEW ledger and appends it to the record by CAS.
//
// Two instances opening the same topic are settled by steps 1, 2 and 4:
// the later one fences the earlier one's ledger, so the earlier one's next
// append fails, and of two CASes on the record one fails. A failed CAS,
// a fenced writer, or a failed CAS on a cursor the instance owns makes the
// instance terminal (ErrFenced, ErrOwnershipLost, reported on Lost): it
// stops appending and never re-reads and retries over the winner.
//
// A ledger is rolled over by entry count, size or age, never before a
// minimum age (Pulsar's rule and defaults). Rollover happens under the
// write lock between two appends: the current ledger is closed, which waits
// for its pending entries, and only then does the next one start, so every
// entry of a ledger precedes every entry of the next. The next ledger is
// usually made already: the owner goroutine creates it, off the append
// path, once the current one is three quarters full (entries, size or
// age), and one left unused is closed and deleted on Close, Terminate and
// Delete. The list is then written once, by CAS, with the closed ledger's
// final counts and the new ledger. So the appends queued behind a rollover
// wait for the close and that one write, plus at most one ledger create
// when none was made ahead; never for retention.
//
// # Entries
//
// Every stored entry is [0x0e02][u32 size][BrokerEntryMetadata][message],
// the message being the bytes given to Append (from its 0x0e01 magic on).
// The BrokerEntryMetadata carries broker_timestamp (never going backwards
// within a topic) and index: the previous entry's index plus the entry's
// message count, i.e. the topic-wide offset of its last message, continued
// across ledgers and across owners. SplitEntry splits a stored entry without
// copying.
//
// # Cursors
//
// A cursor is a mark-delete position (everything up to it is consumed) plus
// the individually acked positions after it, held as ranges (cursorState,
// ackSet). A durable cursor's state is written to
// /meridian/regions/<r>/cursors/<topic>/<name> by its own goroutine, at most
// once per CursorPersistInterval, coalescing every change in between, and
// on Close. At most MaxPersistedAckRanges ranges are written: the lowest
// ones, nearest the mark-delete position. The ranges past the cap are
// written as not acked.
//
// Cursors whose names match ForeignCursorPrefixes (the replicator's
// meridian.repl.<remote>) are written by another process through
// ExternalCursor, each write guarded by the worker's task key (WithGuard),
// and deleted with DeleteExternalCursor; the topic's owner reads them
// through a watch, for retention only, and never writes them.
//
// # Reading from outside the owner
//
// A Tailer reads a topic from another process (the replicator's worker):
// the ledger list from the record, which it watches, and the entries
// straight from the bookies up to each ledger's LAC, long-polling the LAC
// when caught up and moving to the next ledger once the current one is
// closed and read. It writes nothing. A ledger it still needs that
// retention deleted is ErrLedgerGone, never a skip.
//
// # What survives a crash (the redelivery window)
//
// When the owner dies without Close:
//   - Every entry whose append was confirmed is readable after the next
//     Open; entries that were in flight may or may not be (recovery keeps
//     whatever reached Qa bookies). The index continues from the last stored
//     entry, with no gap and no repeat.
//   - A cursor comes back at the state it last wrote: at or after every
//     position it had persisted, at or before its last ack. Acks of the
//     last CursorPersistInterval (plus one store round trip) before the
//     crash are lost, and so are acks beyond MaxPersistedAckRanges ranges:
//     those entries are delivered again. Nothing acked is ever skipped
//     without having been acked: duplicates, never losses.
//
// # Retention
//
// A ledger other than the last is deleted when it lies wholly behind the
// mark-delete position of every durable cursor, the ones owned elsewhere
// included, and the retention policy (RetentionTime, RetentionSize) no
// longer keeps it. The record is rewritten first, then the ledgers'
// metadata is deleted. Retention runs on the owner goroutine after each
// rollover and every HousekeepingInterval; it holds the list's lock, not
// the write lock, and hands the deletions to a goroutine of their own, so a
// slow store delays deletions, never appends. While more than
// maxPendingDeletes ledgers wait to be deleted, retention leaves the rest
// in the list.
//
// # Time
//
// The times the package reads or waits on (broker timestamps, ledger ages,
// retention times, the housekeeping ticker, the cursors' persistence
// timers) come from Config.Clock, so that tests move a
// fake clock and get exact bounds. Two stay on real time: the deadlines of
// store calls (MetaTimeout), and the foreign-cursor watch's pause before it
// lists again after a failed list, which only spaces out retries against a
// failing store (on a fake clock, the watch would stop until a test moved
// time).
//
// # Entry cache
//
// Confirmed entries go into a cache bounded in bytes (CacheMaxBytes), which
// serves tailing reads; an entry leaves once every open cursor has read
// past it, or when the cache is full, oldest first.
//
// # Where things are
//
// factory.go opens managed ledgers, which config.go configures. mledger.go
// is the ManagedLedger and its appends, with rollover.go (rollover and the
// ledger made ahead), deleter.go (retention's deletions), read.go and
// cache.go (reads and the entry cache), and entry.go (the stored entry's
// layout). view.go is the ledger list in memory and value.go its stored
// form. A cursor is cursor.go, over state.go's state machine and ackset.go's
// ranges; position.go names an entry. foreign.go and external.go are the
// cursors another process writes, and replstats.go the replication state
// record through which the replicator's workers report their tasks to the
// brokers. tailer.go is the Tailer; stats.go and metrics.go are what the
// broker reports.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package mledger
