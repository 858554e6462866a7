package wire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// A batch payload (MessageMetadata.num_messages_in_batch is set) is the
// uncompressed concatenation of its messages:
//
//	[u32 size][SingleMessageMetadata][payload of SingleMessageMetadata.payload_size bytes] ...
//
// The broker never needs to open one to store or dispatch it; the decoder is
// for flow control checks, the replicator and tests.

// minBatchMessageSize is the fewest bytes one message takes in a batch
// payload: its 4-byte size field and a SingleMessageMetadata holding at
// least its required payload_size (a tag and a one-byte varint).
const minBatchMessageSize = 6

// BatchMessages is how many messages a stored message counts for in flow
// control: 1 unless md declares a batch, and never more than the payload
// can hold (its bytes, or its declared uncompressed size when compressed).
// The count is the client's claim, and a consumer earns back permits only
// for the messages it really receives: a batch that claimed 2^31-1
// messages in a few bytes would otherwise take every permit its consumers
// will ever send.
func BatchMessages(md *pb.MessageMetadata, payloadSize int) int {
	if !md.HasNumMessagesInBatch() {
		return 1
	}
	if md.GetCompression() != pb.CompressionType_NONE {
		payloadSize = int(md.GetUncompressedSize())
	}
	return min(max(int(md.GetNumMessagesInBatch()), 1), max(payloadSize/minBatchMessageSize, 1))
}

// BatchCount returns the number of messages a message arriving from a
// client counts for: the batch count its metadata declares (1 when it
// declares none), once verified to be one its payload holds, without
// decoding the metadata (a scan of two fields). A broker counts a SEND by
// it, not by the SEND's own num_messages, so that one verified count
// drives the entry index, the counters and flow control. An uncompressed batch holds at most
// one message per minBatchMessageSize bytes. A compressed one is opened
// and walked only when its count exceeds what its compressed bytes could
// hold uncompressed, which only very compressible batches of tiny messages
// do; its messages must then be exactly the count. Consumers earn back
// permits only for messages they really receive, so a false count would
// drain their permits for good (see BatchMessages).
func BatchCount(metadata, payload []byte) (int, error) {
	f, err := scanBatchFields(metadata)
	if err != nil {
		return 0, err
	}
	count := max(f.count, 1)
	if count <= int64(max(len(payload)/minBatchMessageSize, 1)) {
		return int(count), nil
	}
	if f.compression != int64(pb.CompressionType_NONE) {
		md := &pb.MessageMetadata{}
		if err := proto.Unmarshal(metadata, md); err != nil {
			return 0, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, err)
		}
		uncompressed, err := Uncompress(md, payload)
		if err != nil {
			return 0, fmt.Errorf("%w: %d messages declared in a payload that does not uncompress: %v", ErrMalformedBatch, count, err)
		}
		return int(count), walkBatch(uncompressed, f.seq, count, func(batchMessage) {})
	}
	return 0, fmt.Errorf("%w: %d messages declared in a payload of %d bytes", ErrMalformedBatch, count, len(payload))
}

// batchFields are the MessageMetadata fields that say what a batch holds,
// scanned without decoding the metadata.
type batchFields struct {
	seq         uint64 // sequence_id: the batch's first message's
	count       int64  // num_messages_in_batch, 1 when absent
	compression int64
	encrypted   bool // encryption_keys present: the messages are sealed
}

// scanBatchFields reads the batchFields of an encoded MessageMetadata.
func scanBatchFields(metadata []byte) (batchFields, error) {
	const seqField, compressionField, countField, encryptionKeysField = 2, 8, 11, 13 // MessageMetadata's field numbers
	malformed := func(n int) error {
		return fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, protowire.ParseError(n))
	}
	f := batchFields{count: 1}
	for b := metadata; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return f, malformed(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == seqField || num == compressionField || num == countField) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return f, malformed(n)
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
			return f, malformed(n)
		}
		b = b[n:]
	}
	return f, nil
}

// batchMessage is one message of an uncompressed batch as it stands there.
type batchMessage struct {
	raw      []byte // size field, metadata and payload
	metadata []byte // its SingleMessageMetadata, encoded
	payload  []byte
	seq      int64 // its sequence_id, or the batch's first id plus its index
	ownSeq   bool  // seq is its own sequence_id
}

// walkBatch calls fn with each of the count messages of an uncompressed
// batch payload whose first sequence id is first. It reads two fields of
// each SingleMessageMetadata (payload_size and sequence_id) without
// decoding it. The batch is malformed unless it holds exactly count
// messages and nothing after them.
func walkBatch(payload []byte, first uint64, count int64, fn func(batchMessage)) error {
	if count <= 0 {
		return fmt.Errorf("%w: declared message count %d", ErrMalformedBatch, count)
	}
	rest := payload
	for i := range count {
		if len(rest) == 0 {
			return fmt.Errorf("%w: payload ends with %d declared messages missing", ErrMalformedBatch, count-i)
		}
		m, err := nextBatchMessage(rest, first+uint64(i))
		if err != nil {
			return err
		}
		fn(m)
		rest = rest[len(m.raw):]
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the declared messages", ErrMalformedBatch, len(rest))
	}
	return nil
}

