package schema

import (
	"bytes"
	"errors"
	"testing"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"google.golang.org/protobuf/proto"
)

func TestVersionBytes(t *testing.T) {
	for _, v := range []Version{0, 1, 255, 1 << 40} {
		b := EncodeVersion(v)
		if len(b) != 8 {
			t.Fatalf("EncodeVersion(%d) = %x", v, b)
		}
		got, err := DecodeVersion(b)
		if err != nil || got != v {
			t.Fatalf("DecodeVersion(%x) = %d, %v", b, got, err)
		}
	}
	if b := EncodeVersion(3); !bytes.Equal(b, []byte{0, 0, 0, 0, 0, 0, 0, 3}) {
		t.Fatalf("not big-endian: %x", b)
	}
	if b := EncodeVersion(NoVersion); b != nil {
		t.Fatalf("EncodeVersion(NoVersion) = %x, want empty", b)
	}
	if v, err := DecodeVersion(nil); err != nil || v != NoVersion {
		t.Fatalf("DecodeVersion(empty) = %d, %v", v, err)
	}
	for _, b := range [][]byte{{1}, make([]byte, 9), {0x80, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := DecodeVersion(b); !errors.Is(err, ErrInvalidVersion) {
			t.Fatalf("DecodeVersion(%x): %v", b, err)
		}
	}
}

func FuzzDecodeVersion(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeVersion(7))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeVersion(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeVersion(v), b) {
			t.Fatalf("%x decodes to %d, which encodes to %x", b, v, EncodeVersion(v))
		}
	})
}

func TestTypeNames(t *testing.T) {
	for typ, name := range map[Type]string{
		None: "NONE", Avro: "AVRO", JSON: "JSON", KeyValue: "KEY_VALUE", ProtobufNative: "PROTOBUF_NATIVE",
		Bytes: "BYTES", AutoConsume: "AUTO_CONSUME", AutoPublish: "AUTO_PUBLISH", LocalDateTime: "LOCAL_DATE_TIME",
	} {
		if typ.String() != name {
			t.Errorf("%d.String() = %s, want %s", int32(typ), typ, name)
		}
		got, err := ParseType(name)
		if err != nil || got != typ {
			t.Errorf("ParseType(%s) = %v, %v", name, got, err)
		}
	}
	// Pulsar's numbers, which the admin API and the wire share.
	for typ, n := range map[Type]int32{String: 1, JSON: 2, Protobuf: 3, Avro: 4, KeyValue: 15, ProtobufNative: 20, Bytes: -1, AutoConsume: -3} {
		if int32(typ) != n {
			t.Errorf("%v = %d, want %d", typ, int32(typ), n)
		}
	}
	if _, err := ParseType("XML"); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("ParseType(XML): %v", err)
	}
}

func TestProtoConversion(t *testing.T) {
	in := Info{Type: Avro, Data: []byte(record(fID)), Properties: map[string]string{"b": "2", "a": "1"}}
	p := ToProto("persistent://acme/ns/orders", in)
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back pb.Schema
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	out := FromProto(&back)
	if out.Type != Avro || !bytes.Equal(out.Data, in.Data) || len(out.Properties) != 2 || out.Properties["a"] != "1" {
		t.Fatalf("round trip: %+v", out)
	}
	if kvs := back.GetProperties(); kvs[0].GetKey() != "a" {
		t.Fatalf("properties not sorted: %v", kvs)
	}
	// A primitive schema has empty data, which the required field still
	// carries.
	if b, err := proto.Marshal(ToProto("t", Info{Type: String})); err != nil || len(b) == 0 {
		t.Fatalf("STRING schema: %v", err)
	}
	for typ, want := range map[Type]pb.Schema_Type{
		AutoConsume: pb.Schema_AutoConsume, Bytes: pb.Schema_None, AutoPublish: pb.Schema_None,
		KeyValue: pb.Schema_KeyValue, ProtobufNative: pb.Schema_ProtobufNative, External: pb.Schema_External,
	} {
		if got := ToProto("t", Info{Type: typ}).GetType(); got != want {
			t.Errorf("ToProto(%v).Type = %v, want %v", typ, got, want)
		}
	}
	if got := FromProto(pb.Schema_builder{Type: pb.Schema_AutoConsume.Enum(), SchemaData: []byte{}}.Build()); got.Type != AutoConsume {
		t.Errorf("FromProto(AutoConsume) = %v", got.Type)
	}
	if got := FromProto(nil); !got.IsEmpty() {
		t.Errorf("FromProto(nil) = %+v", got)
	}
}
