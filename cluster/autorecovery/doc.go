// Package autorecovery re-replicates the ledgers of bookies that are gone
// for good, or being decommissioned, so that a region's durability does not
// erode: BookKeeper's auditor and replication workers (DESIGN §4).
//
// # Parts
//
//   - The auditor, one per region, elected through the metadata store's
//     election (auditor.go). It compares every ledger's ensembles with the
//     registered bookies and the operators' bookie states. A bookie that
//     ledgers name and that has been unregistered for
//     LostBookieRecoveryDelay (5 minutes by default, so that a rolling
//     restart copies nothing), or that an operator marked lost or is
//     decommissioning, gets every ledger that names it marked
//     under-replicated (marks.go). Every CheckInterval it also reads a
//     sample of every closed ledger's entries from every copy, and marks
//     the ledgers whose live bookies lack one.
//   - Replication workers (worker.go), in every process that runs them.
//     A worker claims a marked ledger under its lease, plans what it needs
//     (plan.go), and for each slot of a final fragment held by a marked
//     bookie chooses a replacement by the placement rules of a new
//     ensemble, copies the slot's entries to it from surviving copies
//     (ledger.Client.CopyFragment, as recovery adds, at most
//     RateBytesPerSecond), and swaps it into the fragment by CAS
//     (ledger.Client.ApplyRepair). When nothing the mark names is left in
//     a final fragment it deletes the mark.
//   - Admin (admin.go): what the admin REST API serves, through the
//     metadata store alone.
//
// Keys (bkproto's recovery.go): the election, the marks, the claims, the
// operators' bookie states and the pause switch, under
// /meridian/regions/<r>/autorecovery/.
//
// # Why a writer, a recovery and a repair never disagree
//
// A repair changes one thing: which bookie holds a slot of a final
// fragment, one that no one else writes. A closed ledger's fragments are
// all final, and an open ledger's are all but the last: the writer only
// appends fragments and amends its last, every entry before the last
// fragment is confirmed, and no pending add lies in an earlier fragment.
// The swap is a CAS at the revision the copy was planned from, so it lands
// only on the metadata the copy was made for, and only after the
// replacement acknowledged every entry (on its fsynced journal): the
// metadata never names a bookie without the data. The CAS is guarded by
// the worker's claim, so a worker that lost its claim (its lease lapsed)
// can never publish. The writer, whose own CAS then fails, re-reads, sees
// that only earlier fragments' bookies changed (ledger's onlyRepairs),
// adopts the change and makes its own on top, so producers see nothing. A
// recovery owns the ledger from IN_RECOVERY to CLOSED: a repair is refused
// for a ledger in recovery, and a repair planned before recovery began
// fails its CAS; the recovery's CASes therefore never meet a repair, and
// it cannot be sent back to its start by one. Recovery reads and writes
// only the last fragment, which a repair never touches while the ledger is
// not closed.
//
// # Orphans
//
// A copy that no ensemble names is an orphan: a repair whose swap failed,
// a replacement that died mid-copy, or a lost bookie that came back after
// its slots were given away. A bookie's garbage collector deletes a
// ledger's copies once the ledger's metadata is gone (cluster/bookie's
// CollectGarbage), so orphans last as long as their ledger, which a
// topic's retention bounds; they are never read, since readers go by the
// metadata. Collecting them earlier (a copy of a closed ledger that names
// the bookie in no fragment, deleted under the ledger's claim so that it
// never races a repair making it) is not built yet. The garbage collector
// never deletes a copy being made: it deletes only copies of ledgers whose
// metadata is gone, and a repair's swap needs that metadata.
//
// # Pausing
//
// Operators pause recovery (`meridian admin bookies autorecovery
// disable`, BookKeeper's `autorecovery -disable`) during maintenance that
// would outlast the delay: the auditor then marks nothing and workers
// take nothing (a repair under way stops after its current slot). The
// auditor still notes when bookies went; once recovery resumes, those gone
// longer than the delay are marked at its next audit.
package autorecovery
