package wire_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/pierrec/lz4/v4"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

func buildBatch(t testing.TB, n int) []byte {
	t.Helper()
	var batch []byte
	for i := range n {
		smm := pb.SingleMessageMetadata_builder{
			SequenceId:   proto.Uint64(uint64(i)),
			PartitionKey: proto.String(fmt.Sprintf("k%d", i)),
		}.Build()
		var err error
		if batch, err = wire.AppendBatchMessage(batch, smm, fmt.Appendf(nil, "message-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return batch
}

func TestBatchRoundTrip(t *testing.T) {
	br := wire.NewBatchReader(buildBatch(t, 5), 5)
	i := 0
	for br.Next() {
		m := br.Message()
		if string(m.Payload) != fmt.Sprintf("message-%d", i) || m.Metadata.GetSequenceId() != uint64(i) ||
			m.Metadata.GetPartitionKey() != fmt.Sprintf("k%d", i) {
			t.Fatalf("message %d: %v %q", i, m.Metadata, m.Payload)
		}
		i++
	}
	if err := br.Err(); err != nil || i != 5 {
		t.Fatalf("read %d messages, err %v", i, err)
	}
}

func TestBadBatches(t *testing.T) {
	batch := buildBatch(t, 3)
	smm, err := proto.Marshal(pb.SingleMessageMetadata_builder{PayloadSize: proto.Int32(1 << 30)}.Build())
	if err != nil {
		t.Fatal(err)
	}
	hugePayload := append(binary.BigEndian.AppendUint32(nil, uint32(len(smm))), smm...)
	for _, tc := range []struct {
		name    string
		payload []byte
		count   int
	}{
		{"count larger than the batch", batch, 4},
		{"count smaller than the batch", batch, 2},
		{"count zero", batch, 0},
		{"count negative", batch, -1},
		{"truncated", batch[:len(batch)-2], 3},
		{"metadata size near 2^32", []byte{0xff, 0xff, 0xff, 0xf0, 1, 2}, 1},
		{"payload size past the end", hugePayload, 1},
		{"metadata that does not decode", []byte{0, 0, 0, 2, 0xff, 0xff}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := wire.NewBatchReader(tc.payload, tc.count)
			for br.Next() {
			}
			if !errors.Is(br.Err(), wire.ErrMalformedBatch) {
				t.Fatalf("got %v, want ErrMalformedBatch", br.Err())
			}
		})
	}
}

func FuzzBatch(f *testing.F) {
	f.Add(buildBatch(f, 3), 3)
	f.Add(buildBatch(f, 1), 2)
	f.Fuzz(func(t *testing.T, payload []byte, count int) {
		br := wire.NewBatchReader(payload, count)
		n := 0
		for br.Next() {
			n++
			if m := br.Message(); int(m.Metadata.GetPayloadSize()) != len(m.Payload) {
				t.Fatalf("payload of %d bytes, metadata says %d", len(m.Payload), m.Metadata.GetPayloadSize())
			}
		}
		if err := br.Err(); err != nil {
			if !errors.Is(err, wire.ErrMalformedBatch) {
				t.Fatalf("unclassified error %v", err)
			}
		} else if n != count {
			t.Fatalf("clean end after %d messages of %d", n, count)
		}
	})
}

// TestBatchCount: a declared batch count must be one the payload can
// hold; a compressed batch that claims more than its compressed bytes
// could hold is opened and counted.
func TestBatchCount(t *testing.T) {
	batch := func(n int) []byte {
		var b []byte
		for range n {
			var err error
			if b, err = wire.AppendBatchMessage(b, &pb.SingleMessageMetadata{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	lz4Block := func(b []byte) []byte {
		out := make([]byte, lz4.CompressBlockBound(len(b)))
		n, err := lz4.CompressBlock(b, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %d, %v", n, err)
		}
		return out[:n]
	}
	metadata := func(count int32, compression pb.CompressionType, uncompressed int) []byte {
		b, err := proto.Marshal(pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1),
			PublishTime: proto.Uint64(1), NumMessagesInBatch: proto.Int32(count),
			Compression: compression.Enum(), UncompressedSize: proto.Uint32(uint32(uncompressed))}.Build())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	none, lz := pb.CompressionType_NONE, pb.CompressionType_LZ4
	real := batch(1000) // 6 bytes a message: the smallest a batch can be
	for _, tc := range []struct {
		name     string
		metadata []byte
		payload  []byte
		ok       bool
	}{
		{"no batch", []byte{}, []byte("x"), true},
		{"a real batch", metadata(1000, none, 0), real, true},
		{"one more than its bytes hold", metadata(1001, none, 0), real, false},
		{"a million in eight bytes", metadata(1_000_000, none, 0), []byte("8 bytes!"), false},
		{"a real batch compressed far below six bytes a message", metadata(1000, lz, len(real)), lz4Block(real), true},
		{"a compressed batch that claims more than it holds", metadata(1001, lz, len(real)), lz4Block(real), false},
		{"a compressed batch that does not uncompress", metadata(1_000_000, lz, 6_000_000), []byte("8 bytes!"), false},
		{"metadata cut inside the count", []byte{0x58}, real, false},
	} {
		_, err := wire.BatchCount(tc.metadata, tc.payload)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		name              string
		metadata, payload []byte
		want              int
	}{
		{"no batch", []byte{}, []byte("x"), 1},
		{"a real batch", metadata(1000, none, 0), real, 1000},
		{"a real compressed batch", metadata(1000, lz, len(real)), lz4Block(real), 1000},
	} {
		if n, err := wire.BatchCount(tc.metadata, tc.payload); n != tc.want || err != nil {
			t.Errorf("%s: BatchCount = %d, %v; want %d", tc.name, n, err, tc.want)
		}
	}
}

// TestBatchMessages: flow control counts what a stored batch can hold,
// whatever it claims, and checking a count costs no allocation on the
// publish path.
func TestBatchMessages(t *testing.T) {
	md := func(count int32) *pb.MessageMetadata {
		return pb.MessageMetadata_builder{NumMessagesInBatch: proto.Int32(count)}.Build()
	}
	for _, tc := range []struct {
		md      *pb.MessageMetadata
		payload int
		want    int
	}{
		{&pb.MessageMetadata{}, 100, 1},
		{md(1000), 6000, 1000},
		{md(1_000_000), 8, 1},
		{md(-5), 100, 1},
	} {
		if got := wire.BatchMessages(tc.md, tc.payload); got != tc.want {
			t.Errorf("BatchMessages(%v, %d) = %d, want %d", tc.md, tc.payload, got, tc.want)
		}
	}
	metadata, err := proto.MarshalOptions{AllowPartial: true}.Marshal(md(10))
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1000)
	if n := testing.AllocsPerRun(100, func() { wire.BatchCount(metadata, payload) }); n != 0 {
		t.Errorf("BatchCount allocated %v times for a plausible count", n)
	}
}
