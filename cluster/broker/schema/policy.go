package schema

import (
	"context"
	"fmt"
)

// Policy is what a topic's policies say about schemas.
type Policy struct {
	// Strategy is the topic's effective schemaCompatibilityStrategy
	// (global.Effective.SchemaCompatibilityStrategy).
	Strategy Strategy
	// AllowAutoUpdate is Pulsar's isAllowAutoUpdateSchema (default true):
	// a producer or idle-topic consumer may register a schema the topic does
	// not have yet. When false, only already registered schemas connect.
	AllowAutoUpdate bool
	// ValidationEnforced is Pulsar's schemaValidationEnforced (default
	// false): producers without a schema are refused on a topic that has
	// one.
	ValidationEnforced bool
}

// DefaultPolicy is Pulsar's default for a topic whose strategy is s:
// auto-update allowed, validation not enforced.
func DefaultPolicy(s Strategy) Policy {
	return Policy{Strategy: s, AllowAutoUpdate: true}
}

// AllowsNoSchema reports whether a producer without a schema (none in the
// PRODUCER command, or NONE/BYTES) may publish to the topic. Pulsar allows
// it unless the topic has a schema and schemaValidationEnforced is set: raw
// bytes on a schema'd topic are the producer's business by default.
func (r *Registry) AllowsNoSchema(ctx context.Context, topic string, validationEnforced bool) (bool, error) {
	if !validationEnforced {
		return true, nil
	}
	has, err := r.hasSchema(ctx, topic)
	return !has, err
}

// hasSchema reports whether the topic has a schema now (Pulsar's
// hasSchema: a latest version that is not a tombstone).
func (r *Registry) hasSchema(ctx context.Context, topic string) (bool, error) {
	base, err := baseName(topic)
	if err != nil {
		return false, err
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return false, err
	}
	return len(h) > 0 && !h[len(h)-1].deleted, nil
}

// ForProducer decides a PRODUCER command's schema, as Pulsar's broker does,
// and returns the version for PRODUCER_SUCCESS.schema_version
// (EncodeVersion):
//
//   - no schema (info.IsEmpty()): NoVersion, unless AllowsNoSchema refuses
//     (ErrIncompatible);
//   - AllowAutoUpdate: GetOrCreate with p.Strategy;
//   - otherwise the schema must be registered already (VersionOf), else
//     ErrIncompatible.
func (r *Registry) ForProducer(ctx context.Context, topic string, info Info, p Policy) (Version, error) {
	if info.IsEmpty() {
		ok, err := r.AllowsNoSchema(ctx, topic, p.ValidationEnforced)
		if err != nil {
			return NoVersion, err
		}
		if !ok {
			return NoVersion, fmt.Errorf("%w: topic %s has a schema and enforces schema validation: a producer must declare a schema to connect", ErrIncompatible, topic)
		}
		return NoVersion, nil
	}
	return r.register(ctx, topic, info, p)
}

// register adds info under p, or with auto-update off, finds it.
func (r *Registry) register(ctx context.Context, topic string, info Info, p Policy) (Version, error) {
	if p.AllowAutoUpdate {
		return r.GetOrCreate(ctx, topic, info, p.Strategy)
	}
	if _, _, err := r.prepare(topic, info, p.Strategy); err != nil {
		return NoVersion, err
	}
	v, ok, err := r.VersionOf(ctx, topic, info)
	if err != nil {
		return NoVersion, err
	}
	if !ok {
		return NoVersion, fmt.Errorf("%w: topic %s: the %v schema is not registered and schema auto-update is disabled; register it through the admin API", ErrIncompatible, topic, info.Type)
	}
	return v, nil
}

// ForConsumer decides a SUBSCRIBE command's schema, as Pulsar's
// addSchemaIfIdleOrCheckCompatible does:
//
//   - no schema, NONE, BYTES or AUTO_CONSUME: accepted, nothing checked
//     (an AUTO_CONSUME consumer takes whatever the topic has);
//   - a topic with no schema that is idle (the broker knows: no producers,
//     no consumers other than AUTO_CONSUME ones, an empty ledger) takes the
//     consumer's schema as a producer's would be taken (ForProducer's
//     rules, without the NONE case);
//   - otherwise CompatibleForConsumer.
func (r *Registry) ForConsumer(ctx context.Context, topic string, info Info, p Policy, idle bool) error {
	if info.IsEmpty() || info.Type == AutoConsume {
		return nil
	}
	if idle {
		has, err := r.hasSchema(ctx, topic)
		if err != nil {
			return err
		}
		if !has {
			_, err := r.register(ctx, topic, info, p)
			return err
		}
	}
	return r.CompatibleForConsumer(ctx, topic, info, p.Strategy)
}
