package wire

import (
	"encoding/binary"
	"fmt"

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
