// Package schema is Meridian's schema registry: the schemas a topic's
// producers and consumers agree on, with Apache Pulsar's semantics
// (SchemaRegistryService, SchemaCompatibilityStrategy, the Avro and JSON
// compatibility checks), so that pulsar-client-go and pulsaradmin see what
// a Pulsar broker would answer.
//
// # Model
//
// A topic's schemas are an append-only list of versions 0, 1, 2, …, keyed by
// the topic's base name: the partitions of a partitioned topic share their
// parent's list (persistent://t/ns/x-partition-3 uses persistent://t/ns/x's).
// A version is either a schema (Info) or a deletion tombstone. Deleting a
// topic's schemas (admin DELETE /schemas/…) appends a tombstone instead of
// removing keys, so that a version number is never reused: a message stamped
// with version 3 always means the same schema. The versions after the last
// tombstone are the topic's lineage; compatibility and "is this schema
// already registered" look at the lineage only, so a schema added after a
// delete starts afresh.
//
// # Storage and concurrency
//
// Each version is one key, RegionKey(region, "schemas", <topic>, <version
// zero-padded to 20 digits>), holding a versioned JSON value (see value.go).
// Keys sort in version order, so one List reads a topic's history. A new
// version is written with meta.Store.Create at latest+1: of two brokers (or
// admin requests) racing to add a schema, exactly one creates the key. The
// loser re-reads; if the winner registered the same schema it returns the
// winner's version, otherwise it checks its schema again, now against the
// winner's, and tries latest+1 again, at most Config.MaxCreateAttempts times.
// Re-reading after a lost race is right here, unlike for owned state
// (DESIGN §3): versions are never modified, only appended, so a retry can
// only add after the winner, never write over it, and it re-validates
// against everything the winner added.
//
// # Compatibility (Pulsar's rules)
//
//   - ALWAYS_COMPATIBLE accepts anything, even a change of type.
//   - Otherwise a schema of another type than the version it is checked
//     against is incompatible, and a schema identical to it passes.
//   - ALWAYS_INCOMPATIBLE refuses any other schema once the topic has one.
//   - AVRO and JSON (whose data is an Avro record definition, as both
//     pulsar-client-go and the Java client produce it) are parsed with
//     hamba/avro and checked with its schema resolution: BACKWARD means the
//     new schema can read data written with the existing one, FORWARD that
//     the existing one can read data written with the new, FULL both.
//   - Other types (STRING, PROTOBUF, KEY_VALUE, …) pass when the type is the
//     same, as Pulsar's default check does.
//   - BACKWARD, FORWARD and FULL check against the latest version only; the
//     _TRANSITIVE variants against every version of the lineage.
//
// Identity ("this schema is already version n") compares the type and, for
// AVRO, JSON and PROTOBUF, the parsed Avro definitions (so whitespace and key
// order do not matter), else the bytes. Properties are not part of identity,
// as in Pulsar. Identity is looked up in the whole lineage, so a producer
// with an older registered schema gets that older version without a check.
//
// # What the broker calls
//
//   - PRODUCER: ForProducer with FromProto(the command's schema), which is
//     the empty Info when the command has none. It returns the version for
//     PRODUCER_SUCCESS.schema_version (EncodeVersion; NoVersion encodes as
//     empty bytes).
//   - SUBSCRIBE: ForConsumer with the command's schema and whether the topic
//     is idle (no producers, no consumers other than AUTO_CONSUME ones, an
//     empty ledger): an idle topic without a schema takes the consumer's.
//   - GET_SCHEMA: Get (DecodeVersion of schema_version) or Latest when the
//     command has no version, answered with ToProto(Name(topic), info) and
//     EncodeVersion; ErrNotFound answers TopicNotFound, as Pulsar.
//   - GET_OR_CREATE_SCHEMA: GetOrCreate with the topic's strategy (after the
//     auto-update policy: with auto-update off, VersionOf must find it).
//   - Admin: Latest, Get, All, GetOrCreate (POST), Delete (DELETE),
//     Compatible (POST …/compatibility), VersionOf (POST …/version).
//
// Errors wrap the sentinels of errors.go; the broker maps ErrIncompatible and
// ErrInvalidSchema to ServerError IncompatibleSchema and ErrNotFound to
// TopicNotFound.
package schema
