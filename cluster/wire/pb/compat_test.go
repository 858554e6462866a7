package pb_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	// Registers the reference client's PulsarApi.proto (package pulsar.proto).
	_ "github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// clientFile is the descriptor pulsar-client-go links into every binary that
// imports it; it is the reference for the wire contract.
func clientFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	fd, err := protoregistry.GlobalFiles.FindFileByPath("PulsarApi.proto")
	if err != nil {
		t.Fatalf("pulsar-client-go did not register PulsarApi.proto: %v", err)
	}
	return fd
}

// TestCompatibleWithClient checks that every message, field, enum and enum
// value of the client's schema is in ours, with the same name, number, kind,
// type, label, packing and default. Ours may add fields and values; it may
// never change or drop one.
func TestCompatibleWithClient(t *testing.T) {
	for _, problem := range compare(clientFile(t), pb.File_meridian_pulsar_api_proto) {
		t.Error(problem)
	}
}

// compare lists how ours departs from ref. Types are matched by their name
// relative to the file's package, as the packages differ by design.
func compare(ref, ours protoreflect.FileDescriptor) []string {
	oursMsgs := map[string]protoreflect.MessageDescriptor{}
	oursEnums := map[string]protoreflect.EnumDescriptor{}
	index(ours, ours.Messages(), ours.Enums(), oursMsgs, oursEnums)
	refMsgs := map[string]protoreflect.MessageDescriptor{}
	refEnums := map[string]protoreflect.EnumDescriptor{}
	index(ref, ref.Messages(), ref.Enums(), refMsgs, refEnums)

	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	for name, rm := range refMsgs {
		om, ok := oursMsgs[name]
		if !ok {
			report("message %s: missing", name)
			continue
		}
		for i := 0; i < rm.Fields().Len(); i++ {
			rf := rm.Fields().Get(i)
			of := om.Fields().ByNumber(rf.Number())
			if of == nil {
				report("%s.%s = %d: missing", name, rf.Name(), rf.Number())
				continue
			}
			where := fmt.Sprintf("%s.%s = %d", name, rf.Name(), rf.Number())
			if rf.Name() != of.Name() {
				report("%s: named %s in ours", where, of.Name())
			}
			if rf.Kind() != of.Kind() {
				report("%s: kind %v, ours %v", where, rf.Kind(), of.Kind())
			}
			if rf.Cardinality() != of.Cardinality() {
				report("%s: label %v, ours %v", where, rf.Cardinality(), of.Cardinality())
			}
			if rf.IsPacked() != of.IsPacked() {
				report("%s: packed %v, ours %v", where, rf.IsPacked(), of.IsPacked())
			}
			if r, o := typeName(ref, rf), typeName(ours, of); r != o {
				report("%s: type %s, ours %s", where, r, o)
			}
			if r, o := defaultOf(rf), defaultOf(of); r != o {
				report("%s: default %s, ours %s", where, r, o)
			}
			if (rf.ContainingOneof() == nil) != (of.ContainingOneof() == nil) {
				report("%s: oneof membership differs", where)
			}
		}
	}

	for name, re := range refEnums {
		oe, ok := oursEnums[name]
		if !ok {
			report("enum %s: missing", name)
			continue
		}
		for i := 0; i < re.Values().Len(); i++ {
			rv := re.Values().Get(i)
			ov := oe.Values().ByName(rv.Name())
			switch {
			case ov == nil:
				report("enum %s value %s = %d: missing", name, rv.Name(), rv.Number())
			case ov.Number() != rv.Number():
				report("enum %s value %s: = %d, ours = %d", name, rv.Name(), rv.Number(), ov.Number())
			}
		}
	}
	return problems
}

func index(fd protoreflect.FileDescriptor, msgs protoreflect.MessageDescriptors, enums protoreflect.EnumDescriptors,
	outMsgs map[string]protoreflect.MessageDescriptor, outEnums map[string]protoreflect.EnumDescriptor) {
	for i := 0; i < enums.Len(); i++ {
		outEnums[relative(fd, enums.Get(i).FullName())] = enums.Get(i)
	}
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		outMsgs[relative(fd, m.FullName())] = m
		index(fd, m.Messages(), m.Enums(), outMsgs, outEnums)
	}
}

func relative(fd protoreflect.FileDescriptor, name protoreflect.FullName) string {
	return strings.TrimPrefix(string(name), string(fd.Package())+".")
}

func typeName(fd protoreflect.FileDescriptor, f protoreflect.FieldDescriptor) string {
	switch {
	case f.Message() != nil:
		return "message " + relative(fd, f.Message().FullName())
	case f.Enum() != nil:
		return "enum " + relative(fd, f.Enum().FullName())
	}
	return f.Kind().String()
}

