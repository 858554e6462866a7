package bookie

import "errors"

// Sentinel errors of the bookie. Errors a client sees travel as bkproto
// status codes (bkproto.ErrFenced, bkproto.ErrReadOnly, ...); these are the
// bookie's own.
var (
	// ErrJournalSync: a journal fdatasync failed. The bookie stops at once,
	// because it can no longer tell which acknowledged adds are durable
	// (DESIGN §4); the process must exit non-zero and an operator must check
	// the disk before it restarts.
	ErrJournalSync = errors.New("bookie: journal fsync failed")
	// ErrJournalCorrupt: replay found a damaged record that is not a torn
	// tail (it is followed by more journal). Starting anyway could silently
	// drop acknowledged entries, so the bookie refuses to start.
	ErrJournalCorrupt = errors.New("bookie: journal corrupt")
	// ErrStorage: the entry store (pebble) failed. Fatal, like a failed
	// journal fsync.
	ErrStorage = errors.New("bookie: entry storage failed")
	// ErrClosed: the bookie is shutting down or has stopped.
	ErrClosed = errors.New("bookie: closed")
	// ErrInvalidConfig: Config.Validate refused the configuration.
	ErrInvalidConfig = errors.New("bookie: invalid config")
	// ErrFailpoint: a failpoint specification could not be parsed.
	ErrFailpoint = errors.New("bookie: bad failpoint")
	// ErrFailpointsFixed: failpoints were to be switched on a bookie
	// started without a failpoint endpoint (Config.FailpointEndpoint),
	// whose journal has no failpoint filesystem to switch.
	ErrFailpointsFixed = errors.New("bookie: failpoints cannot be switched on this bookie")
)
