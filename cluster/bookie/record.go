package bookie

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// A journal record is framed as [u32 bodyLen][u32 crc32c(body)][body], and
// the body is [u8 kind] followed by the kind's fields, big-endian. The CRC
// lets replay tell a torn tail (a write cut by a crash, never acknowledged)
// from a complete record.
type recordKind uint8

const (
	recAdd   recordKind = 1 // an entry
	recFence recordKind = 2 // a ledger fence
	recLAC   recordKind = 3 // an explicit LastAddConfirmed
	// recProbe is written by a read-only bookie to test whether the disk
	// has room again; it changes nothing.
	recProbe recordKind = 4
)

const (
	recordHeaderSize = 8
	// maxRecordBody bounds a record body on replay, so that a corrupt length
	// cannot make replay allocate gigabytes.
	maxRecordBody = bkproto.MaxPayloadSize + bkproto.MaxMasterKeySize + 64
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type record struct {
	kind     recordKind
	ledgerID int64
	entryID  int64 // recAdd
	lac      int64 // recAdd (piggybacked), recLAC
	recovery bool  // recAdd
	// relocated marks a recAdd that the compactor copied from an older
	// journal file: it only moves the entry's index to this record, and has
	// no effect at all if the ledger is gone (see store.apply).
	relocated bool
	checksum  uint32
	masterKey []byte // recAdd, recLAC, recFence
	payload   []byte // recAdd
	// loc is where the record lies in the journal. It is not encoded: the
	// journal sets it when it lays the record out, replay when it reads it.
	loc entryLoc
}

// entryLoc is a record's place in the journal: file number, offset of its
// header, and its whole framed size. An entry's index value is its loc.
type entryLoc struct {
	file uint64
	off  int64
	size uint32
}

const (
	flagRecovery  = 1 << 0
	flagRelocated = 1 << 1
)

func (r *record) size() int {
	return recordHeaderSize + 1 + 8 + 8 + 8 + 1 + 4 + 2 + len(r.masterKey) + len(r.payload)
}

func appendRecord(dst []byte, r *record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeaderSize)...)
	dst = append(dst, byte(r.kind))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.ledgerID))
	switch r.kind {
	case recAdd:
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.entryID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.lac))
		var flags byte
		if r.recovery {
			flags |= flagRecovery
		}
		if r.relocated {
			flags |= flagRelocated
		}
		dst = append(dst, flags)
		dst = binary.BigEndian.AppendUint32(dst, r.checksum)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.masterKey)))
		dst = append(dst, r.masterKey...)
		dst = append(dst, r.payload...)
	case recLAC:
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.lac))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.masterKey)))
		dst = append(dst, r.masterKey...)
	case recFence:
		// A fence without a key is written as before fences carried one
		// (nothing after the ledger id), which replay reads the same way.
		if len(r.masterKey) > 0 {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.masterKey)))
			dst = append(dst, r.masterKey...)
		}
	}
	body := dst[start+recordHeaderSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, crcTable))
	return dst
}

var errShortRecord = errors.New("short record body")

// decodeRecord decodes a body whose CRC has been checked. Slices alias body.
func decodeRecord(body []byte) (record, error) {
	var r record
	if len(body) < 9 {
		return r, errShortRecord
	}
	r.kind = recordKind(body[0])
	r.ledgerID = int64(binary.BigEndian.Uint64(body[1:]))
	b := body[9:]
	switch r.kind {
	case recProbe:
		if len(b) != 0 {
			return r, fmt.Errorf("record kind %d with %d extra bytes", r.kind, len(b))
		}
	case recFence:
		if len(b) == 0 {
			break // written without a key
		}
		if len(b) < 2 || int(binary.BigEndian.Uint16(b))+2 != len(b) {
			return r, errShortRecord
		}
		r.masterKey = b[2:]
	case recAdd:
		if len(b) < 8+8+1+4+2 {
			return r, errShortRecord
		}
		r.entryID = int64(binary.BigEndian.Uint64(b))
		r.lac = int64(binary.BigEndian.Uint64(b[8:]))
		r.recovery = b[16]&flagRecovery != 0
		r.relocated = b[16]&flagRelocated != 0
		r.checksum = binary.BigEndian.Uint32(b[17:])
		n := int(binary.BigEndian.Uint16(b[21:]))
		b = b[23:]
		if len(b) < n {
			return r, errShortRecord
		}
		r.masterKey, r.payload = b[:n:n], b[n:]
	case recLAC:
		if len(b) < 8+2 {
			return r, errShortRecord
		}
		r.lac = int64(binary.BigEndian.Uint64(b))
		n := int(binary.BigEndian.Uint16(b[8:]))
		if len(b[10:]) != n {
			return r, errShortRecord
		}
		r.masterKey = b[10:]
	default:
		return r, fmt.Errorf("unknown record kind %d", r.kind)
	}
	if len(r.masterKey) == 0 {
		r.masterKey = nil
	}
	return r, nil
}
