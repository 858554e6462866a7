package replicator

// awaitRemoteReceipt: a task moves its replication cursor past an entry
// only once the remote has receipted it (acknowledge). Only the broken
// variant broken_cursorearly clears it, in an init behind that build tag
// (see e2e/broken_test.go), to show that the e2e checker catches a cursor
// that runs ahead of the remote; the shipped build never changes it.
var awaitRemoteReceipt = true
