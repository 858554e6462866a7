package broker

// Switches that only the checker's broken variants flip, each in an init
// of its own file behind a build tag (broken_ackearly, broken_nodedup; see
// e2e/broken_test.go), to show that the e2e checker catches the defect.
// The shipped build, and the one -tags e2e builds, never changes them.
var (
	// receiptAfterAppend: a SEND's receipt waits until the bookies have
	// confirmed its append (DESIGN §5). broken_ackearly clears it, so that
	// receipts go out while appends are still in flight.
	receiptAfterAppend = true
	// dedupReplicated: a replication producer's SENDs are deduplicated
	// by their source identity (dedupIdentity), whatever the namespace's
	// policy. broken_nodedup clears it, so that a replicator's resend is
	// stored again.
	dedupReplicated = true
)
