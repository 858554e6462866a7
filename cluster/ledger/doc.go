// Package ledger is Meridian's BookKeeper client: it creates ledgers on an
// ensemble of bookies, writes them through a single pipelined writer, reads
// them up to the last add confirmed (LAC), and recovers them when their
// writer dies, fencing it out.
//
// # Semantics (DESIGN §4)
//
// A ledger has an ensemble of E bookies, a write quorum Qw and an ack quorum
// Qa. Entry e goes to members (e+k) mod E, k = 0..Qw-1, and is confirmed once
// Qa of them acked it and every lower entry is confirmed. Every add carries
// the writer's LAC; when no add is expected to carry a newly confirmed LAC
// soon, the writer sends it explicitly, so a tailing reader sees an entry
// within about ExplicitLACInterval of its confirmation (at once when the
// writer is idle between adds). Readers read only up to the LAC (or the
// closed ledger's lastEntry).
//
// Metadata lives in the metadata store (cluster/meta) at
// /meridian/regions/<region>/ledgers/<id>, versioned JSON, and every change is
// a CAS on its ModRevision. The store serialises the writer's ensemble
// changes and close against recovery: once recovery has moved the ledger to
// IN_RECOVERY, the writer's next CAS fails and it stops with ErrFenced.
//
// # Safety argument in one paragraph
//
// Recovery fences (Qw-Qa)+1 members of every write quorum before it reads.
// A fenced bookie refuses the old writer's adds, so every write quorum is
// left with at most Qa-1 members that accept them: no entry can be confirmed
// after fencing, and the writer's next add fails. Every entry confirmed
// before it sits on Qa members of its write quorum, so at most Qw-Qa of them
// can answer NoSuchEntry: requiring (Qw-Qa)+1 such answers before calling an
// entry absent (and retrying timeouts and errors instead of counting them)
// means recovery never stops before a confirmed entry. Recovery reads fence
// too, so an answer of NoSuchEntry stays true. Recovery writes what it found
// back to a full Qw and closes by CAS, which also settles concurrent
// recoverers: the loser returns the winner's result.
//
// # Repairs
//
// Auto-recovery (cluster/autorecovery) re-replicates with replicate.go's
// primitives: CopyFragment copies what one ensemble slot of a fragment
// holds onto a replacement bookie, and ApplyRepair swaps the replacement in
// by CAS at the revision the copy was planned from. Only final fragments
// are repaired (all of a closed ledger's; all but an open ledger's last),
// never a ledger in recovery, and the writer adopts such a swap instead of
// taking it for fencing (onlyRepairs), so a repair never fails producers
// and never moves anything the writer or a recoverer is still deciding.
//
// # Bookies
//
// The client sees a bookie through the narrow Bookie interface and finds
// bookies through Bookies, the way hashicorp/raft sees peers through a
// Transport. BKProto adapts cluster/bookie/bkproto connections to it;
// ledgertest provides an in-memory set with fault injection. Live bookies are
// watched under /meridian/regions/<region>/bookies/ (Directory) and chosen by
// topology's rack-aware placement.
//
// # Where things are
//
// client.go is the Client, its Config, and creating and deleting ledgers;
// writer.go the Writer; reader.go the Reader, which also tails an open
// ledger; recovery.go OpenAndRecover. metadata.go and quorum.go are a
// ledger's metadata and its quorum; bookie.go, bkproto.go and directory.go
// are the bookies as the client sees, reaches and finds them; metrics.go
// declares every metric.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package ledger
