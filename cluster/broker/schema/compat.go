package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/meridian-mq/meridian/global"
)

// Strategy is Pulsar's schema compatibility strategy, the type global's
// policies carry.
type Strategy = global.SchemaCompatibilityStrategy

// checkStrategy refuses strategies the registry cannot apply: unknown names,
// and UNDEFINED, which means "the broker default" and must have been
// resolved before (global.Resolve does).
func checkStrategy(s Strategy) error {
	switch s {
	case global.SchemaAlwaysIncompatible, global.SchemaAlwaysCompatible, global.SchemaBackward,
		global.SchemaForward, global.SchemaFull, global.SchemaBackwardTransitive,
		global.SchemaForwardTransitive, global.SchemaFullTransitive:
		return nil
	case global.SchemaUndefined, "":
		return fmt.Errorf("%w: %q: resolve the topic's effective strategy first", ErrInvalidStrategy, s)
	}
	return fmt.Errorf("%w: %q is not one of Pulsar's strategies", ErrInvalidStrategy, s)
}

// transitive reports whether s checks a new schema against every version of
// the lineage rather than the latest only.
func transitive(s Strategy) bool {
	return s == global.SchemaBackwardTransitive || s == global.SchemaForwardTransitive ||
		s == global.SchemaFullTransitive
}

// hashOf is a schema's identity for storage and the admin API: SHA-256 of
// the type's number (4 bytes, big-endian) followed by the data. Pulsar
// hashes the data alone and compares the type beside it; folding the type
// in keeps one value that says both.
func hashOf(t Type, data []byte) [32]byte {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint32(nil, uint32(t)))
	h.Write(data)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// parseAvro parses an Avro definition with a cache of its own. hamba/avro's
// default cache is process-wide: named types parsed for one topic would
// resolve references in another topic's schema, and a record redefined
// under the same name would be read as the first definition.
func parseAvro(data []byte) (avro.Schema, error) {
	return avro.ParseBytesWithCache(data, "", &avro.SchemaCache{})
}

// validate checks that info can be stored, as Pulsar's SchemaDataValidator
// does, and returns its parsed Avro definition for AVRO and JSON (nil for
// other types).
func validate(info Info, maxBytes int) (avro.Schema, error) {
	switch {
	case !info.Type.known():
		return nil, fmt.Errorf("%w: unknown type %d", ErrInvalidSchema, int32(info.Type))
	case info.Type == Auto || info.Type == AutoConsume || info.Type == AutoPublish:
		return nil, fmt.Errorf("%w: %v is a client-side placeholder, not a schema that can be registered", ErrInvalidSchema, info.Type)
	case len(info.Data) > maxBytes:
		return nil, fmt.Errorf("%w: %d bytes of schema data, the limit is %d", ErrInvalidSchema, len(info.Data), maxBytes)
	case info.Type.primitive() && len(info.Data) > 0:
		return nil, fmt.Errorf("%w: a %v schema has no definition, but %d bytes of data were given", ErrInvalidSchema, info.Type, len(info.Data))
	case info.Type == Avro || info.Type == JSON:
		s, err := parseAvro(info.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: the %v schema's data is not an Avro schema definition: %v", ErrInvalidSchema, info.Type, err)
		}
		return s, nil
	}
	return nil, nil
}

// canonical is the form in which two Avro-based definitions compare equal
// when they define the same schema: parsed and written back, so that
// whitespace, key order and namespace spelling do not matter, while
// defaults, docs and aliases still do. ok is false when data does not parse
// (a PROTOBUF definition Avro refuses), and the bytes then compare as they
// are.
func canonical(t Type, data []byte) (form []byte, ok bool) {
	if !t.avroBased() {
		return nil, false
	}
	s, err := parseAvro(data)
	if err != nil {
		return nil, false
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, false
	}
	return b, true
}

// same reports whether a stored version and a candidate are one schema
// (Pulsar's getSchemaVersionBySchemaData): same type and the same
// definition. Properties take no part.
func same(a, b Info) bool {
	if a.Type != b.Type {
		return false
	}
	if bytes.Equal(a.Data, b.Data) {
		return true
	}
	ca, okA := canonical(a.Type, a.Data)
	cb, okB := canonical(b.Type, b.Data)
	return okA && okB && bytes.Equal(ca, cb)
}

// entry is one stored version as the checks see it.
type entry struct {
	version Version
	info    Info
}

// checkAgainst decides whether next may follow the given versions (the
// latest, or the whole lineage for a transitive strategy) under s. next
// has passed validate; parsed is its Avro definition for AVRO and JSON.
func checkAgainst(existing []entry, next Info, parsed avro.Schema, s Strategy) error {
	if s == global.SchemaAlwaysCompatible {
		return nil
	}
	// Newest first: the most relevant refusal is reported.
	for i := len(existing) - 1; i >= 0; i-- {
		if err := checkOne(existing[i], next, parsed, s); err != nil {
			return err
		}
	}
	return nil
}

// checkOne checks next against one existing version (Pulsar's
// checkCompatible for one pair).
func checkOne(old entry, next Info, parsed avro.Schema, s Strategy) error {
	if old.info.Type != next.Type {
		return fmt.Errorf("%w: version %d has type %v and the new schema has type %v; a topic's schema type cannot change under %s",
			ErrIncompatible, old.version, old.info.Type, next.Type, s)
	}
	if same(old.info, next) {
		return nil
	}
	if s == global.SchemaAlwaysIncompatible {
		return fmt.Errorf("%w: strategy ALWAYS_INCOMPATIBLE refuses any schema other than version %d", ErrIncompatible, old.version)
	}
	if next.Type != Avro && next.Type != JSON {
		return nil // Pulsar's default check: the same type is enough
	}
	oldSchema, err := parseAvro(old.info.Data)
	if err != nil {
		return fmt.Errorf("%w: stored version %d does not parse: %v", ErrCorrupt, old.version, err)
	}
	// A fresh SchemaCompatibility per pair: hamba caches results by
	// fingerprint, which leaves defaults out, so a shared cache would
	// answer for a field with a default what it found for one without.
	if s != global.SchemaForward && s != global.SchemaForwardTransitive {
		if err := avro.NewSchemaCompatibility().Compatible(parsed, oldSchema); err != nil {
			return fmt.Errorf("%w: under %s the new schema must read data written with version %d, and cannot: %v",
				ErrIncompatible, s, old.version, err)
		}
	}
	if s != global.SchemaBackward && s != global.SchemaBackwardTransitive {
		if err := avro.NewSchemaCompatibility().Compatible(oldSchema, parsed); err != nil {
			return fmt.Errorf("%w: under %s version %d must read data written with the new schema, and cannot: %v",
				ErrIncompatible, s, old.version, err)
		}
	}
	return nil
}

// targets returns the versions a new schema is checked against: the whole
// lineage for a transitive strategy, else the latest version only.
func targets(lineage []entry, s Strategy) []entry {
	if transitive(s) || len(lineage) == 0 {
		return lineage
	}
	return lineage[len(lineage)-1:]
}

// consumerStrategy is Pulsar's checkConsumerCompatibility: a consumer must
// read what producers write, so for BACKWARD, FORWARD, FULL and
// FORWARD_TRANSITIVE its schema is checked BACKWARD against the latest
// version; for the other strategies with the strategy itself, against the
// whole lineage for transitive ones.
func consumerStrategy(s Strategy) Strategy {
	switch s {
	case global.SchemaBackward, global.SchemaForward, global.SchemaFull, global.SchemaForwardTransitive:
		return global.SchemaBackward
	}
	return s
}
