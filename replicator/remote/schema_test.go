package remote

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// TestPrepareMapsSchemaVersion: an entry's schema_version becomes the
// remote's version of the same schema; one the producer did not register
// is ErrSchema, never sent as is; without a mapping it goes out unchanged.
func TestPrepareMapsSchemaVersion(t *testing.T) {
	src, dst := []byte{0, 0, 0, 0, 0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0, 0, 3}
	entry := func(v []byte) []byte {
		md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1),
			PublishTime: proto.Uint64(1), SchemaVersion: v}.Build()
		return storedEntry(t, 7, 2, md, []byte("avro bytes"))
	}
	versionOf := func(out outgoing) []byte {
		mdBytes, _, err := wire.SplitMessage(out.message)
		if err != nil {
			t.Fatal(err)
		}
		md := &pb.MessageMetadata{}
		if err := proto.Unmarshal(mdBytes, md); err != nil {
			t.Fatal(err)
		}
		return md.GetSchemaVersion()
	}
	m := schemaMap{string(src): dst}
	out, err := prepare(entry(src), "east", testIncarnation, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := versionOf(out); !bytes.Equal(got, dst) {
		t.Fatalf("schema_version %x, want the remote's %x", got, dst)
	}
	if _, err := prepare(entry([]byte{0, 0, 0, 0, 0, 0, 0, 1}), "east", testIncarnation, m); !errors.Is(err, ErrSchema) {
		t.Fatalf("an unregistered version: %v, want ErrSchema", err)
	}
	if out, err = prepare(entry(src), "east", testIncarnation, nil); err != nil || !bytes.Equal(versionOf(out), src) {
		t.Fatalf("without a mapping: %x, %v; want %x unchanged", versionOf(out), err, src)
	}
	if out, err = prepare(simpleEntry(t, 8), "east", testIncarnation, m); err != nil || versionOf(out) != nil {
		t.Fatalf("an entry without a schema: %x, %v", versionOf(out), err)
	}
}
