package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// The sequence ids of a batch's messages. A SEND and its MessageMetadata
// carry the batch's first sequence id; the Java client adds the last as
// highest_sequence_id, pulsar-client-go does not (and puts a resend and new
// messages in one batch: pulsar-client-go#1395). Each message's
// SingleMessageMetadata holds its own id (both clients set it), so the
// broker reads the batch's range from there for deduplication.

// batchPayload returns a batch's uncompressed payload and its fields, or
// false when its messages cannot be read: not a batch of more than one
// message, encrypted (its messages are sealed), or not decodable.
func batchPayload(metadata, payload []byte) (batchFields, []byte, bool) {
	f, err := scanBatchFields(metadata)
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
	if err := walkBatch(payload, f.seq, f.count, func(m batchMessage) { highest = max(highest, m.seq) }); err != nil {
		return 0, false
	}
	return highest, true
}

// DropBatchPrefix returns the message (from the magic on, checksummed) that
// a batch becomes without its messages whose sequence ids are at or below
// upTo, and how many messages it keeps; the rest keep their bytes and
// order (one without a sequence_id of its own, numbered by its place in
// the batch, is given that number, since its place changes). The batch's sequence_id becomes its first kept message's, its
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
	var rewrite error // re-encoding a kept message's metadata failed
	err = walkBatch(payload, f.seq, f.count, func(m batchMessage) {
		if m.seq <= upTo || rewrite != nil {
			return
		}
		if kept == 0 {
			first = m.seq
		}
		kept++
		if m.ownSeq {
			out = append(out, m.raw...)
			return
		}
		// Its id came from its place in the batch, which changes: it
		// carries the id as its own from now on.
		smm := &pb.SingleMessageMetadata{}
		if rewrite = proto.Unmarshal(m.metadata, smm); rewrite == nil {
			smm.SetSequenceId(uint64(m.seq))
			out, rewrite = AppendBatchMessage(out, smm, m.payload)
		}
	})
	if err != nil {
		return nil, 0, err
	}
	if rewrite != nil {
		return nil, 0, fmt.Errorf("%w: single message metadata: %v", ErrMalformedBatch, rewrite)
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
