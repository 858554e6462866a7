package schema

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/global"
)

// The strategies, in the matrix's column order.
var allStrategies = []Strategy{
	global.SchemaAlwaysCompatible, global.SchemaAlwaysIncompatible,
	global.SchemaBackward, global.SchemaForward, global.SchemaFull,
	global.SchemaBackwardTransitive, global.SchemaForwardTransitive, global.SchemaFullTransitive,
}

// TestCompatibilityMatrix checks one change against one existing version
// under every strategy, for AVRO and for JSON (an Avro definition too).
// With a single existing version a transitive strategy answers as its
// plain counterpart.
func TestCompatibilityMatrix(t *testing.T) {
	base := record(fID + "," + fName)
	// ok lists the strategies that accept the change; the others refuse.
	const (
		AC          = global.SchemaAlwaysCompatible
		B, F, FU    = global.SchemaBackward, global.SchemaForward, global.SchemaFull
		BT, FT, FUT = global.SchemaBackwardTransitive, global.SchemaForwardTransitive, global.SchemaFullTransitive
	)
	cases := []struct {
		name   string
		change string
		ok     []Strategy
	}{
		{"identical", base, allStrategies},
		{"add field with default", record(fID + "," + fName + "," + fAgeDef), []Strategy{AC, B, F, FU, BT, FT, FUT}},
		{"add field without default", record(fID + "," + fName + "," + fAge), []Strategy{AC, F, FT}},
		{"remove field", record(fID), []Strategy{AC, B, BT}},
		{"rename field", record(fID + "," + fFull), []Strategy{AC}},
		{"rename field with alias", record(fID + "," + fFullAlias), []Strategy{AC, B, BT}},
		{"promote int to long", record(fIDLong + "," + fName), []Strategy{AC, B, BT}},
		{"add default to field", record(fID + "," + fNameDef), []Strategy{AC, B, F, FU, BT, FT, FUT}},
	}
	for _, typ := range []Type{Avro, JSON} {
		for _, c := range cases {
			for _, s := range allStrategies {
				t.Run(fmt.Sprintf("%v/%s/%s", typ, c.name, s), func(t *testing.T) {
					old := entry{version: 0, info: Info{Type: typ, Data: clientDef(t, base)}}
					next := Info{Type: typ, Data: clientDef(t, c.change)}
					parsed, err := validate(next, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					err = checkAgainst([]entry{old}, next, parsed, s)
					want := contains(c.ok, s)
					switch {
					case want && err != nil:
						t.Fatalf("refused: %v", err)
					case !want && err == nil:
						t.Fatal("accepted")
					case !want && !errors.Is(err, ErrIncompatible):
						t.Fatalf("error %v does not wrap ErrIncompatible", err)
					}
				})
			}
		}
	}
}

// TestTransitive builds histories in which the latest version accepts the
// change and an older one does not: only the transitive strategy refuses.
func TestTransitive(t *testing.T) {
	cases := []struct {
		name      string
		history   []string
		change    string
		plain, tr Strategy
	}{
		{
			// The reader's new Age has no default: fine against v1, which
			// wrote Age, not against v0, which did not.
			"backward", []string{record(fID), record(fID + "," + fAgeDef)}, record(fID + "," + fAge),
			global.SchemaBackward, global.SchemaBackwardTransitive,
		},
		{
			// Dropping Name: v1 reads it back from its default, v0 cannot.
			"forward", []string{record(fID + "," + fName), record(fID + "," + fNameDef)}, record(fID),
			global.SchemaForward, global.SchemaForwardTransitive,
		},
		{
			"full", []string{record(fID + "," + fName), record(fID + "," + fNameDef)}, record(fID),
			global.SchemaFull, global.SchemaFullTransitive,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l []entry
			for i, d := range c.history {
				l = append(l, entry{version: Version(i), info: avroInfo(t, d)})
			}
			next := avroInfo(t, c.change)
			parsed, err := validate(next, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkAgainst(targets(l, c.plain), next, parsed, c.plain); err != nil {
				t.Fatalf("%s refused: %v", c.plain, err)
			}
			err = checkAgainst(targets(l, c.tr), next, parsed, c.tr)
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("%s: got %v, want ErrIncompatible", c.tr, err)
			}
			if !strings.Contains(err.Error(), "version 0") {
				t.Fatalf("%s: the error should name version 0: %v", c.tr, err)
			}
		})
	}
}

