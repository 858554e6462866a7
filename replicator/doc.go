// Package replicator copies each region's topics to the other regions of
// their replication clusters (DESIGN §6), reading straight from the source
// region's bookies and never through its brokers: storage and compute are
// apart, so replication adds no load to the brokers that serve clients, and
// goes on while they move or fail.
//
// One task per (source topic partition, remote region) is needed for every
// topic of the region whose effective replication clusters (the topic's
// override or the namespace's, bounded by the tenant's allowed clusters)
// name the region and others. Tasks are spread over the region's workers
// through etcd leases (Worker). A task tails the topic's ledgers from its
// durable cursor meridian.repl.<remote> (mledger.Tailer), sends each entry
// whole through a Pulsar-protocol producer named meridian.repl.<region>
// (remote.Producer), and moves the cursor past an entry only once the
// remote broker has acknowledged it; the cursor pins the topic's retention,
// so a remote that is down keeps its backlog.
//
// Effectively once: the remote broker deduplicates replicated entries by
// their source (origin region, source topic incarnation, source offsets),
// which the producer stores with each entry, so an entry sent again after a
// failure or a crash (at most the cursor's persist interval of them) is
// dropped there, and nothing acknowledged is lost. In order: one task sends
// one topic's entries in source order over one producer. No loops: an entry
// that arrived by replication (replicated_from set) is never sent on, and a
// message's replicate_to narrows where it goes ("__local__" keeps it home).
//
// A worker that froze past its lease and resumes cannot move a cursor: each
// cursor write is one etcd transaction that also requires the task key to be
// at the revision its holder claimed it at, and a new holder's claim created
// the key anew.
//
// Two policies act on a task's sends: the topic's replicator dispatch rate
// holds them to its rate, and its message TTL skips an entry stored longer
// ago than the TTL, counted as expired: the one way the cursor passes an
// entry that was not sent.
//
// worker.go holds the Worker, which claims and runs tasks, and plan.go which
// tasks the region needs and which entries go to a remote; task.go is one
// task, and cursor.go how it opens its cursor. ratelimit.go and ttl.go are
// the two policies. stats.go is what the tasks report and the worker
// publishes for the brokers' replication stats (mledger's replication state
// record); trace.go is the replicate span; metrics.go the worker's own
// metrics. variants.go and broken_cursorearly.go are a deliberately broken
// build for e2e's TestBrokenVariants.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package replicator