func defaultOf(f protoreflect.FieldDescriptor) string {
	if !f.HasDefault() {
		return "(none)"
	}
	if ev := f.DefaultEnumValue(); ev != nil {
		return fmt.Sprintf("%s(%d)", ev.Name(), ev.Number())
	}
	return fmt.Sprintf("%v", f.Default().Interface())
}

// TestCompareCatchesTranscriptionErrors makes sure the checker above can
// fail: each case copies our schema, makes one slip a hand transcription
// could make, and expects compare to name it.
func TestCompareCatchesTranscriptionErrors(t *testing.T) {
	ref := clientFile(t)
	cases := []struct {
		name string
		slip func(*descriptorpb.FileDescriptorProto)
		want string
	}{
		{"field number", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandSend", "sequence_id").Number = proto.Int32(20)
		}, "CommandSend.sequence_id = 2: missing"},
		{"field name", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandFlow", "messagePermits").Name = proto.String("message_permits")
		}, "CommandFlow.messagePermits = 2: named message_permits"},
		{"scalar type", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "MessageMetadata", "event_time").Type = descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
		}, "MessageMetadata.event_time = 12: kind uint64, ours int64"},
		{"message type", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "BaseCommand", "send").TypeName = proto.String(".meridian.wire.v1.CommandSendReceipt")
		}, "BaseCommand.send = 6: type message CommandSend, ours message CommandSendReceipt"},
		{"label", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandAck", "message_id").Label = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
		}, "CommandAck.message_id = 3: label repeated, ours optional"},
		{"default", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "MessageIdData", "partition").DefaultValue = proto.String("0")
		}, "MessageIdData.partition = 3: default -1, ours 0"},
		{"enum default", func(f *descriptorpb.FileDescriptorProto) {
			field(f, "CommandSubscribe", "initialPosition").DefaultValue = proto.String("Earliest")
		}, "default Latest(0), ours Earliest(1)"},
		{"enum value number", func(f *descriptorpb.FileDescriptorProto) {
			for _, v := range message(f, "CommandSubscribe").EnumType[0].Value {
				if v.GetName() == "Key_Shared" {
					v.Number = proto.Int32(4)
				}
			}
		}, "enum CommandSubscribe.SubType value Key_Shared: = 3, ours = 4"},
		{"enum value dropped", func(f *descriptorpb.FileDescriptorProto) {
			for _, e := range f.EnumType {
				if e.GetName() == "ServerError" {
					e.Value = e.Value[:len(e.Value)-1]
				}
			}
		}, "enum ServerError value ProducerFenced = 25: missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fdp := protodesc.ToFileDescriptorProto(pb.File_meridian_pulsar_api_proto)
			tc.slip(fdp)
			slipped, err := protodesc.NewFile(fdp, new(protoregistry.Files))
			if err != nil {
				t.Fatalf("build slipped schema: %v", err)
			}
			problems := compare(ref, slipped)
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("compare missed the slip; want a problem containing %q, got %q", tc.want, problems)
		})
	}
}

func message(f *descriptorpb.FileDescriptorProto, name string) *descriptorpb.DescriptorProto {
	for _, m := range f.MessageType {
		if m.GetName() == name {
			return m
		}
	}
	panic("no message " + name)
}

func field(f *descriptorpb.FileDescriptorProto, msg, name string) *descriptorpb.FieldDescriptorProto {
	for _, fd := range message(f, msg).Field {
		if fd.GetName() == name {
			return fd
		}
	}
	panic("no field " + msg + "." + name)
}

