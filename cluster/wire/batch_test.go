package wire_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

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
