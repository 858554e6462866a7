//go:build broken_cursorearly

package replicator

// A broken variant, never shipped: the replication cursor moves past an
// entry as soon as it is sent, before the remote's receipt, so a cut or a
// worker kill loses what was in flight. It exists for e2e's
// TestBrokenVariants.
func init() { awaitRemoteReceipt = false }
