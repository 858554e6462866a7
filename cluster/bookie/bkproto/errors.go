package bkproto

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every non-OK Status maps to exactly one of the first group,
// so callers classify a bookie's answer with errors.Is whatever the message
// text says. The second group describes the transport itself.
var (
	// ErrNoSuchEntry: the bookie holds the ledger but not this entry. During
	// recovery an entry counts as absent only when enough bookies say so
	// (DESIGN §4); a single NoSuchEntry proves nothing on its own.
	ErrNoSuchEntry = errors.New("bkproto: no such entry")
	// ErrNoSuchLedger: the bookie has never seen the ledger (or has
	// garbage-collected it).
	ErrNoSuchLedger = errors.New("bkproto: no such ledger")
	// ErrFenced: the ledger is fenced; only recovery adds are accepted. A
	// writer that sees this has lost the ledger and must stop writing.
	ErrFenced = errors.New("bkproto: ledger fenced")
	// ErrReadOnly: the bookie is read-only (its disk is full). Reads still
	// work; the writer must place the entry on another bookie.
	ErrReadOnly = errors.New("bkproto: bookie is read-only")
	// ErrChecksumMismatch: the entry failed its CRC32C, on the bookie or on
	// receipt. Read another replica.
	ErrChecksumMismatch = errors.New("bkproto: entry checksum mismatch")
	// ErrTooLarge: the entry is larger than the bookie accepts.
	ErrTooLarge = errors.New("bkproto: entry too large")
	// ErrBadRequest: the request was malformed or inconsistent (for example
	// a master key that differs from the ledger's).
	ErrBadRequest = errors.New("bkproto: bad request")
	// ErrInternal: the bookie failed for a reason of its own (for example it
	// is shutting down after a journal fsync failure). Retry elsewhere.
	ErrInternal = errors.New("bkproto: bookie internal error")
	// ErrUnauthorized: the request did not carry the ledger's master key
	// (an add, fence or LAC write without it, or with another), or the
	// connection did not authenticate when the bookie requires it. As
	// BookKeeper's EUA, it is never retried with the same credentials: the
	// writer's key or the client's token is wrong.
	ErrUnauthorized = errors.New("bkproto: unauthorized")

	// ErrFrameTooLarge: a frame's length prefix exceeds the maximum frame
	// size. The connection is closed: the stream cannot be resynchronised.
	ErrFrameTooLarge = errors.New("bkproto: frame too large")
	// ErrMalformedFrame: a frame could not be decoded. The connection is
	// closed.
	ErrMalformedFrame = errors.New("bkproto: malformed frame")
	// ErrUnsupportedVersion: the peer speaks a protocol version we do not.
	ErrUnsupportedVersion = errors.New("bkproto: unsupported protocol version")
	// ErrConnClosed: the connection is closed (by Close or after a transport
	// error, which is wrapped alongside). Requests in flight on it have an
	// unknown outcome.
	ErrConnClosed = errors.New("bkproto: connection closed")
)

// Status is the outcome code carried by every response.
type Status uint8

// Status codes. The numeric values are part of the wire format.
const (
	StatusOK               Status = 0
	StatusNoSuchEntry      Status = 1
	StatusNoSuchLedger     Status = 2
	StatusFenced           Status = 3
	StatusReadOnly         Status = 4
	StatusChecksumMismatch Status = 5
	StatusTooLarge         Status = 6
	StatusBadRequest       Status = 7
	StatusInternal         Status = 8
	StatusUnauthorized     Status = 9
)

// statusTable is the one mapping between status codes and sentinel errors.
var statusTable = [...]struct {
	name string
	err  error
}{
	StatusOK:               {"OK", nil},
	StatusNoSuchEntry:      {"NoSuchEntry", ErrNoSuchEntry},
	StatusNoSuchLedger:     {"NoSuchLedger", ErrNoSuchLedger},
	StatusFenced:           {"Fenced", ErrFenced},
	StatusReadOnly:         {"ReadOnly", ErrReadOnly},
	StatusChecksumMismatch: {"ChecksumMismatch", ErrChecksumMismatch},
	StatusTooLarge:         {"TooLarge", ErrTooLarge},
	StatusBadRequest:       {"BadRequest", ErrBadRequest},
	StatusInternal:         {"Internal", ErrInternal},
	StatusUnauthorized:     {"Unauthorized", ErrUnauthorized},
}

func (s Status) String() string {
	if int(s) < len(statusTable) {
		return statusTable[s].name
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Err returns the sentinel error for s: nil for StatusOK, ErrInternal for a
// code this version does not know.
func (s Status) Err() error {
	if int(s) < len(statusTable) {
		return statusTable[s].err
	}
	return ErrInternal
}

// StatusOf returns the status code that reports err to a peer: StatusOK for
// nil, the matching code for a sentinel (or a StatusError), and
// StatusInternal for anything else.
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	for s := 1; s < len(statusTable); s++ {
		if errors.Is(err, statusTable[s].err) {
			return Status(s)
		}
	}
	return StatusInternal
}

// StatusError is a non-OK response from a bookie: its status and the
// explanatory message it sent. It unwraps to the status's sentinel error.
type StatusError struct {
	Status  Status
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return e.Status.Err().Error()
	}
	return e.Status.Err().Error() + ": " + e.Message
}

func (e *StatusError) Unwrap() error { return e.Status.Err() }

// responseErr turns a response's status and message into an error.
func responseErr(s Status, msg string) error {
	if s == StatusOK {
		return nil
	}
	return &StatusError{Status: s, Message: msg}
}
