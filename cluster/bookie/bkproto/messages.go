package bkproto

import (
	"encoding/binary"
	"hash/crc32"
	"time"
)

// NoEntry is the entry id meaning "none": the LAC of a ledger with no
// confirmed entry yet.
const NoEntry int64 = -1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EntryChecksum is the CRC32C (Castagnoli) of an entry: its ledger id and
// entry id (8 bytes each, big-endian) followed by its payload. Binding the ids
// into the checksum catches an entry served under the wrong id, not only
// flipped bits. The writer computes it, the bookie verifies it on add and again
// on every read, and the reading client verifies it on receipt.
func EntryChecksum(ledgerID, entryID int64, payload []byte) uint32 {
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[:8], uint64(ledgerID))
	binary.BigEndian.PutUint64(ids[8:], uint64(entryID))
	return crc32.Update(crc32.Update(0, castagnoli, ids[:]), castagnoli, payload)
}

const (
	flagRecovery  = 1 << 0 // AddRequest
	flagFence     = 1 << 0 // ReadRequest
	flagWait      = 1 << 1 // ReadRequest
	flagLongPoll  = 1 << 0 // ReadLACRequest
	knownAddFlags = flagRecovery
)

// AddRequest stores one entry.
type AddRequest struct {
	LedgerID int64
	EntryID  int64
	// LastAddConfirmed is the writer's LAC when it sent the entry
	// (piggybacked); NoEntry when nothing is confirmed yet.
	LastAddConfirmed int64
	// Recovery marks an add made by ledger recovery or a repair; it is
	// accepted on a fenced ledger, where every other add fails with
	// ErrFenced. It grants nothing without the master key.
	Recovery bool
	// MasterKey is the ledger's master key (see the package comment). The
	// first add or fence that carries one binds it to the ledger on the
	// bookie; every later add, fence and LAC write must carry the same
	// key, or is refused with ErrUnauthorized.
	MasterKey []byte
	// Checksum is EntryChecksum(LedgerID, EntryID, Payload). Conn.AddEntry
	// fills it in.
	Checksum uint32
	Payload  []byte
}

func (*AddRequest) Type() MsgType { return TypeAddEntry }

func (m *AddRequest) appendBody(dst []byte) []byte {
	dst = appendI64(dst, m.LedgerID)
	dst = appendI64(dst, m.EntryID)
	dst = appendI64(dst, m.LastAddConfirmed)
	var flags byte
	if m.Recovery {
		flags |= flagRecovery
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, m.Checksum)
	dst = appendBytes16(dst, m.MasterKey)
	return appendBytes32(dst, m.Payload)
}

func (m *AddRequest) decodeBody(d *decoder) {
	m.LedgerID = d.i64("ledger id")
	m.EntryID = d.i64("entry id")
	m.LastAddConfirmed = d.i64("lac")
	flags := d.u8("flags")
	if d.err == nil && flags&^knownAddFlags != 0 {
		d.fail("unknown flags %#x", flags)
	}
	m.Recovery = flags&flagRecovery != 0
	m.Checksum = d.u32("checksum")
	m.MasterKey = d.bytes16("master key", MaxMasterKeySize)
	m.Payload = d.bytes32("payload", MaxPayloadSize)
}

// ReadRequest reads one entry.
type ReadRequest struct {
	LedgerID int64
	EntryID  int64
	// Fence makes this a fencing read: the bookie persists the ledger's
	// fence before it answers, whether or not it has the entry.
	Fence bool
	// MasterKey is the ledger's master key, sent with a fencing read only
	// (a fence needs it, as FenceRequest's does); a plain read needs none.
	MasterKey []byte
	// Wait makes this a long-poll read, BookKeeper's read with the LAC
	// piggybacked: the bookie holds the answer until its LAC for the
	// ledger reaches EntryID or Wait passes, whichever comes first, and
	// then answers as a plain read would. A tailing reader thus learns the
	// new LAC and gets the entry after its last one in one round trip.
	// Sent in whole milliseconds, at most MaxLongPollTimeout; not with
	// Fence.
	Wait time.Duration
}

func (*ReadRequest) Type() MsgType { return TypeReadEntry }

func (m *ReadRequest) appendBody(dst []byte) []byte {
	dst = appendI64(dst, m.LedgerID)
	dst = appendI64(dst, m.EntryID)
	var flags byte
	if m.Fence {
		flags |= flagFence
	}
	if m.Wait > 0 {
		flags |= flagWait
	}
	dst = append(dst, flags)
	if m.Wait > 0 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(max(min(m.Wait, MaxLongPollTimeout)/time.Millisecond, 1)))
	}
	if m.Fence {
		dst = appendBytes16(dst, m.MasterKey)
	}
	return dst
}

