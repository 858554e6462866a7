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
	count, compression, err := scanBatchFields(metadata)
	if err != nil {
		return 0, err
	}
	count = max(count, 1)
	if count <= int64(max(len(payload)/minBatchMessageSize, 1)) {
		return int(count), nil
	}
	if compression == int64(pb.CompressionType_NONE) {
		return 0, fmt.Errorf("%w: %d messages declared in a payload of %d bytes", ErrMalformedBatch, count, len(payload))
	}
	md := &pb.MessageMetadata{}
	if err := proto.Unmarshal(metadata, md); err != nil {
		return 0, fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, err)
	}
	uncompressed, err := Uncompress(md, payload)
	if err != nil {
		return 0, fmt.Errorf("%w: %d messages declared in a payload that does not uncompress: %v", ErrMalformedBatch, count, err)
	}
	br := NewBatchReader(uncompressed, int(count))
	for br.Next() {
	}
	return int(count), br.Err()
}

// scanBatchFields reads num_messages_in_batch (1 when absent) and
// compression from an encoded MessageMetadata.
func scanBatchFields(metadata []byte) (count, compression int64, err error) {
	const compressionField, countField = 8, 11 // MessageMetadata's field numbers
	malformed := func(n int) error {
		return fmt.Errorf("%w: message metadata: %v", ErrMalformedFrame, protowire.ParseError(n))
	}
	count = 1
	for b := metadata; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, malformed(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == compressionField || num == countField) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, malformed(n)
			}
			b = b[n:]
			if num == countField {
				count = int64(int32(v))
			} else {
				compression = int64(v)
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, 0, malformed(n)
		}
		b = b[n:]
	}
	return count, compression, nil
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
	if len(br.rest) < 4 {
		br.err = fmt.Errorf("%w: metadata size truncated", ErrMalformedBatch)
		return false
	}
	size := binary.BigEndian.Uint32(br.rest)
	if uint64(size) > uint64(len(br.rest)-4) {
		br.err = fmt.Errorf("%w: metadata of %d bytes, only %d left", ErrMalformedBatch, size, len(br.rest)-4)
		return false
	}
	smm := &pb.SingleMessageMetadata{}
	if err := proto.Unmarshal(br.rest[4:4+size], smm); err != nil {
		br.err = fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, err)
		return false
	}
	rest := br.rest[4+size:]
	payloadSize := smm.GetPayloadSize()
	if payloadSize < 0 || int64(payloadSize) > int64(len(rest)) {
		br.err = fmt.Errorf("%w: payload of %d bytes, only %d left", ErrMalformedBatch, payloadSize, len(rest))
		return false
	}
	br.msg = BatchMessage{Metadata: smm, Payload: rest[:payloadSize:payloadSize]}
	br.rest = rest[payloadSize:]
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