// TestWireBytesInterchangeable encodes with our types and decodes with the
// client's registered types (through dynamicpb), then the reverse.
func TestWireBytesInterchangeable(t *testing.T) {
	ref := clientFile(t)
	clientBase := ref.Messages().ByName("BaseCommand")
	clientMeta := ref.Messages().ByName("MessageMetadata")

	t.Run("ours to client", func(t *testing.T) {
		cmd := pb.BaseCommand_builder{
			Type: pb.BaseCommand_SEND.Enum(),
			Send: pb.CommandSend_builder{
				ProducerId:        proto.Uint64(7),
				SequenceId:        proto.Uint64(42),
				NumMessages:       proto.Int32(3),
				HighestSequenceId: proto.Uint64(44),
				IsChunk:           proto.Bool(true),
				MessageId: pb.MessageIdData_builder{
					LedgerId:   proto.Uint64(10),
					EntryId:    proto.Uint64(11),
					BatchIndex: proto.Int32(2),
					AckSet:     []int64{-1, 5},
				}.Build(),
			}.Build(),
		}.Build()
		wire := marshal(t, cmd)

		got := dynamicpb.NewMessage(clientBase)
		if err := proto.Unmarshal(wire, got); err != nil {
			t.Fatalf("client types cannot decode our bytes: %v", err)
		}
		if typ := got.Get(clientBase.Fields().ByName("type")).Enum(); typ != 6 {
			t.Errorf("type = %d, want SEND(6)", typ)
		}
		if name := clientBase.Fields().ByName("type").Enum().Values().ByNumber(6).Name(); name != "SEND" {
			t.Errorf("client names type 6 %s, want SEND", name)
		}
		send := got.Get(clientBase.Fields().ByName("send")).Message()
		sendDesc := send.Descriptor()
		for field, want := range map[protoreflect.Name]any{
			"producer_id": uint64(7), "sequence_id": uint64(42), "num_messages": int32(3),
			"highest_sequence_id": uint64(44), "is_chunk": true,
		} {
			if v := send.Get(sendDesc.Fields().ByName(field)).Interface(); v != want {
				t.Errorf("send.%s = %v, want %v", field, v, want)
			}
		}
		id := send.Get(sendDesc.Fields().ByName("message_id")).Message()
		if v := id.Get(id.Descriptor().Fields().ByName("entryId")).Uint(); v != 11 {
			t.Errorf("send.message_id.entryId = %d, want 11", v)
		}
		if back := marshal(t, got); !bytes.Equal(back, wire) {
			t.Errorf("client re-encoding differs:\nours   %x\nclient %x", wire, back)
		}
	})

	t.Run("client to ours", func(t *testing.T) {
		meta := dynamicpb.NewMessage(clientMeta)
		fields := clientMeta.Fields()
		meta.Set(fields.ByName("producer_name"), protoreflect.ValueOfString("us-east-1-7"))
		meta.Set(fields.ByName("sequence_id"), protoreflect.ValueOfUint64(99))
		meta.Set(fields.ByName("publish_time"), protoreflect.ValueOfUint64(1_700_000_000_000))
		meta.Set(fields.ByName("replicated_from"), protoreflect.ValueOfString("eu-west"))
		meta.Set(fields.ByName("compression"), protoreflect.ValueOfEnum(3)) // ZSTD
		meta.Set(fields.ByName("num_messages_in_batch"), protoreflect.ValueOfInt32(5))
		props := meta.Mutable(fields.ByName("properties")).List()
		kv := props.NewElement()
		kv.Message().Set(kv.Message().Descriptor().Fields().ByName("key"), protoreflect.ValueOfString("k"))
		kv.Message().Set(kv.Message().Descriptor().Fields().ByName("value"), protoreflect.ValueOfString("v"))
		props.Append(kv)
		wire := marshal(t, meta)

		var got pb.MessageMetadata
		if err := proto.Unmarshal(wire, &got); err != nil {
			t.Fatalf("our types cannot decode the client's bytes: %v", err)
		}
		if got.GetProducerName() != "us-east-1-7" || got.GetSequenceId() != 99 ||
			got.GetPublishTime() != 1_700_000_000_000 || got.GetReplicatedFrom() != "eu-west" ||
			got.GetCompression() != pb.CompressionType_ZSTD || got.GetNumMessagesInBatch() != 5 ||
			len(got.GetProperties()) != 1 || got.GetProperties()[0].GetKey() != "k" {
			t.Errorf("decoded %v", &got)
		}
		if back := marshal(t, &got); !bytes.Equal(back, wire) {
			t.Errorf("our re-encoding differs:\nclient %x\nours   %x", wire, back)
		}
	})

	// A field newer than the client survives a trip through it as an unknown
	// field, which is what lets replication forward metadata unchanged.
	t.Run("newer field through client", func(t *testing.T) {
		meta := pb.MessageMetadata_builder{
			ProducerName: proto.String("p"),
			SequenceId:   proto.Uint64(1),
			PublishTime:  proto.Uint64(2),
			EntryHashMin: proto.Uint32(0x10),
			EntryHashMax: proto.Uint32(0xffff),
		}.Build()
		wire := marshal(t, meta)
		viaClient := dynamicpb.NewMessage(clientMeta)
		if err := proto.Unmarshal(wire, viaClient); err != nil {
			t.Fatal(err)
		}
		if len(viaClient.GetUnknown()) == 0 {
			t.Fatal("the client knows entry_hash_min/max; pick a newer field for this test")
		}
		var back pb.MessageMetadata
		if err := proto.Unmarshal(marshal(t, viaClient), &back); err != nil {
			t.Fatal(err)
		}
		if back.GetEntryHashMin() != 0x10 || back.GetEntryHashMax() != 0xffff {
			t.Errorf("entry hash range lost through the client: %v", &back)
		}
	})
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %T: %v", m, err)
	}
	return b
}
