// Package topology is Meridian's pure placement logic: which bookies hold a
// ledger, Pulsar topic names, and the bundles (hash ranges) that group a
// namespace's topics for ownership. placement.go chooses a ledger's ensemble
// rack-aware and replaces one bookie of it; topicname.go parses and prints
// topic names as Pulsar does (domain, tenant, namespace, partitions);
// bundle.go splits the hash space into bundles and maps a topic to its
// bundle.
//
// DESIGN §2 also places region ids and the replication graph here, and
// neither has a type of its own. A region is its name, a string, which the
// cluster registry in global records; region.go bounds the number each
// region is also given, which its ledger ids carry. The replication graph is the full mesh
// of each topic's effective replication clusters, which global.Resolve
// works out and the replicator reads.
//
// It does no I/O and imports nothing of Meridian's, so every decision here is
// a function of its arguments (including an explicit random source) and is
// tested with tables.
package topology
