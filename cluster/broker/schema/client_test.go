package schema

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// TestClientSchemas registers schemas exactly as pulsar-client-go builds
// them (its SchemaInfo, sent on the wire with the type's number as is).
func TestClientSchemas(t *testing.T) {
	ctx := ctxT(t)
	r := newRegistry(t, metatest.Memory(t), "r")
	fromClient := func(si *pulsar.SchemaInfo) Info {
		typ := pb.Schema_Type(si.Type)
		return FromProto(pb.Schema_builder{Type: &typ, SchemaData: []byte(si.Schema)}.Build())
	}
	def := record(fID + "," + fName)
	for i, si := range []*pulsar.SchemaInfo{
		pulsar.NewAvroSchema(def, nil).GetSchemaInfo(),
		pulsar.NewAvroSchema(record(fID+","+fName+","+fAgeDef), nil).GetSchemaInfo(),
	} {
		mustCreateOn(t, r, "avro-topic", fromClient(si), global.SchemaFull, Version(i))
	}
	mustCreateOn(t, r, "json-topic", fromClient(pulsar.NewJSONSchema(def, nil).GetSchemaInfo()), global.SchemaFull, 0)
	mustCreateOn(t, r, "string-topic", fromClient(pulsar.NewStringSchema(nil).GetSchemaInfo()), global.SchemaFull, 0)
	// pulsar-client-go's BytesSchema has type 0: no schema.
	if info := fromClient(pulsar.NewBytesSchema(nil).GetSchemaInfo()); !info.IsEmpty() {
		t.Fatalf("BytesSchema reads as %v", info.Type)
	}
	if name, err := Name("persistent://acme/ns/x-partition-2"); err != nil || name != "acme/ns/x" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	if _, v, err := r.Latest(ctx, "persistent://public/default/avro-topic"); err != nil || v != 1 {
		t.Fatalf("short names are public/default: %d, %v", v, err)
	}
}
