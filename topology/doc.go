// Package topology is Meridian's pure placement logic: which bookies hold a
// ledger (rack-aware ensemble placement and replacement), Pulsar topic names
// and the bundles (hash ranges) that group them for ownership, and, as the
// rest of the map lands, region ids and the replication graph.
//
// It does no I/O and imports nothing of Meridian's, so every decision here is
// a function of its arguments (including an explicit random source) and is
// tested with tables.
package topology
