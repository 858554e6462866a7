package ledger

import (
	"context"
	"time"
)

// Bookie is the narrow view the client has of one bookie, in the way
// hashicorp/raft sees its peers through a Transport: the bkproto connection
// implements it for real bookies, and ledgertest implements it in memory with
// fault injection. Implementations are safe for concurrent use and pipeline
// concurrent calls; each call honours ctx (deadline and cancellation).
//
// Errors are classified with errors.Is against ErrBookieFenced,
// ErrNoSuchEntry, ErrNoSuchLedger, ErrBookieReadOnly, ErrChecksum and
// ErrBookieUnavailable. Anything else is treated like ErrBookieUnavailable:
// it says nothing about what the bookie stores.
type Bookie interface {
	// AddEntry stores one entry and returns once it is on the bookie's
	// fsynced journal. A fenced ledger refuses it with ErrBookieFenced
	// unless req.Recovery is set; a ledger whose master key is not
	// req.MasterKey refuses it with ErrUnauthorized.
	AddEntry(ctx context.Context, req AddRequest) error
	// ReadEntry returns an entry whose checksum the implementation has
	// verified.
	ReadEntry(ctx context.Context, ledgerID, entryID int64) (BookieEntry, error)
	// FencingRead is ReadEntry after the bookie has fenced the ledger
	// durably, as Fence does (recovery reads do this, so a bookie that
	// answers NoSuchEntry can never later accept the old writer's add).
	FencingRead(ctx context.Context, ledgerID, entryID int64, masterKey []byte) (BookieEntry, error)
	// ReadLAC returns the highest LAC the bookie has seen for the ledger.
	ReadLAC(ctx context.Context, ledgerID int64) (int64, error)
	// WaitEntry is a long-poll read, BookKeeper's read with the LAC
	// piggybacked: the bookie holds the call until its LAC reaches
	// entryID, or wait passes, and then answers as ReadEntry(entryID)
	// would. The LAC in the answer (set even with ErrNoSuchEntry and
	// ErrChecksum) says whether the entry is confirmed; a tailing reader
	// thus learns the new LAC and gets its next entry in one round trip.
	WaitEntry(ctx context.Context, ledgerID, entryID int64, wait time.Duration) (BookieEntry, error)
	// Fence durably marks the ledger fenced, so that later normal adds fail
	// with ErrBookieFenced, and returns the bookie's LAC for it (-1 when it
	// knows none). It succeeds for a ledger the bookie has never seen, and
	// binds masterKey to it; a ledger with another key refuses it with
	// ErrUnauthorized.
	Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error)
	// WriteLAC records an explicit LAC, sent by an idle writer with the
	// ledger's master key.
	WriteLAC(ctx context.Context, ledgerID, lac int64, masterKey []byte) error
}

// AddRequest is one entry sent to one bookie.
type AddRequest struct {
	LedgerID int64
	EntryID  int64
	// LAC is the writer's last add confirmed when it sent the entry;
	// bookies keep the highest they see and tailing readers read it.
	LAC     int64
	Payload []byte
	// Recovery marks a recovery write-back or a repair's copy, which
	// fenced bookies accept (with the master key).
	Recovery bool
	// MasterKey is the ledger's master key (Metadata.MasterKey).
	MasterKey []byte
}

// BookieEntry is an entry as one bookie returned it.
type BookieEntry struct {
	EntryID int64
	// LAC is the LAC the entry was written with.
	LAC     int64
	Payload []byte
}

// Bookies resolves a bookie id to a client for it. Implementations cache
// connections; the client calls Bookie on every use, so a reconnect after a
// bookie restart is the implementation's business.
type Bookies interface {
	Bookie(ctx context.Context, id string) (Bookie, error)
}
