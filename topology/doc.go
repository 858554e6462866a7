// Package topology is Meridian's pure placement logic: which bookies hold a
// ledger (rack-aware ensemble placement and replacement), and, as the rest of
// the map lands, region and cluster ids, bundles and the replication graph.
//
// It does no I/O and imports nothing of Meridian's, so every decision here is
// a function of its arguments (including an explicit random source) and is
// tested with tables.
package topology
