package schema

import "errors"

// Sentinel errors. Every error the registry returns wraps one of these, a
// meta error (the store was unreachable or closed) or a context error. The
// broker maps them onto wire codes (Pulsar's getClientErrorCode):
// ErrIncompatible and ErrInvalidSchema → IncompatibleSchema, ErrNotFound →
// TopicNotFound (GET_SCHEMA); the admin API onto HTTP: ErrNotFound → 404,
// ErrIncompatible → 409, ErrInvalidSchema, ErrInvalidStrategy and
// ErrInvalidVersion → 400 (422 for ErrInvalidSchema, as Pulsar's admin does),
// ErrConflict → 409, ErrCorrupt → 500.
var (
	// ErrNotFound: the topic has no schema (none was ever added, or the
	// latest version is a deletion tombstone), or the requested version does
	// not exist or is a tombstone.
	ErrNotFound = errors.New("schema: not found")
	// ErrIncompatible: the schema may not follow the topic's existing ones
	// under the compatibility strategy. The message says which version it
	// was checked against and why; change the schema (add fields with
	// defaults, keep the type) or the namespace's strategy.
	ErrIncompatible = errors.New("schema: incompatible")
	// ErrInvalidSchema: the schema cannot be stored: its AVRO or JSON
	// definition does not parse, a primitive type carries data, the type is
	// AUTO_* (a client-side placeholder, never a stored schema) or the data
	// is larger than Config.MaxSchemaBytes.
	ErrInvalidSchema = errors.New("schema: invalid schema")
	// ErrInvalidStrategy: the strategy is not one of Pulsar's, or is
	// UNDEFINED. Resolve the topic's effective policy first (global.Resolve
	// falls back to the broker default).
	ErrInvalidStrategy = errors.New("schema: invalid compatibility strategy")
	// ErrInvalidVersion: schema-version bytes that are not Pulsar's 8-byte
	// big-endian form, or a negative version.
	ErrInvalidVersion = errors.New("schema: invalid schema version")
	// ErrInvalidTopic: the topic name does not parse (topology.ParseTopicName).
	ErrInvalidTopic = errors.New("schema: invalid topic name")
	// ErrConflict: other writers kept adding versions while this call tried
	// to add one, more than Config.MaxCreateAttempts times. Retry.
	ErrConflict = errors.New("schema: too many concurrent schema updates")
	// ErrCorrupt: a stored version does not decode or fails its hash. It is
	// never served; repair or delete the key.
	ErrCorrupt = errors.New("schema: corrupt stored schema")
)
