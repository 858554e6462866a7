package schema

import (
	"maps"
	"slices"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// FromProto converts a schema from PRODUCER, SUBSCRIBE or
// GET_OR_CREATE_SCHEMA. The wire's AutoConsume becomes AUTO_CONSUME; every
// other wire type has Pulsar's number. A nil schema is the zero Info (NONE):
// check IsEmpty.
func FromProto(s *pb.Schema) Info {
	if s == nil {
		return Info{}
	}
	i := Info{Type: fromProtoType(s.GetType()), Data: s.GetSchemaData()}
	if kvs := s.GetProperties(); len(kvs) > 0 {
		i.Properties = make(map[string]string, len(kvs))
		for _, kv := range kvs {
			i.Properties[kv.GetKey()] = kv.GetValue()
		}
	}
	return i
}

// ToProto builds the wire schema for a GET_SCHEMA response. name is the
// schema's name as clients show it (Pulsar sends the topic's base name).
// Negative types other than AUTO_CONSUME have no wire value and go out as
// None, as in Pulsar's Commands.getSchemaType. Properties are sorted by key
// so that the bytes are deterministic.
func ToProto(name string, i Info) *pb.Schema {
	t := toProtoType(i.Type)
	props := make([]*pb.KeyValue, 0, len(i.Properties))
	for _, k := range slices.Sorted(maps.Keys(i.Properties)) {
		v := i.Properties[k]
		props = append(props, pb.KeyValue_builder{Key: &k, Value: &v}.Build())
	}
	data := i.Data
	if data == nil {
		data = []byte{} // schema_data is required on the wire
	}
	return pb.Schema_builder{Name: &name, SchemaData: data, Type: &t, Properties: props}.Build()
}

func fromProtoType(t pb.Schema_Type) Type {
	switch t {
	case pb.Schema_AutoConsume:
		return AutoConsume
	case pb.Schema_External:
		return External
	}
	return Type(t)
}

func toProtoType(t Type) pb.Schema_Type {
	switch {
	case t == AutoConsume:
		return pb.Schema_AutoConsume
	case t == External:
		return pb.Schema_External
	case t < 0:
		return pb.Schema_None
	}
	return pb.Schema_Type(t)
}
