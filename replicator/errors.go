package replicator

import "errors"

// Sentinel errors. Each is returned wrapped with details; classify with
// errors.Is.
var (
	// ErrNoCluster: a namespace replicates to a region that has no
	// cluster record, so there is no address to publish to.
	ErrNoCluster = errors.New("replicator: the remote region has no cluster record")
	// ErrWorkerExists: another live worker of the region has this id.
	ErrWorkerExists = errors.New("replicator: a worker with this id is already registered")
)
