package ledger

import "errors"

// Errors a Bookie implementation returns, and the client's own. Bookie
// implementations (the bkproto adapter, the in-memory set in ledgertest) map
// their status codes onto the first group so that the client classifies
// answers with errors.Is only.
var (
	// ErrBookieFenced: the bookie has fenced the ledger; a normal add was
	// refused. The writer stops: recovery has taken the ledger over.
	ErrBookieFenced = errors.New("ledger: bookie has fenced the ledger")
	// ErrNoSuchEntry: the bookie does not hold the entry. Only (Qw-Qa)+1 such
	// answers from an entry's write quorum make it absent (DESIGN §4).
	ErrNoSuchEntry = errors.New("ledger: no such entry")
	// ErrNoSuchLedger: the bookie holds nothing of the ledger. For reads it
	// counts exactly like ErrNoSuchEntry.
	ErrNoSuchLedger = errors.New("ledger: no such ledger")
	// ErrBookieReadOnly: the bookie refuses adds (its disk is full). It keeps
	// serving reads; the writer replaces it.
	ErrBookieReadOnly = errors.New("ledger: bookie is read-only")
	// ErrChecksum: the entry failed its CRC32C check. That one read fails
	// and the client tries another replica.
	ErrChecksum = errors.New("ledger: entry checksum mismatch")
	// ErrUnauthorized: the bookie refused the request's master key (the
	// ledger has another) or the client's credentials (ConnConfig's token
	// or certificate). Like ErrBookieUnavailable it says nothing about what
	// the bookie stores; it also says that retrying with the same key or
	// credentials is pointless: check the region's bookie token and CA.
	ErrUnauthorized = errors.New("ledger: bookie refused the credentials or master key")
	// ErrBookieUnavailable: the bookie could not be reached (dial, I/O,
	// timeout). It says nothing about what the bookie stores.
	ErrBookieUnavailable = errors.New("ledger: bookie unavailable")

	// ErrFenced: the ledger was fenced or taken into recovery by another
	// client; this writer may never add to it again. Whoever owns the
	// ledger's topic now has it; stop writing and let go.
	ErrFenced = errors.New("ledger: ledger fenced by recovery")
	// ErrLedgerClosed: the ledger is closed; it is read-only forever.
	ErrLedgerClosed = errors.New("ledger: ledger closed")
	// ErrLedgerNotFound: no metadata exists for the ledger id.
	ErrLedgerNotFound = errors.New("ledger: ledger not found")
	// ErrNotEnoughBookies: fewer writable bookies are registered than the
	// ensemble needs. Start more bookies or lower E.
	ErrNotEnoughBookies = errors.New("ledger: not enough bookies")
	// ErrLedgerIDsExhausted: the region's ledger id counter has passed what
	// a ledger id holds (see LedgerID); no ledger can be created.
	ErrLedgerIDsExhausted = errors.New("ledger: the region's ledger ids are exhausted")
	// ErrInvalidConfig: a Config or quorum failed validation.
	ErrInvalidConfig = errors.New("ledger: invalid configuration")
	// ErrWriterClosed: the writer was closed or stopped; the add was not
	// taken, or was abandoned before Qa bookies acked it.
	ErrWriterClosed = errors.New("ledger: writer closed")
	// ErrEntryTooLarge: one payload is larger than the writer's byte budget.
	ErrEntryTooLarge = errors.New("ledger: entry larger than MaxInFlightBytes")
	// ErrBeyondLAC: a read asked for an entry past the last confirmed entry.
	// Readers never see unconfirmed entries.
	ErrBeyondLAC = errors.New("ledger: entry beyond last add confirmed")
	// ErrLedgerOpen: the operation needs a closed ledger; close or recover
	// it first.
	ErrLedgerOpen = errors.New("ledger: ledger is not closed")
	// ErrNoGoodCopy: every member of an entry's write set answered that it
	// lacks the entry or holds it damaged: the ledger has lost it. A
	// repair reports it and leaves the ledger marked; it is never skipped.
	ErrNoGoodCopy = errors.New("ledger: no good copy of an entry left")
	// ErrInRecovery: the ledger is being recovered; a repair waits until it
	// is closed.
	ErrInRecovery = errors.New("ledger: ledger is in recovery")
	// ErrReplacementFailed: the bookie a repair copied to refused or failed
	// the copies; choose another replacement.
	ErrReplacementFailed = errors.New("ledger: replacement bookie failed the copy")
	// ErrBadMetadata: the stored ledger metadata cannot be decoded or breaks
	// an invariant (E >= Qw >= Qa >= 1, fragments in order).
	ErrBadMetadata = errors.New("ledger: bad ledger metadata")
)