// nextBatchMessage splits the message at the start of rest, whose sequence
// id is seq unless its metadata says otherwise.
func nextBatchMessage(rest []byte, seq uint64) (batchMessage, error) {
	const payloadSizeField, seqField = 3, 8 // SingleMessageMetadata's field numbers
	malformed := func(n int) error {
		return fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, protowire.ParseError(n))
	}
	if len(rest) < 4 {
		return batchMessage{}, fmt.Errorf("%w: metadata size truncated", ErrMalformedBatch)
	}
	size := binary.BigEndian.Uint32(rest)
	if uint64(size) > uint64(len(rest)-4) {
		return batchMessage{}, fmt.Errorf("%w: metadata of %d bytes, only %d left", ErrMalformedBatch, size, len(rest)-4)
	}
	metadata := rest[4 : 4+size : 4+size]
	payloadSize := int64(-1) // required: absent is malformed
	ownSeq := false
	for b := metadata; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return batchMessage{}, malformed(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == payloadSizeField || num == seqField) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return batchMessage{}, malformed(n)
			}
			b = b[n:]
			if num == seqField {
				seq, ownSeq = v, true
			} else {
				payloadSize = int64(int32(v))
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return batchMessage{}, malformed(n)
		}
		b = b[n:]
	}
	after := rest[4+size:]
	if payloadSize < 0 || payloadSize > int64(len(after)) {
		return batchMessage{}, fmt.Errorf("%w: payload of %d bytes, only %d left", ErrMalformedBatch, payloadSize, len(after))
	}
	end := 4 + int64(size) + payloadSize
	return batchMessage{raw: rest[:end:end], metadata: metadata, payload: after[:payloadSize:payloadSize], seq: int64(seq), ownSeq: ownSeq}, nil
}

// BatchMessage is one message of a batch. Payload aliases the batch bytes.
type BatchMessage struct {
	Metadata *pb.SingleMessageMetadata
	Payload  []byte
}

// BatchReader iterates over the messages of an uncompressed batch payload.
//
//	br := wire.NewBatchReader(payload, int(md.GetNumMessagesInBatch()))
//	for br.Next() { use(br.Message()) }
//	if err := br.Err(); err != nil { ... }
type BatchReader struct {
	rest      []byte
	remaining int
	msg       BatchMessage
	err       error
}

// NewBatchReader reads count messages from payload. The batch is malformed
// unless it holds exactly that many messages and nothing after them.
func NewBatchReader(payload []byte, count int) *BatchReader {
	br := &BatchReader{rest: payload, remaining: count}
	if count <= 0 {
		br.err = fmt.Errorf("%w: declared message count %d", ErrMalformedBatch, count)
	}
	return br
}

// Next decodes the next message, returning false at the end or on an error.
func (br *BatchReader) Next() bool {
	if br.err != nil {
		return false
	}
	if br.remaining == 0 {
		if len(br.rest) != 0 {
			br.err = fmt.Errorf("%w: %d bytes after the declared messages", ErrMalformedBatch, len(br.rest))
		}
		return false
	}
	if len(br.rest) == 0 {
		br.err = fmt.Errorf("%w: payload ends with %d declared messages missing", ErrMalformedBatch, br.remaining)
		return false
	}
	m, err := nextBatchMessage(br.rest, 0)
	if err != nil {
		br.err = err
		return false
	}
	smm := &pb.SingleMessageMetadata{}
	if err := proto.Unmarshal(m.metadata, smm); err != nil {
		br.err = fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, err)
		return false
	}
	br.msg = BatchMessage{Metadata: smm, Payload: m.payload}
	br.rest = br.rest[len(m.raw):]
	br.remaining--
	return true
}

// Message returns the message decoded by the last successful Next.
func (br *BatchReader) Message() BatchMessage { return br.msg }

// Err returns the error that stopped iteration, or nil after a complete batch.
func (br *BatchReader) Err() error { return br.err }

// AppendBatchMessage appends one message to a batch payload, setting
// smm's payload_size to len(payload).
func AppendBatchMessage(dst []byte, smm *pb.SingleMessageMetadata, payload []byte) ([]byte, error) {
	smm.SetPayloadSize(int32(len(payload)))
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, smm); err != nil {
		return dst[:start], fmt.Errorf("wire: marshal single message metadata: %w", err)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return append(dst, payload...), nil
}