// TestTypesOtherThanAvro: a change of type is refused unless
// ALWAYS_COMPATIBLE; types without an Avro check pass on the same type
// (except ALWAYS_INCOMPATIBLE, for a different definition).
func TestTypesOtherThanAvro(t *testing.T) {
	def := record(fID + "," + fName)
	cases := []struct {
		name     string
		old, new Info
		ok       []Strategy
	}{
		{"avro to json", avroInfo(t, def), jsonInfo(t, def), []Strategy{global.SchemaAlwaysCompatible}},
		{"string to avro", Info{Type: String}, avroInfo(t, def), []Strategy{global.SchemaAlwaysCompatible}},
		{"string to string", Info{Type: String}, Info{Type: String}, allStrategies},
		{"string to int64", Info{Type: String}, Info{Type: Int64}, []Strategy{global.SchemaAlwaysCompatible}},
		{"protobuf changed", Info{Type: Protobuf, Data: []byte(`{"a":1}`)}, Info{Type: Protobuf, Data: []byte(`{"a":2}`)},
			without(allStrategies, global.SchemaAlwaysIncompatible)},
		{"key_value changed", Info{Type: KeyValue, Data: []byte{0, 0, 0, 0, 0, 0, 0, 1, 'x'}}, Info{Type: KeyValue, Data: []byte{0, 0, 0, 0, 0, 0, 0, 0}},
			without(allStrategies, global.SchemaAlwaysIncompatible)},
	}
	for _, c := range cases {
		for _, s := range allStrategies {
			t.Run(c.name+"/"+string(s), func(t *testing.T) {
				parsed, err := validate(c.new, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				err = checkAgainst([]entry{{0, c.old}}, c.new, parsed, s)
				if want := contains(c.ok, s); want != (err == nil) {
					t.Fatalf("want ok=%v, got %v", want, err)
				}
			})
		}
	}
}

func TestConsumerStrategy(t *testing.T) {
	for s, want := range map[Strategy]Strategy{
		global.SchemaBackward:           global.SchemaBackward,
		global.SchemaForward:            global.SchemaBackward,
		global.SchemaFull:               global.SchemaBackward,
		global.SchemaForwardTransitive:  global.SchemaBackward,
		global.SchemaBackwardTransitive: global.SchemaBackwardTransitive,
		global.SchemaFullTransitive:     global.SchemaFullTransitive,
		global.SchemaAlwaysIncompatible: global.SchemaAlwaysIncompatible,
	} {
		if got := consumerStrategy(s); got != want {
			t.Errorf("consumerStrategy(%s) = %s, want %s", s, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		info Info
		ok   bool
	}{
		{"avro", avroInfo(t, record(fID)), true},
		{"json", jsonInfo(t, record(fID)), true},
		{"avro not json", Info{Type: Avro, Data: []byte(`{"type":`)}, false},
		{"avro unknown type", Info{Type: Avro, Data: []byte(`{"type":"record","name":"X","fields":[{"name":"a","type":"nope"}]}`)}, false},
		{"json empty", Info{Type: JSON}, false},
		{"string", Info{Type: String}, true},
		{"string with data", Info{Type: String, Data: []byte("x")}, false},
		{"bytes", Info{Type: Bytes}, true},
		{"auto consume", Info{Type: AutoConsume}, false},
		{"auto publish", Info{Type: AutoPublish}, false},
		{"unknown type", Info{Type: 99}, false},
		{"protobuf native", Info{Type: ProtobufNative, Data: []byte("descriptor")}, true},
		{"too big", Info{Type: Protobuf, Data: make([]byte, 2<<10)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validate(c.info, 1<<10)
			if c.ok != (err == nil) {
				t.Fatalf("want ok=%v, got %v", c.ok, err)
			}
			if err != nil && !errors.Is(err, ErrInvalidSchema) {
				t.Fatalf("%v does not wrap ErrInvalidSchema", err)
			}
		})
	}
}

func TestSame(t *testing.T) {
	compact := []byte(`{"type":"record","name":"Example","namespace":"test","fields":[{"name":"ID","type":"int"}]}`)
	spaced := []byte("{ \"fields\": [ {\"type\": \"int\", \"name\": \"ID\"} ],\n \"name\": \"test.Example\", \"type\": \"record\" }")
	withDefault := []byte(`{"type":"record","name":"Example","namespace":"test","fields":[{"name":"ID","type":"int","default":1}]}`)
	cases := []struct {
		name string
		a, b Info
		want bool
	}{
		{"same bytes", Info{Type: Avro, Data: compact}, Info{Type: Avro, Data: compact}, true},
		{"same definition spelled differently", Info{Type: Avro, Data: compact}, Info{Type: Avro, Data: spaced}, true},
		{"json too", Info{Type: JSON, Data: compact}, Info{Type: JSON, Data: spaced}, true},
		{"a default differs", Info{Type: Avro, Data: compact}, Info{Type: Avro, Data: withDefault}, false},
		{"type differs", Info{Type: Avro, Data: compact}, Info{Type: JSON, Data: compact}, false},
		{"properties do not count", Info{Type: String, Properties: map[string]string{"a": "1"}}, Info{Type: String}, true},
		{"opaque bytes", Info{Type: ProtobufNative, Data: []byte("a")}, Info{Type: ProtobufNative, Data: []byte("b")}, false},
	}
	for _, c := range cases {
		if got := same(c.a, c.b); got != c.want {
			t.Errorf("%s: same = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCheckStrategy(t *testing.T) {
	for _, s := range allStrategies {
		if err := checkStrategy(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []Strategy{"", global.SchemaUndefined, "SOMETIMES", "backward"} {
		if err := checkStrategy(s); !errors.Is(err, ErrInvalidStrategy) {
			t.Errorf("%q: got %v, want ErrInvalidStrategy", s, err)
		}
	}
}

func contains(ss []Strategy, s Strategy) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func without(ss []Strategy, drop Strategy) []Strategy {
	var out []Strategy
	for _, s := range ss {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}
