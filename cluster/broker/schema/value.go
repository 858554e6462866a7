package schema

import (
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// valueVersion is the format of a stored version (DESIGN §3: values are
// versioned JSON).
const valueVersion = 1

// storedValue is one version at RegionKey(region, "schemas", topic,
// version). Data is base64 in JSON, which Config.MaxSchemaBytes accounts
// for.
type storedValue struct {
	Type       Type              `json:"type"`
	Data       []byte            `json:"data,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// Timestamp is when the version was added, in Unix milliseconds.
	Timestamp int64 `json:"timestamp"`
	// Hash is hashOf(Type, Data) in hex. It is checked on every read, so a
	// damaged value is refused rather than served (DESIGN rule 5).
	Hash string `json:"hash"`
	// Deleted marks a tombstone: the topic's schemas were deleted here.
	// A tombstone has type NONE and no data.
	Deleted bool `json:"deleted,omitempty"`
}

func encodeValue(v storedValue) ([]byte, error) {
	return meta.EncodeJSON(valueVersion, v)
}

func decodeValue(b []byte) (storedValue, error) {
	var v storedValue
	if _, err := meta.DecodeJSON(b, valueVersion, &v); err != nil {
		return v, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	h := hashOf(v.Type, v.Data)
	if v.Hash != hex.EncodeToString(h[:]) {
		return v, fmt.Errorf("%w: hash %q does not match its %v data", ErrCorrupt, v.Hash, v.Type)
	}
	return v, nil
}

// versionDigits zero-pads versions in keys so that key order is version
// order: an int64 has at most 19 digits.
const versionDigits = 20

// topicKey is the prefix-less key of a topic's schemas: one escaped
// segment holding the topic's canonical base name, as mledger keys hold the
// topic. The caller passes a base name.
func topicKey(region, base string) string {
	return meta.RegionKey(region, "schemas", base)
}

// versionKey is the key of one version.
func versionKey(region, base string, v Version) string {
	return meta.RegionKey(region, "schemas", base, fmt.Sprintf("%0*d", versionDigits, int64(v)))
}

// versionOfKey reads the version back from a key found by List.
func versionOfKey(key string) (Version, error) {
	name, err := meta.Name(key)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	n, err := strconv.ParseInt(name, 10, 64)
	if err != nil || n < 0 || len(name) != versionDigits {
		return 0, fmt.Errorf("%w: key %q does not end in a version", ErrCorrupt, key)
	}
	return Version(n), nil
}
