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
)
