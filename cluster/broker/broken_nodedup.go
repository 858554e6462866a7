//go:build broken_nodedup

package broker

// A broken variant, never shipped: the destination does not deduplicate
// replicated messages, so a replicator that resends after a worker kill
// or a reconnect stores them twice. It exists for e2e's
// TestBrokenVariants.
func init() { dedupReplicated = false }
