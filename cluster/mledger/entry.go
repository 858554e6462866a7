package mledger

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// Entry is one stored entry as read back: its position and its bytes,
//
//	[u16 0x0e02][u32 size][BrokerEntryMetadata][u16 0x0e01]...message
//
// Data may be shared with the entry cache and other readers: never modify it.
type Entry struct {
	Position Position
	Data     []byte
}

// Split returns the entry's BrokerEntryMetadata bytes and its message bytes
// (from the 0x0e01 magic on), both aliasing Data.
func (e Entry) Split() (brokerEntryMetadata, message []byte, err error) {
	return SplitEntry(e.Data)
}

// Metadata decodes the entry's BrokerEntryMetadata.
func (e Entry) Metadata() (*pb.BrokerEntryMetadata, error) { return entryMetadata(e.Data) }

// entryHeaderSize is the magic and size that precede the BrokerEntryMetadata.
const entryHeaderSize = 6

// SplitEntry splits a stored entry into its BrokerEntryMetadata bytes and its
// message, without copying: both alias data. It checks only the framing of
// the BrokerEntryMetadata section; the message's own checksum is verified by
// wire.SplitMessage when the message is decoded.
func SplitEntry(data []byte) (brokerEntryMetadata, message []byte, err error) {
	if len(data) < entryHeaderSize {
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBadEntry, len(data), entryHeaderSize)
	}
	if m := binary.BigEndian.Uint16(data); m != wire.MagicBrokerEntryMetadata {
		return nil, nil, fmt.Errorf("%w: magic 0x%04x, want 0x%04x", ErrBadEntry, m, wire.MagicBrokerEntryMetadata)
	}
	size := binary.BigEndian.Uint32(data[2:])
	if uint64(size) > uint64(len(data)-entryHeaderSize) {
		return nil, nil, fmt.Errorf("%w: metadata size %d runs past the %d-byte entry", ErrBadEntry, size, len(data))
	}
	end := entryHeaderSize + int(size)
	return data[entryHeaderSize:end:end], data[end:], nil
}

// EntryIndex returns the BrokerEntryMetadata index of a stored entry: the
// topic-wide offset of its last message.
func EntryIndex(data []byte) (int64, error) {
	md, err := entryMetadata(data)
	if err != nil {
		return 0, err
	}
	if !md.HasIndex() {
		return 0, fmt.Errorf("%w: BrokerEntryMetadata has no index", ErrBadEntry)
	}
	return int64(md.GetIndex()), nil
}

// EntryTimestamp returns a stored entry's broker_timestamp (Unix ms).
func EntryTimestamp(data []byte) (int64, error) {
	md, err := entryMetadata(data)
	if err != nil {
		return 0, err
	}
	return int64(md.GetBrokerTimestamp()), nil
}

// entryMetadata decodes a stored entry's BrokerEntryMetadata.
func entryMetadata(data []byte) (*pb.BrokerEntryMetadata, error) {
	b, _, err := SplitEntry(data)
	if err != nil {
		return nil, err
	}
	md := &pb.BrokerEntryMetadata{}
	if err := proto.Unmarshal(b, md); err != nil {
		return nil, fmt.Errorf("%w: BrokerEntryMetadata: %v", ErrBadEntry, err)
	}
	return md, nil
}

// encodeEntry builds the stored form of msg: a BrokerEntryMetadata with the
// broker timestamp (Unix ms) and index in front of the message bytes, which
// are copied as given. The two-field message is encoded by hand with
// protowire (field 1 broker_timestamp, field 2 index, both varints): it is
// on the append path, and building and marshalling a message costs two
// allocations per entry. TestEncodeEntryMatchesProto pins it to proto.Marshal.
func encodeEntry(ts int64, index int64, msg []byte) []byte {
	size := protowire.SizeTag(1) + protowire.SizeVarint(uint64(ts)) +
		protowire.SizeTag(2) + protowire.SizeVarint(uint64(index))
	out := make([]byte, entryHeaderSize, entryHeaderSize+size+len(msg))
	binary.BigEndian.PutUint16(out, wire.MagicBrokerEntryMetadata)
	binary.BigEndian.PutUint32(out[2:], uint32(size))
	out = protowire.AppendTag(out, 1, protowire.VarintType)
	out = protowire.AppendVarint(out, uint64(ts))
	out = protowire.AppendTag(out, 2, protowire.VarintType)
	out = protowire.AppendVarint(out, uint64(index))
	return append(out, msg...)
}
