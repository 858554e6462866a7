package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/telemetry"
)

func metadataWith(t testing.TB, props ...string) (*pb.MessageMetadata, []byte) {
	t.Helper()
	md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(2),
		ReplicatedFrom: proto.String("us-east"), NumMessagesInBatch: proto.Int32(3)}.Build()
	for i := 0; i+1 < len(props); i += 2 {
		md.SetProperties(append(md.GetProperties(), pb.KeyValue_builder{Key: proto.String(props[i]), Value: proto.String(props[i+1])}.Build()))
	}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return md, b
}

// TraceParentInMetadata reads from the bytes what TraceParentOf reads from
// the decoded metadata, the replicate span's context first, without
// allocating.
func TestTraceParentInMetadata(t *testing.T) {
	const own, repl = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	for _, props := range [][]string{
		nil,
		{"app", "x"},
		{telemetry.PropTraceParent, own},
		{"a", "b", telemetry.PropTraceParent, own, "c", "d"},
		{telemetry.PropTraceParent, own, PropReplicationTraceParent, repl},
		{PropReplicationTraceParent, repl, telemetry.PropTraceParent, own},
		{"traceparentx", own},
	} {
		md, b := metadataWith(t, props...)
		if got, want := string(TraceParentInMetadata(b)), TraceParentOf(md); got != want {
			t.Errorf("properties %q: %q from the bytes, %q decoded", props, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { TraceParentInMetadata(b) }); n != 0 {
			t.Errorf("properties %q: %v allocations", props, n)
		}
	}
	_, b := metadataWith(t, telemetry.PropTraceParent, own)
	for i := range len(b) {
		TraceParentInMetadata(b[:i]) // truncated input: no panic
	}
}

// FuzzTraceParentInMetadata: on bytes that decode, the scan agrees with
// the decoded metadata; on any bytes it returns without panicking.
func FuzzTraceParentInMetadata(f *testing.F) {
	_, b := metadataWith(f, telemetry.PropTraceParent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add(b)
	f.Add([]byte{0x22, 0x02, 0x0a})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := TraceParentInMetadata(b)
		md := &pb.MessageMetadata{}
		if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, md); err != nil {
			return
		}
		if want := TraceParentOf(md); got != nil && string(got) != want {
			t.Fatalf("%x: %q from the bytes, %q decoded", b, got, want)
		}
	})
}
