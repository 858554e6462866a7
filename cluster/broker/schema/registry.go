package schema

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Registry is one region's schema registry. It holds no state of its own:
// every call reads the metadata store, so any number of Registries (one per
// broker, plus the admin API's) serve the same topics safely, and a broker
// that takes a topic over sees every version its previous owner added. Safe
// for concurrent use.
//
// Each call costs one List of the topic's versions (Get: one Get), plus one
// Create when a version is added. Producers and consumers ask once per
// connection, not per message, so there is no cache; a broker that wants
// one for GET_SCHEMA may keep it in front, keyed by (topic, version), since
// a version never changes once written.
type Registry struct {
	store  meta.Store
	region string
	cfg    Config
	log    *slog.Logger
}

// New returns the registry of region's schemas in store.
func New(store meta.Store, region string, cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if region == "" {
		return nil, errors.New("schema: New needs a region")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{store: store, region: region, cfg: cfg, log: log.With("region", region)}, nil
}

// Entry is one version of a topic's schemas, as the admin API lists them.
type Entry struct {
	Version Version
	Info    Info
	// Added is when the version was written.
	Added time.Time
}

// baseName is the name a topic's schemas are kept under: the canonical name
// of the topic, or of the partitioned topic it is a partition of.
func baseName(topic string) (string, error) {
	t, err := topology.ParseTopicName(topic)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	return t.Base().String(), nil
}

// Name is the name Pulsar gives a topic's schemas, "tenant/namespace/topic"
// of the base topic without its domain (TopicName.getSchemaName): the name
// a GET_SCHEMA response carries (ToProto) and the admin API shows.
func Name(topic string) (string, error) {
	t, err := topology.ParseTopicName(topic)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidTopic, err)
	}
	b := t.Base()
	return b.NamespaceName() + "/" + b.Local, nil
}

// version is one stored version with its tombstone flag.
type version struct {
	Entry
	deleted bool
}

