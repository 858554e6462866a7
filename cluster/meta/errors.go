package meta

import "errors"

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("meta: key not found")
	// ErrExists: Create found the key already there.
	ErrExists = errors.New("meta: key already exists")
	// ErrConflict: the key's ModRevision is no longer the one the caller read,
	// or the key is gone. The caller has lost the race and must not retry
	// blindly (DESIGN §3).
	ErrConflict = errors.New("meta: revision conflict")
	// ErrCompacted: a watch asked for a revision the store has compacted away.
	ErrCompacted = errors.New("meta: revision compacted")
	// ErrLeaseNotFound: the lease has expired or was revoked.
	ErrLeaseNotFound = errors.New("meta: lease not found")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("meta: store closed")
)

// ErrValueVersion: a stored value's "v" field is newer than this binary
// understands (or missing). Upgrade the binary that reads it; never rewrite
// the value with an older format.
var ErrValueVersion = errors.New("meta: unsupported value version")

// errNilLease: Campaign was given no lease.
var errNilLease = errors.New("meta: Campaign needs a lease")
