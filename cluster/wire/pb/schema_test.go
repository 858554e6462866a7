package pb_test

import (
	"context"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

const protoPath = "meridian_pulsar_api.proto"

// TestGeneratedCodeIsFresh compiles the .proto in-process and compares its
// descriptor with the one embedded in the committed .pb.go. They differ when
// someone edits one without regenerating the other; the fix is
// `go generate ./cluster/wire/pb`.
func TestGeneratedCodeIsFresh(t *testing.T) {
	compiler := protocompile.Compiler{
		Resolver:       &protocompile.SourceResolver{},
		SourceInfoMode: protocompile.SourceInfoNone,
	}
	files, err := compiler.Compile(context.Background(), protoPath)
	if err != nil {
		t.Fatalf("compile %s: %v", protoPath, err)
	}
	fromSource := normalised(files[0])
	generated := normalised(pb.File_meridian_pulsar_api_proto)

	if diff := cmp.Diff(fromSource, generated, protocmp.Transform()); diff != "" {
		t.Fatalf("%s and the committed .pb.go disagree; run `go generate ./cluster/wire/pb` "+
			"and commit both (-proto +pb.go):\n%s", protoPath, diff)
	}
}

// TestFileIdentity pins what lets this file share a binary with
// pulsar-client-go: a path and a package of its own.
func TestFileIdentity(t *testing.T) {
	fd := pb.File_meridian_pulsar_api_proto
	if got := fd.Path(); got != protoPath {
		t.Errorf("registered path = %q, want %q", got, protoPath)
	}
	if got := fd.Package(); got != "meridian.wire.v1" {
		t.Errorf("package = %q, want meridian.wire.v1", got)
	}
	if got := fd.Syntax(); got != protoreflect.Proto2 {
		t.Errorf("syntax = %v, want proto2", got)
	}
}

// TestEveryCommandTypeHasItsField checks the BaseCommand convention the codec
// relies on: the command of type N travels in BaseCommand field N.
func TestEveryCommandTypeHasItsField(t *testing.T) {
	base := (&pb.BaseCommand{}).ProtoReflect().Descriptor()
	types := pb.BaseCommand_CONNECT.Descriptor().Values()
	for i := 0; i < types.Len(); i++ {
		v := types.Get(i)
		f := base.Fields().ByNumber(protoreflect.FieldNumber(v.Number()))
		switch {
		case f == nil:
			t.Errorf("BaseCommand.Type %s = %d has no BaseCommand field %d", v.Name(), v.Number(), v.Number())
		case f.Kind() != protoreflect.MessageKind || f.Cardinality() != protoreflect.Optional:
			t.Errorf("BaseCommand field %d (%s) for %s is not an optional message", v.Number(), f.Name(), v.Name())
		}
	}
	// And the reverse: no command field without a type.
	for i := 0; i < base.Fields().Len(); i++ {
		f := base.Fields().Get(i)
		if f.Number() == 1 {
			continue // the type itself
		}
		if types.ByNumber(protoreflect.EnumNumber(f.Number())) == nil {
			t.Errorf("BaseCommand field %s = %d has no BaseCommand.Type value", f.Name(), f.Number())
		}
	}
}

// normalised returns fd as a FileDescriptorProto without what differs between
// compilers but not on the wire: source info and derived json_name values.
func normalised(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.SourceCodeInfo = nil
	var strip func(msgs []*descriptorpb.DescriptorProto)
	strip = func(msgs []*descriptorpb.DescriptorProto) {
		for _, m := range msgs {
			for _, f := range m.Field {
				f.JsonName = nil
			}
			strip(m.NestedType)
		}
	}
	strip(fdp.MessageType)
	return fdp
}
