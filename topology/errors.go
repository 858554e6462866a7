package topology

import "errors"

var (
	// ErrNotEnoughBookies: placement found fewer eligible (live, writable,
	// not excluded) bookies than it needs. Register more bookies, or lower
	// the ensemble size.
	ErrNotEnoughBookies = errors.New("topology: not enough bookies")
	// ErrInvalidSize: a placement request asked for a size or slot that
	// cannot exist.
	ErrInvalidSize = errors.New("topology: invalid placement size")
	// ErrInvalidTopicName: a topic name Pulsar would refuse. Clients get it as
	// InvalidTopicName.
	ErrInvalidTopicName = errors.New("topology: invalid topic name")
	// ErrInvalidBundle: a malformed bundle range or bundle count.
	ErrInvalidBundle = errors.New("topology: invalid bundle")
)
