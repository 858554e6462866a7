package mledger

import "errors"

// Sentinel errors. Each is returned wrapped with details; classify with
// errors.Is.
var (
	// ErrFenced: another instance has taken the topic over (it recovered and
	// fenced our ledger, or won the CAS on the ledger list). This instance
	// has stopped appending for good; close it and let the new owner serve.
	ErrFenced = errors.New("mledger: managed ledger fenced by another owner")
	// ErrOwnershipLost: a CAS on a cursor this instance owns failed, so
	// another process has written it. The managed ledger stops, exactly as
	// for ErrFenced; it never re-reads and writes over the winner.
	ErrOwnershipLost = errors.New("mledger: ownership lost")
	// ErrTerminated: the topic was terminated; it takes no more appends.
	// Readers read to its end and then get ErrEndOfTopic.
	ErrTerminated = errors.New("mledger: topic terminated")
	// ErrEndOfTopic: a read reached the end of a terminated topic.
	ErrEndOfTopic = errors.New("mledger: end of terminated topic")
	// ErrClosed: the managed ledger or cursor was closed.
	ErrClosed = errors.New("mledger: closed")
	// ErrInvalidPosition: a position names no stored entry (unknown or
	// deleted ledger, entry past the ledger's end or past the last
	// confirmed entry). Nothing was changed.
	ErrInvalidPosition = errors.New("mledger: invalid position")
	// ErrSeekPastEnd: a seek asked for a point after the last entry.
	// Nothing was changed.
	ErrSeekPastEnd = errors.New("mledger: seek past the end of the topic")
	// ErrInvalidConfig: a Config failed validation.
	ErrInvalidConfig = errors.New("mledger: invalid configuration")
	// ErrCursorOwnedElsewhere: the cursor name belongs to another process
	// (ForeignCursorPrefixes, e.g. the replicator's meridian.repl.<remote>);
	// the topic's owner only reads it.
	ErrCursorOwnedElsewhere = errors.New("mledger: cursor is owned by another process")
	// ErrCursorExists: a cursor of that name is already open on this
	// managed ledger.
	ErrCursorExists = errors.New("mledger: cursor already open")
	// ErrAlreadyOpen: the factory already has the topic open.
	ErrAlreadyOpen = errors.New("mledger: topic already open in this factory")
	// ErrBadEntry: a stored entry does not start with a well-formed
	// BrokerEntryMetadata section.
	ErrBadEntry = errors.New("mledger: malformed stored entry")
	// ErrBadMetadata: a managed-ledger or cursor value in the store cannot
	// be decoded or breaks an invariant.
	ErrBadMetadata = errors.New("mledger: bad metadata")
	// ErrNoMessages: an append declared fewer than one message.
	ErrNoMessages = errors.New("mledger: an entry holds at least one message")
	// ErrLedgerGone: a Tailer needs a ledger (it holds entries after the
	// tailer's position) that the topic's record no longer names or whose
	// metadata is gone: retention deleted entries that were never read.
	// The tailer stops; the entries are lost to it, and it never skips
	// them silently.
	ErrLedgerGone = errors.New("mledger: ledger needed by the tailer is gone")
	// ErrTopicDeleted: the topic's record was deleted, or deleted and
	// created again (a new incarnation, see Tailer.Incarnation), while a
	// Tailer was reading it. Open a new Tailer for the new incarnation.
	ErrTopicDeleted = errors.New("mledger: topic deleted")
	// ErrNoCursor: an external cursor opened WithoutCreate does not exist
	// (yet): its creator, the topic's owner, has not made it.
	ErrNoCursor = errors.New("mledger: cursor does not exist")
)