func (m *ReadRequest) decodeBody(d *decoder) {
	m.LedgerID = d.i64("ledger id")
	m.EntryID = d.i64("entry id")
	flags := d.u8("flags")
	switch {
	case d.err != nil:
		return
	case flags&^(flagFence|flagWait) != 0:
		d.fail("unknown flags %#x", flags)
	case flags&flagFence != 0 && flags&flagWait != 0:
		d.fail("a fencing read cannot wait")
	}
	m.Fence = flags&flagFence != 0
	if flags&flagWait != 0 {
		ms := d.u32("wait")
		if d.err == nil && (ms == 0 || time.Duration(ms)*time.Millisecond > MaxLongPollTimeout) {
			d.fail("long-poll read wait %dms outside [1ms, %s]", ms, MaxLongPollTimeout)
		}
		m.Wait = time.Duration(ms) * time.Millisecond
	}
	// A fencing read from a client older than master keys on fences ends
	// here; the bookie treats it as one without a key.
	if m.Fence && len(d.buf) > 0 {
		m.MasterKey = d.bytes16("master key", MaxMasterKeySize)
	}
}

// ReadLACRequest asks for a ledger's LastAddConfirmed as this bookie knows it.
type ReadLACRequest struct {
	LedgerID int64
	// LongPoll makes the bookie hold the answer until its LAC exceeds
	// Previous or Timeout passes, whichever comes first; either way it
	// answers OK with its current LAC.
	LongPoll bool
	Previous int64
	// Timeout is sent in whole milliseconds, at most MaxLongPollTimeout.
	Timeout time.Duration
}

func (*ReadLACRequest) Type() MsgType { return TypeReadLAC }

func (m *ReadLACRequest) appendBody(dst []byte) []byte {
	dst = appendI64(dst, m.LedgerID)
	var flags byte
	if m.LongPoll {
		flags |= flagLongPoll
	}
	dst = append(dst, flags)
	dst = appendI64(dst, m.Previous)
	return binary.BigEndian.AppendUint32(dst, uint32(min(max(m.Timeout, 0), MaxLongPollTimeout)/time.Millisecond))
}

func (m *ReadLACRequest) decodeBody(d *decoder) {
	m.LedgerID = d.i64("ledger id")
	flags := d.u8("flags")
	if d.err == nil && flags&^flagLongPoll != 0 {
		d.fail("unknown flags %#x", flags)
	}
	m.LongPoll = flags&flagLongPoll != 0
	m.Previous = d.i64("previous lac")
	ms := d.u32("timeout")
	if d.err == nil && time.Duration(ms)*time.Millisecond > MaxLongPollTimeout {
		d.fail("long-poll timeout %dms exceeds %s", ms, MaxLongPollTimeout)
	}
	m.Timeout = time.Duration(ms) * time.Millisecond
}

// FenceRequest fences a ledger: after the bookie answers OK, it refuses every
// non-recovery add to it, forever. It needs the ledger's master key, as an
// add does, and binds it to a ledger the bookie has not seen yet.
type FenceRequest struct {
	LedgerID  int64
	MasterKey []byte
}

func (*FenceRequest) Type() MsgType { return TypeFence }

func (m *FenceRequest) appendBody(dst []byte) []byte {
	return appendBytes16(appendI64(dst, m.LedgerID), m.MasterKey)
}

func (m *FenceRequest) decodeBody(d *decoder) {
	m.LedgerID = d.i64("ledger id")
	// A fence from a client older than master keys on fences ends here;
	// the bookie treats it as one without a key.
	if len(d.buf) > 0 {
		m.MasterKey = d.bytes16("master key", MaxMasterKeySize)
	}
}

// WriteLACRequest carries an explicit LAC from an idle writer, so that
// tailing readers (LAC long-polls) see entries the writer has confirmed
// without a later add to piggyback on.
type WriteLACRequest struct {
	LedgerID         int64
	LastAddConfirmed int64
	MasterKey        []byte
}

func (*WriteLACRequest) Type() MsgType { return TypeWriteLAC }

func (m *WriteLACRequest) appendBody(dst []byte) []byte {
	dst = appendI64(dst, m.LedgerID)
	dst = appendI64(dst, m.LastAddConfirmed)
	return appendBytes16(dst, m.MasterKey)
}

func (m *WriteLACRequest) decodeBody(d *decoder) {
	m.LedgerID = d.i64("ledger id")
	m.LastAddConfirmed = d.i64("lac")
	m.MasterKey = d.bytes16("master key", MaxMasterKeySize)
}

// Result is the head of every response: a status and, when it is not OK, a
// short human-readable explanation.
type Result struct {
	Status  Status
	Message string
}

// Err is the response's error: nil for StatusOK, otherwise a *StatusError
// that unwraps to the status's sentinel.
func (r Result) Err() error { return responseErr(r.Status, r.Message) }

func (r Result) append(dst []byte) []byte {
	msg := r.Message
	if len(msg) > MaxMessageSize {
		msg = msg[:MaxMessageSize]
	}
	dst = append(dst, byte(r.Status))
	return appendBytes16(dst, []byte(msg))
}

func (r *Result) decode(d *decoder) {
	r.Status = Status(d.u8("status"))
	r.Message = string(d.bytes16("message", MaxMessageSize))
}

// AddResponse answers an AddRequest. OK means the entry is on the bookie's
// fsynced journal.
type AddResponse struct {
	Result
	LedgerID int64
	EntryID  int64
}

func (*AddResponse) Type() MsgType { return TypeAddEntry | ResponseBit }

