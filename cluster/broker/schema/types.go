package schema

import (
	"encoding/binary"
	"fmt"
	"maps"
	"strconv"
)

// Type is Pulsar's SchemaType, with its names and numbers (the Java enum
// org.apache.pulsar.common.schema.SchemaType), which is what the admin REST
// API speaks. The wire's pb.Schema_Type differs for the AUTO types, which
// are negative here; FromProto and ToProto convert.
type Type int32

// Pulsar's schema types.
const (
	None           Type = 0
	String         Type = 1
	JSON           Type = 2
	Protobuf       Type = 3
	Avro           Type = 4
	Boolean        Type = 5
	Int8           Type = 6
	Int16          Type = 7
	Int32          Type = 8
	Int64          Type = 9
	Float          Type = 10
	Double         Type = 11
	Date           Type = 12
	Time           Type = 13
	Timestamp      Type = 14
	KeyValue       Type = 15
	Instant        Type = 16
	LocalDate      Type = 17
	LocalTime      Type = 18
	LocalDateTime  Type = 19
	ProtobufNative Type = 20
	External       Type = 22

	// The negative types have no schema info of their own: clients use them
	// to say "raw bytes" or "take whatever the topic has".
	Bytes       Type = -1
	Auto        Type = -2 // deprecated in Pulsar
	AutoConsume Type = -3
	AutoPublish Type = -4
)

var typeNames = map[Type]string{
	None: "NONE", String: "STRING", JSON: "JSON", Protobuf: "PROTOBUF", Avro: "AVRO",
	Boolean: "BOOLEAN", Int8: "INT8", Int16: "INT16", Int32: "INT32", Int64: "INT64",
	Float: "FLOAT", Double: "DOUBLE", Date: "DATE", Time: "TIME", Timestamp: "TIMESTAMP",
	KeyValue: "KEY_VALUE", Instant: "INSTANT", LocalDate: "LOCAL_DATE", LocalTime: "LOCAL_TIME",
	LocalDateTime: "LOCAL_DATE_TIME", ProtobufNative: "PROTOBUF_NATIVE", External: "EXTERNAL",
	Bytes: "BYTES", Auto: "AUTO", AutoConsume: "AUTO_CONSUME", AutoPublish: "AUTO_PUBLISH",
}

var typesByName = func() map[string]Type {
	m := make(map[string]Type, len(typeNames))
	for t, n := range typeNames {
		m[n] = t
	}
	return m
}()

// String returns Pulsar's name of the type ("AVRO", "KEY_VALUE").
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType returns the type Pulsar names name, as the admin API's
// PostSchemaPayload.type carries it.
func ParseType(name string) (Type, error) {
	if t, ok := typesByName[name]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("%w: unknown schema type %q", ErrInvalidSchema, name)
}

// MarshalText stores a type by name, so that stored values read well and
// survive a renumbering.
func (t Type) MarshalText() ([]byte, error) {
	if _, ok := typeNames[t]; !ok {
		return nil, fmt.Errorf("%w: unknown schema type %d", ErrInvalidSchema, int32(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText is MarshalText's inverse.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// known reports whether t is one of Pulsar's types.
func (t Type) known() bool { _, ok := typeNames[t]; return ok }

// primitive reports whether t's schema is fully described by its type, so
// that its data must be empty (Pulsar's PrimitiveSchemaDataValidator).
func (t Type) primitive() bool {
	switch t {
	case None, Bytes, String, Boolean, Int8, Int16, Int32, Int64, Float, Double,
		Date, Time, Timestamp, Instant, LocalDate, LocalTime, LocalDateTime:
		return true
	}
	return false
}

// avroBased reports whether t's data is an Avro schema definition: Pulsar
// parses AVRO, JSON and PROTOBUF data with Avro's parser (its
// isUsingAvroSchemaParser).
func (t Type) avroBased() bool { return t == Avro || t == JSON || t == Protobuf }

// Info is one schema: Pulsar's SchemaInfo without the name, which Pulsar
// does not store either (the topic is the name).
type Info struct {
	Type Type
	// Data is the definition: for AVRO, JSON and PROTOBUF an Avro schema in
	// JSON; for KEY_VALUE the key and value definitions, each behind a
	// 4-byte big-endian length; empty for primitive types.
	Data []byte
	// Properties are free-form and kept as given. They take no part in
	// identity or compatibility.
	Properties map[string]string
}

// Clone returns a deep copy of i, so that callers never share the
// registry's slices and maps.
func (i Info) Clone() Info {
	c := Info{Type: i.Type, Properties: maps.Clone(i.Properties)}
	if i.Data != nil {
		c.Data = append([]byte{}, i.Data...)
	}
	return c
}

// IsEmpty reports whether i stands for "no schema": NONE or BYTES. The Java
// client never sends those (it leaves the schema out), but pulsar-client-go
// sends NONE for its BytesSchema; the broker treats both alike through
// ForProducer and ForConsumer.
func (i Info) IsEmpty() bool { return i.Type == None || i.Type == Bytes }

// Version numbers a topic's schemas from 0, one more for each schema or
// tombstone added, never reused.
type Version int64

// NoVersion is "no schema": a producer without one, or a topic without
// any. It encodes as empty bytes, Pulsar's SchemaVersion.Empty.
const NoVersion Version = -1

// EncodeVersion returns Pulsar's schema-version bytes for v (LongSchemaVersion:
// 8 bytes, big-endian), or nil for NoVersion or any negative v.
func EncodeVersion(v Version) []byte {
	if v < 0 {
		return nil
	}
	return binary.BigEndian.AppendUint64(nil, uint64(v))
}

// DecodeVersion reads schema-version bytes from the wire or a message's
// metadata. Empty bytes are NoVersion (no schema, or "the latest" in a
// GET_SCHEMA); anything but 8 bytes holding a non-negative number is
// ErrInvalidVersion.
func DecodeVersion(b []byte) (Version, error) {
	if len(b) == 0 {
		return NoVersion, nil
	}
	if len(b) != 8 {
		return NoVersion, fmt.Errorf("%w: %d bytes, want 8 (big-endian int64)", ErrInvalidVersion, len(b))
	}
	v := int64(binary.BigEndian.Uint64(b))
	if v < 0 {
		return NoVersion, fmt.Errorf("%w: %d is negative", ErrInvalidVersion, v)
	}
	return Version(v), nil
}
