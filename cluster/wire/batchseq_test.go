package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// seqBatch is a batch of the given ids (-1: a message without its own
// sequence_id), first at the batch's sequence_id, as a message: its
// metadata and payload.
func seqBatch(t testing.TB, first uint64, ids []int64, compress bool) (metadata, payload []byte) {
	t.Helper()
	var batch []byte
	for i, id := range ids {
		b := pb.SingleMessageMetadata_builder{PartitionKey: proto.String(fmt.Sprint("k", i))}
		if id >= 0 {
			b.SequenceId = proto.Uint64(uint64(id))
		}
		var err error
		if batch, err = wire.AppendBatchMessage(batch, b.Build(), fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(first), PublishTime: proto.Uint64(1),
		NumMessagesInBatch: proto.Int32(int32(len(ids))), UncompressedSize: proto.Uint32(uint32(len(batch)))}.Build()
	payload = batch
	if compress {
		out := make([]byte, lz4.CompressBlockBound(len(batch)))
		n, err := lz4.CompressBlock(batch, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %d, %v", n, err)
		}
		payload = out[:n]
		md.SetCompression(pb.CompressionType_LZ4)
	}
	metadata, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return metadata, payload
}

func TestBatchHighestSequenceID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    uint64
		ids      []int64
		compress bool
		want     int64
		ok       bool
	}{
		{"ids of its own", 10, []int64{10, 11, 15}, false, 15, true},
		{"compressed", 10, []int64{10, 11, 15}, true, 15, true},
		{"ids from the first by index", 10, []int64{-1, -1, -1, -1}, false, 13, true},
		{"one message: not a batch to open", 10, []int64{10}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, payload := seqBatch(t, tc.first, tc.ids, tc.compress)
			if got, ok := wire.BatchHighestSequenceID(md, payload); got != tc.want || ok != tc.ok {
				t.Fatalf("got %d, %v, want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	t.Run("encrypted", func(t *testing.T) {
		md, payload := seqBatch(t, 10, []int64{10, 11}, false)
		m := &pb.MessageMetadata{}
		if err := proto.Unmarshal(md, m); err != nil {
			t.Fatal(err)
		}
		m.SetEncryptionKeys([]*pb.EncryptionKeys{pb.EncryptionKeys_builder{Key: proto.String("k"), Value: []byte("v")}.Build()})
		md, _ = proto.Marshal(m)
		if got, ok := wire.BatchHighestSequenceID(md, payload); ok {
			t.Fatalf("an encrypted batch read as %d", got)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		md, payload := seqBatch(t, 10, []int64{10, 11}, false)
		if got, ok := wire.BatchHighestSequenceID(md, payload[:len(payload)-1]); ok {
			t.Fatalf("a truncated batch read as %d", got)
		}
		if got, ok := wire.BatchHighestSequenceID(md, append(payload, 0)); ok {
			t.Fatalf("a batch with a stray byte read as %d", got)
		}
	})
}

func TestDropBatchPrefix(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprint("compressed=", compress), func(t *testing.T) {
			md, payload := seqBatch(t, 10, []int64{10, 11, 12, 13, 14}, compress)
			msg, kept, err := wire.DropBatchPrefix(md, payload, 11)
			if err != nil || kept != 3 {
				t.Fatalf("kept %d, %v; want 3", kept, err)
			}
			metadata, p := msgParts(t, msg)
			m := &pb.MessageMetadata{}
			if err := proto.Unmarshal(metadata, m); err != nil {
				t.Fatal(err)
			}
			if m.GetSequenceId() != 12 || m.GetNumMessagesInBatch() != 3 || m.GetCompression() != pb.CompressionType_NONE ||
				m.GetUncompressedSize() != uint32(len(p)) || m.GetProducerName() != "p" {
				t.Fatalf("metadata %v", m)
			}
			br := wire.NewBatchReader(p, 3)
			for i := 2; br.Next(); i++ {
				got := br.Message()
				if got.Metadata.GetSequenceId() != uint64(10+i) || string(got.Payload) != fmt.Sprint("m", i) || got.Metadata.GetPartitionKey() != fmt.Sprint("k", i) {
					t.Fatalf("message %d: %v %q", i, got.Metadata, got.Payload)
				}
			}
			if err := br.Err(); err != nil {
				t.Fatal(err)
			}
			if h, ok := wire.BatchHighestSequenceID(msgParts(t, msg)); !ok || h != 14 {
				t.Fatalf("highest of what is kept: %d, %v", h, ok)
			}
		})
	}
	t.Run("nothing above", func(t *testing.T) {
		md, payload := seqBatch(t, 10, []int64{10, 11}, false)
		if msg, kept, err := wire.DropBatchPrefix(md, payload, 11); err != nil || kept != 0 || msg != nil {
			t.Fatalf("%d bytes, %d kept, %v", len(msg), kept, err)
		}
	})
	t.Run("nothing dropped", func(t *testing.T) {
		md, payload := seqBatch(t, 10, []int64{10, 11}, false)
		msg, kept, err := wire.DropBatchPrefix(md, payload, 9)
		if err != nil || kept != 2 {
			t.Fatalf("%d kept, %v", kept, err)
		}
		if _, p := msgParts(t, msg); !bytes.Equal(p, payload) {
			t.Fatal("the payload changed")
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		md, payload := seqBatch(t, 10, []int64{10, 11}, false)
		if _, _, err := wire.DropBatchPrefix(md, payload[:len(payload)-1], 10); !errors.Is(err, wire.ErrMalformedBatch) {
			t.Fatalf("a truncated batch: %v", err)
		}
	})
}

// msgParts splits and verifies a message.
func msgParts(t *testing.T, msg []byte) (metadata, payload []byte) {
	t.Helper()
	metadata, payload, err := wire.SplitMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	return metadata, payload
}

// FuzzDropBatchPrefix: a client's batch bytes, whatever they are, never
// panic the broker's reading of their sequence ids, and a batch cut below
// an id is a well-formed batch of the messages kept, each above that id.
func FuzzDropBatchPrefix(f *testing.F) {
	for _, compress := range []bool{false, true} {
		md, payload := seqBatch(f, 3, []int64{3, 4, -1, 9}, compress)
		f.Add(md, payload, int64(4))
	}
	f.Fuzz(func(t *testing.T, metadata, payload []byte, upTo int64) {
		highest, readable := wire.BatchHighestSequenceID(metadata, payload)
		msg, kept, err := wire.DropBatchPrefix(metadata, payload, upTo)
		if err != nil || kept == 0 {
			return
		}
		if !readable || highest <= upTo {
			t.Fatalf("kept %d messages above %d of a batch whose highest id is %d (readable %v)", kept, upTo, highest, readable)
		}
		md, payload := msgParts(t, msg)
		if n, err := wire.BatchCount(md, payload); err != nil || n != kept {
			t.Fatalf("the cut batch counts %d messages (%v), kept %d", n, err, kept)
		}
		if first, ok := wire.BatchHighestSequenceID(md, payload); kept > 1 && (!ok || first != highest) {
			t.Fatalf("the cut batch's highest id is %d (%v), the batch's was %d", first, ok, highest)
		}
	})
}
