//go:build broken_ackearly

package broker

// A broken variant, never shipped: the broker receipts a SEND before the
// bookies confirm its append, so a broker crash loses acknowledged
// messages. It exists for e2e's TestBrokenVariants.
func init() { receiptAfterAppend = false }