// history reads every version of base, oldest first.
func (r *Registry) history(ctx context.Context, base string) ([]version, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	kvs, _, err := r.store.List(ctx, meta.Prefix(topicKey(r.region, base)))
	if err != nil {
		return nil, fmt.Errorf("schema: read the schemas of %s: %w", base, err)
	}
	out := make([]version, 0, len(kvs))
	for _, kv := range kvs {
		v, err := r.decode(kv)
		if err != nil {
			return nil, fmt.Errorf("schema: topic %s: %w", base, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *Registry) decode(kv meta.KV) (version, error) {
	n, err := versionOfKey(kv.Key)
	if err != nil {
		return version{}, err
	}
	sv, err := decodeValue(kv.Value)
	if err != nil {
		return version{}, fmt.Errorf("version %d: %w", n, err)
	}
	return version{
		Entry: Entry{
			Version: n,
			Info:    Info{Type: sv.Type, Data: sv.Data, Properties: sv.Properties},
			Added:   time.UnixMilli(sv.Timestamp),
		},
		deleted: sv.Deleted,
	}, nil
}

// lineage returns the versions after the last tombstone, oldest first:
// the ones a new schema is compared with.
func lineage(h []version) []entry {
	var out []entry
	for _, v := range h {
		if v.deleted {
			out = out[:0]
			continue
		}
		out = append(out, entry{version: v.Version, info: v.Info})
	}
	return out
}

// next is the version the next write creates.
func next(h []version) Version {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].Version + 1
}

// Latest returns the topic's current schema and its version, or ErrNotFound
// when it has none: none was ever added, or they were deleted.
func (r *Registry) Latest(ctx context.Context, topic string) (Info, Version, error) {
	base, err := baseName(topic)
	if err != nil {
		return Info{}, NoVersion, err
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return Info{}, NoVersion, err
	}
	switch {
	case len(h) == 0:
		return Info{}, NoVersion, fmt.Errorf("%w: topic %s has no schema", ErrNotFound, base)
	case h[len(h)-1].deleted:
		return Info{}, NoVersion, fmt.Errorf("%w: the schemas of topic %s were deleted (version %d)", ErrNotFound, base, h[len(h)-1].Version)
	}
	last := h[len(h)-1]
	return last.Info, last.Version, nil
}

// Get returns version v of the topic's schemas. A version that does not
// exist, or is a tombstone, is ErrNotFound. A version before a tombstone is
// still served: messages written with it may still be read.
func (r *Registry) Get(ctx context.Context, topic string, v Version) (Info, error) {
	base, err := baseName(topic)
	if err != nil {
		return Info{}, err
	}
	if v < 0 {
		return Info{}, fmt.Errorf("%w: %d", ErrInvalidVersion, v)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	kv, err := r.store.Get(ctx, versionKey(r.region, base, v))
	if errors.Is(err, meta.ErrNotFound) {
		return Info{}, fmt.Errorf("%w: topic %s has no schema version %d", ErrNotFound, base, v)
	}
	if err != nil {
		return Info{}, fmt.Errorf("schema: read version %d of %s: %w", v, base, err)
	}
	got, err := r.decode(kv)
	if err != nil {
		return Info{}, fmt.Errorf("schema: topic %s: %w", base, err)
	}
	if got.deleted {
		return Info{}, fmt.Errorf("%w: version %d of topic %s is a deletion", ErrNotFound, v, base)
	}
	return got.Info, nil
}

// All returns the topic's current schemas, oldest first: the versions since
// the last deletion, as Pulsar's admin GET …/schemas lists them. A topic
// without schemas has none (and no error).
func (r *Registry) All(ctx context.Context, topic string) ([]Entry, error) {
	base, err := baseName(topic)
	if err != nil {
		return nil, err
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, v := range h {
		if v.deleted {
			out = out[:0]
			continue
		}
		out = append(out, v.Entry)
	}
	return out, nil
}

// VersionOf reports whether info is one of the topic's current schemas
// (same type and definition; see the package doc) and which version it is.
// It checks nothing else and writes nothing: it is the admin API's POST
// …/version and the producer path when auto-update is off.
func (r *Registry) VersionOf(ctx context.Context, topic string, info Info) (Version, bool, error) {
	base, err := baseName(topic)
	if err != nil {
		return NoVersion, false, err
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return NoVersion, false, err
	}
	v, ok := find(lineage(h), info)
	return v, ok, nil
}

// find looks info up in a lineage, newest first.
func find(l []entry, info Info) (Version, bool) {
	for i := len(l) - 1; i >= 0; i-- {
		if same(l[i].info, info) {
			return l[i].version, true
		}
	}
	return NoVersion, false
}

// Compatible reports whether info could be added to the topic's schemas
// under strategy s, without adding it: nil, or an error wrapping
// ErrIncompatible (why, and against which version), ErrInvalidSchema or
// ErrInvalidStrategy. A topic without schemas accepts any valid schema. This
// is the admin API's POST …/compatibility.
func (r *Registry) Compatible(ctx context.Context, topic string, info Info, s Strategy) error {
	base, parsed, err := r.prepare(topic, info, s)
	if err != nil {
		return err
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return err
	}
	if err := checkAgainst(targets(lineage(h), s), info, parsed, s); err != nil {
		return fmt.Errorf("topic %s: %w", base, err)
	}
	return nil
}

// CompatibleForConsumer is Pulsar's check of a subscribing consumer's
// schema against a topic that has schemas: the consumer must be able to
// read what the topic's producers write. Under BACKWARD, FORWARD, FULL and
// FORWARD_TRANSITIVE its schema is checked BACKWARD against the latest
// version; under the other strategies with the strategy itself (against the
// lineage for transitive ones). ALWAYS_COMPATIBLE accepts anything. A topic
// without schemas is ErrIncompatible: the broker decides before calling
// whether an idle topic takes the consumer's schema (ForConsumer does).
func (r *Registry) CompatibleForConsumer(ctx context.Context, topic string, info Info, s Strategy) error {
	base, parsed, err := r.prepare(topic, info, s)
	if err != nil {
		return err
	}
	if s == global.SchemaAlwaysCompatible {
		return nil
	}
	h, err := r.history(ctx, base)
	if err != nil {
		return err
	}
	l := lineage(h)
	if len(l) == 0 {
		return fmt.Errorf("%w: topic %s has no schema to check the consumer's %v schema against", ErrIncompatible, base, info.Type)
	}
	cs := consumerStrategy(s)
	if err := checkAgainst(targets(l, cs), info, parsed, cs); err != nil {
		return fmt.Errorf("topic %s: consumer schema: %w", base, err)
	}
	return nil
}

// prepare resolves the topic's base name and validates info and s.
func (r *Registry) prepare(topic string, info Info, s Strategy) (string, avro.Schema, error) {
	base, err := baseName(topic)
	if err != nil {
		return "", nil, err
	}
	if err := checkStrategy(s); err != nil {
		return "", nil, err
	}
	parsed, err := validate(info, r.cfg.MaxSchemaBytes)
	if err != nil {
		return "", nil, fmt.Errorf("topic %s: %w", base, err)
	}
	return base, parsed, nil
}

// GetOrCreate returns the version of info among the topic's current
// schemas, adding it as a new version if it is not there yet and it is
// compatible with them under strategy s (Pulsar's putSchemaIfAbsent). An
// identical schema, at any version since the last deletion, is returned
// without a check or a write. Otherwise info is checked against the latest
// version (every version since the last deletion for a transitive s), and
// written at latest+1 with a create-if-absent; see the package doc for what
// happens when another writer gets there first.
func (r *Registry) GetOrCreate(ctx context.Context, topic string, info Info, s Strategy) (Version, error) {
	base, parsed, err := r.prepare(topic, info, s)
	if err != nil {
		return NoVersion, err
	}
	for range r.cfg.MaxCreateAttempts {
		h, err := r.history(ctx, base)
		if err != nil {
			return NoVersion, err
		}
		l := lineage(h)
		if v, ok := find(l, info); ok {
			return v, nil
		}
		if err := checkAgainst(targets(l, s), info, parsed, s); err != nil {
			return NoVersion, fmt.Errorf("topic %s: %w", base, err)
		}
		v := next(h)
		err = r.create(ctx, base, v, storedValue{Type: info.Type, Data: info.Data, Properties: info.Properties})
		if errors.Is(err, meta.ErrExists) {
			continue // another writer added version v first: look again
		}
		if err != nil {
			return NoVersion, err
		}
		r.log.Info("schema added", "topic", base, "version", int64(v), "type", info.Type.String(), "strategy", string(s))
		return v, nil
	}
	return NoVersion, fmt.Errorf("%w: topic %s: gave up after %d attempts", ErrConflict, base, r.cfg.MaxCreateAttempts)
}

// Delete deletes the topic's schemas by adding a tombstone version, and
// returns its version (the admin API's DELETE …/schema). Later schemas start
// a new lineage, checked against nothing before the tombstone; the versions
// before it stay readable by number. A topic that has no schema is
// ErrNotFound; one whose schemas are already deleted returns the existing
// tombstone and writes nothing.
func (r *Registry) Delete(ctx context.Context, topic string) (Version, error) {
	base, err := baseName(topic)
	if err != nil {
		return NoVersion, err
	}
	for range r.cfg.MaxCreateAttempts {
		h, err := r.history(ctx, base)
		if err != nil {
			return NoVersion, err
		}
		if len(h) == 0 {
			return NoVersion, fmt.Errorf("%w: topic %s has no schema to delete", ErrNotFound, base)
		}
		if last := h[len(h)-1]; last.deleted {
			return last.Version, nil
		}
		v := next(h)
		err = r.create(ctx, base, v, storedValue{Type: None, Deleted: true})
		if errors.Is(err, meta.ErrExists) {
			continue
		}
		if err != nil {
			return NoVersion, err
		}
		r.log.Info("schemas deleted", "topic", base, "version", int64(v))
		return v, nil
	}
	return NoVersion, fmt.Errorf("%w: topic %s: gave up after %d attempts", ErrConflict, base, r.cfg.MaxCreateAttempts)
}

// create writes version v if it does not exist yet, or returns
// meta.ErrExists.
func (r *Registry) create(ctx context.Context, base string, v Version, sv storedValue) error {
	sv.Timestamp = r.cfg.Now().UnixMilli()
	h := hashOf(sv.Type, sv.Data)
	sv.Hash = hex.EncodeToString(h[:])
	b, err := encodeValue(sv)
	if err != nil {
		return fmt.Errorf("schema: topic %s version %d: %w", base, v, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.store.Create(ctx, versionKey(r.region, base, v), b, meta.NoLease); err != nil {
		if errors.Is(err, meta.ErrExists) {
			return err
		}
		return fmt.Errorf("schema: write version %d of %s: %w", v, base, err)
	}
	return nil
}
