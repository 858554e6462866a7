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
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package replicator