func (m *AddResponse) appendBody(dst []byte) []byte {
	dst = m.Result.append(dst)
	dst = appendI64(dst, m.LedgerID)
	return appendI64(dst, m.EntryID)
}

func (m *AddResponse) decodeBody(d *decoder) {
	m.Result.decode(d)
	m.LedgerID = d.i64("ledger id")
	m.EntryID = d.i64("entry id")
}

// ReadResponse answers a ReadRequest. LastAddConfirmed is the bookie's LAC
// for the ledger, sent with every status so that a reader or recovery learns
// it even from a NoSuchEntry. Checksum and Payload are set only when OK.
type ReadResponse struct {
	Result
	LedgerID         int64
	EntryID          int64
	LastAddConfirmed int64
	Checksum         uint32
	Payload          []byte
}

func (*ReadResponse) Type() MsgType { return TypeReadEntry | ResponseBit }

func (m *ReadResponse) appendBody(dst []byte) []byte {
	dst = m.Result.append(dst)
	dst = appendI64(dst, m.LedgerID)
	dst = appendI64(dst, m.EntryID)
	dst = appendI64(dst, m.LastAddConfirmed)
	dst = binary.BigEndian.AppendUint32(dst, m.Checksum)
	return appendBytes32(dst, m.Payload)
}

func (m *ReadResponse) decodeBody(d *decoder) {
	m.Result.decode(d)
	m.LedgerID = d.i64("ledger id")
	m.EntryID = d.i64("entry id")
	m.LastAddConfirmed = d.i64("lac")
	m.Checksum = d.u32("checksum")
	m.Payload = d.bytes32("payload", MaxPayloadSize)
}

// ReadLACResponse answers a ReadLACRequest.
type ReadLACResponse struct {
	Result
	LedgerID         int64
	LastAddConfirmed int64
}

func (*ReadLACResponse) Type() MsgType { return TypeReadLAC | ResponseBit }

func (m *ReadLACResponse) appendBody(dst []byte) []byte {
	dst = m.Result.append(dst)
	dst = appendI64(dst, m.LedgerID)
	return appendI64(dst, m.LastAddConfirmed)
}

func (m *ReadLACResponse) decodeBody(d *decoder) {
	m.Result.decode(d)
	m.LedgerID = d.i64("ledger id")
	m.LastAddConfirmed = d.i64("lac")
}

// FenceResponse answers a FenceRequest, once the fence is persisted, with the
// bookie's LAC for the ledger (NoEntry if it holds none).
type FenceResponse struct {
	Result
	LedgerID         int64
	LastAddConfirmed int64
}

func (*FenceResponse) Type() MsgType { return TypeFence | ResponseBit }

func (m *FenceResponse) appendBody(dst []byte) []byte {
	dst = m.Result.append(dst)
	dst = appendI64(dst, m.LedgerID)
	return appendI64(dst, m.LastAddConfirmed)
}

func (m *FenceResponse) decodeBody(d *decoder) {
	m.Result.decode(d)
	m.LedgerID = d.i64("ledger id")
	m.LastAddConfirmed = d.i64("lac")
}

// WriteLACResponse answers a WriteLACRequest once the LAC is persisted.
type WriteLACResponse struct {
	Result
	LedgerID int64
}

func (*WriteLACResponse) Type() MsgType { return TypeWriteLAC | ResponseBit }

func (m *WriteLACResponse) appendBody(dst []byte) []byte {
	dst = m.Result.append(dst)
	return appendI64(dst, m.LedgerID)
}

func (m *WriteLACResponse) decodeBody(d *decoder) {
	m.Result.decode(d)
	m.LedgerID = d.i64("ledger id")
}

// AuthRequest authenticates the connection, as BookKeeper's AuthMessage
// does. A bookie that requires authentication (cluster/bookie's
// Config.AuthToken) expects it as the first frame of every connection, and
// answers any other first request with Unauthorized and closes the
// connection; a bookie that requires none answers it OK. Method names the
// scheme of Credentials; the one scheme is AuthMethodToken.
type AuthRequest struct {
	Method      string
	Credentials []byte
}

// AuthMethodToken: Credentials is a token shared by the bookies and their
// clients in a region (brokers, replicators, auto-recovery workers).
const AuthMethodToken = "token"

func (*AuthRequest) Type() MsgType { return TypeAuth }

func (m *AuthRequest) appendBody(dst []byte) []byte {
	dst = appendBytes16(dst, []byte(m.Method))
	return appendBytes16(dst, m.Credentials)
}

func (m *AuthRequest) decodeBody(d *decoder) {
	m.Method = string(d.bytes16("auth method", MaxAuthMethodSize))
	m.Credentials = d.bytes16("credentials", MaxCredentialsSize)
}

// AuthResponse answers an AuthRequest: OK, or Unauthorized, after which the
// bookie closes the connection.
type AuthResponse struct {
	Result
}

func (*AuthResponse) Type() MsgType { return TypeAuth | ResponseBit }

func (m *AuthResponse) appendBody(dst []byte) []byte { return m.Result.append(dst) }

func (m *AuthResponse) decodeBody(d *decoder) { m.Result.decode(d) }
