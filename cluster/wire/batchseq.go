package wire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// The sequence ids of a batch's messages. A SEND and its MessageMetadata
// carry the batch's first sequence id; the Java client adds the last as
// highest_sequence_id, pulsar-client-go does not (and puts a resend and new
// messages in one batch: pulsar-client-go#1395). Each message's
// SingleMessageMetadata holds its own id (both clients set it), so the
// broker reads the batch's range from there for deduplication.

// batchFields are the MessageMetadata fields a batch's sequence ids depend
// on, scanned without decoding the metadata.
type batchFields struct {
	seq         uint64
	count       int64
	compression int64
	encrypted   bool
}

func scanSequenceFields(metadata []byte) (batchFields, error) {
	const seqField, compressionField, countField, encryptionKeysField = 2, 8, 11, 13 // MessageMetadata's
	f := batchFields{count: 1}
	for b := metadata; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return f, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == seqField || num == compressionField || num == countField) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return f, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, protowire.ParseError(n))
			}
			b = b[n:]
			switch num {
			case seqField:
				f.seq = v
			case compressionField:
				f.compression = int64(v)
			default:
				f.count = int64(int32(v))
			}
			continue
		}
		if num == encryptionKeysField {
			f.encrypted = true
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return f, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return f, nil
}

// batchPayload returns a batch's uncompressed payload and its fields, or
// false when its messages cannot be read: not a batch of more than one
// message, encrypted (its messages are sealed), or not decodable.
func batchPayload(metadata, payload []byte) (batchFields, []byte, bool) {
	f, err := scanSequenceFields(metadata)
	if err != nil || f.count <= 1 || f.encrypted {
		return f, nil, false
	}
	if f.compression != int64(pb.CompressionType_NONE) {
		md := &pb.MessageMetadata{}
		if err := proto.Unmarshal(metadata, md); err != nil {
			return f, nil, false
		}
		if payload, err = Uncompress(md, payload); err != nil {
			return f, nil, false
		}
	}
	return f, payload, true
}

// walkBatch calls fn with each message of an uncompressed batch of count
// messages: its bytes as they stand in the batch (size, metadata and
// payload) and its sequence id, the batch's first id plus its index when
// its SingleMessageMetadata has none (as a client numbers a batch's
// messages). It reads only two fields of each SingleMessageMetadata.
func walkBatch(payload []byte, first uint64, count int64, fn func(raw []byte, seq int64)) error {
	const payloadSizeField, seqField = 3, 8 // SingleMessageMetadata's
	rest := payload
	for i := range count {
		if len(rest) < 4 {
			return fmt.Errorf("%w: payload ends with %d declared messages missing", ErrMalformedBatch, count-i)
		}
		size := binary.BigEndian.Uint32(rest)
		if uint64(size) > uint64(len(rest)-4) {
			return fmt.Errorf("%w: metadata of %d bytes, only %d left", ErrMalformedBatch, size, len(rest)-4)
		}
		seq, payloadSize := first+uint64(i), int64(-1)
		for b := rest[4 : 4+size]; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, protowire.ParseError(n))
			}
			b = b[n:]
			if typ == protowire.VarintType && (num == payloadSizeField || num == seqField) {
				v, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, protowire.ParseError(n))
				}
				b = b[n:]
				if num == seqField {
					seq = v
				} else {
					payloadSize = int64(int32(v))
				}
				continue
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, protowire.ParseError(n))
			}
			b = b[n:]
		}
		end := 4 + int64(size) + payloadSize
		if payloadSize < 0 || end > int64(len(rest)) {
			return fmt.Errorf("%w: payload of %d bytes, only %d left", ErrMalformedBatch, payloadSize, len(rest)-4-int(size))
		}
		fn(rest[:end:end], int64(seq))
		rest = rest[end:]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the declared messages", ErrMalformedBatch, len(rest))
	}
	return nil
}

// BatchHighestSequenceID returns the highest sequence id among the messages
// of a batch (its metadata and payload as sent), and false when it cannot
// read them: a message that is not a batch of more than one, an encrypted
// batch, or one that does not decode. A compressed batch is uncompressed.
func BatchHighestSequenceID(metadata, payload []byte) (int64, bool) {
	f, payload, ok := batchPayload(metadata, payload)
	if !ok {
		return 0, false
	}
	highest := int64(f.seq)
	if err := walkBatch(payload, f.seq, f.count, func(_ []byte, seq int64) { highest = max(highest, seq) }); err != nil {
		return 0, false
	}
	return highest, true
}

// DropBatchPrefix returns the message (from the magic on, checksummed) that
// a batch becomes without its messages whose sequence ids are at or below
// upTo, and how many messages it keeps; the rest keep their bytes and
// order. The batch's sequence_id becomes its first kept message's, its
// num_messages_in_batch the count kept, and its payload is stored
// uncompressed (compression NONE: the broker has no compressors, and a
// consumer reads either). It fails, keeping nothing, when the batch's
// messages cannot be read (BatchHighestSequenceID).
func DropBatchPrefix(metadata, payload []byte, upTo int64) (msg []byte, kept int, err error) {
	f, payload, ok := batchPayload(metadata, payload)
	if !ok {
		return nil, 0, fmt.Errorf("%w: the batch's messages cannot be read (encrypted, or not a batch)", ErrMalformedBatch)
	}
	out := make([]byte, 0, len(payload))
	var first int64
	err = walkBatch(payload, f.seq, f.count, func(raw []byte, seq int64) {
		if seq <= upTo {
			return
		}
		if kept == 0 {
			first = seq
		}
		out = append(out, raw...)
		kept++
	})
	if err != nil {
		return nil, 0, err
	}
	if kept == 0 {
		return nil, 0, nil
	}
	md := &pb.MessageMetadata{}
	if err := proto.Unmarshal(metadata, md); err != nil {
		return nil, 0, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, err)
	}
	md.SetSequenceId(uint64(first))
	md.SetNumMessagesInBatch(int32(kept))
	md.SetCompression(pb.CompressionType_NONE)
	md.SetUncompressedSize(uint32(len(out)))
	msg, err = AppendMessage(nil, md, out)
	return msg, kept, err
}
