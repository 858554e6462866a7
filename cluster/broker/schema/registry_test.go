package schema

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
)

// forEachStore runs f on the in-memory store and on an embedded etcd, each
// with a region of its own.
func forEachStore(t *testing.T, f func(t *testing.T, st meta.Store, region string)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { f(t, s.open(t), uniqueRegion()) })
	}
}

const topic = "persistent://acme/ns/orders"

func TestCreateAndRead(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		if _, _, err := r.Latest(ctx, topic); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Latest before any schema: %v, want ErrNotFound", err)
		}
		v0 := avroInfo(t, record(fID+","+fName))
		v0.Properties = map[string]string{"owner": "team-a"}
		v, err := r.GetOrCreate(ctx, topic, v0, global.SchemaFull)
		if err != nil || v != 0 {
			t.Fatalf("first schema: version %d, %v; want 0", v, err)
		}
		info, v, err := r.Latest(ctx, topic)
		if err != nil || v != 0 || !same(info, v0) || info.Properties["owner"] != "team-a" {
			t.Fatalf("Latest = %+v, %d, %v", info, v, err)
		}
		got, err := r.Get(ctx, topic, 0)
		if err != nil || string(got.Data) != string(v0.Data) || got.Type != Avro {
			t.Fatalf("Get(0) = %+v, %v", got, err)
		}
		if _, err := r.Get(ctx, topic, 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(1): %v, want ErrNotFound", err)
		}
		if v, ok, err := r.VersionOf(ctx, topic, v0); err != nil || !ok || v != 0 {
			t.Fatalf("VersionOf = %d, %v, %v", v, ok, err)
		}
		all, err := r.All(ctx, topic)
		if err != nil || len(all) != 1 || all[0].Version != 0 || all[0].Added.IsZero() {
			t.Fatalf("All = %+v, %v", all, err)
		}
	})
}

func TestIdenticalSchemaKeepsItsVersion(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		v0 := avroInfo(t, record(fID+","+fName))
		v1 := avroInfo(t, record(fID+","+fName+","+fAgeDef))
		for i, info := range []Info{v0, v1} {
			if v, err := r.GetOrCreate(ctx, topic, info, global.SchemaFull); err != nil || v != Version(i) {
				t.Fatalf("schema %d: version %d, %v", i, v, err)
			}
		}
		// The same definition spelled differently, and with other
		// properties, is still version 0: an older version is found too.
		respelled := Info{Type: Avro, Data: []byte("  " + record(fID+","+fName) + "\n"), Properties: map[string]string{"x": "y"}}
		for _, info := range []Info{v0, respelled} {
			if v, err := r.GetOrCreate(ctx, topic, info, global.SchemaAlwaysIncompatible); err != nil || v != 0 {
				t.Fatalf("identical schema: version %d, %v; want 0", v, err)
			}
		}
		if all, _ := r.All(ctx, topic); len(all) != 2 {
			t.Fatalf("identical schemas wrote new versions: %d versions", len(all))
		}
	})
}

func TestIncompatibleRefused(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		mustCreate(t, r, avroInfo(t, record(fID+","+fName)), global.SchemaFull, 0)
		mustCreate(t, r, avroInfo(t, record(fID+","+fName+","+fAgeDef)), global.SchemaFull, 1)
		bad := avroInfo(t, record(fID+","+fName+","+fAgeDef+`,{"name":"Email","type":"string"}`))
		_, err := r.GetOrCreate(ctx, topic, bad, global.SchemaFull)
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "version 1") {
			t.Fatalf("GetOrCreate: %v, want ErrIncompatible naming version 1", err)
		}
		if err := r.Compatible(ctx, topic, bad, global.SchemaFull); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("Compatible: %v", err)
		}
		if err := r.Compatible(ctx, topic, bad, global.SchemaForward); err != nil {
			t.Fatalf("Compatible under FORWARD: %v", err)
		}
		if _, err := r.GetOrCreate(ctx, topic, jsonInfo(t, record(fID)), global.SchemaFull); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("type change: %v", err)
		}
		if _, err := r.GetOrCreate(ctx, topic, Info{Type: Avro, Data: []byte("{")}, global.SchemaFull); !errors.Is(err, ErrInvalidSchema) {
			t.Fatalf("unparsable: %v", err)
		}
		if _, err := r.GetOrCreate(ctx, topic, bad, global.SchemaUndefined); !errors.Is(err, ErrInvalidStrategy) {
			t.Fatalf("UNDEFINED: %v", err)
		}
		if _, v, _ := r.Latest(ctx, topic); v != 1 {
			t.Fatalf("a refused schema was written: latest is %d", v)
		}
		// BACKWARD_TRANSITIVE looks past the latest version: Age without a
		// default reads v1's data, not v0's.
		noDefault := avroInfo(t, record(fID+","+fName+","+fAge))
		if _, err := r.GetOrCreate(ctx, topic, noDefault, global.SchemaBackwardTransitive); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "version 0") {
			t.Fatalf("BACKWARD_TRANSITIVE: %v, want ErrIncompatible naming version 0", err)
		}
		mustCreate(t, r, noDefault, global.SchemaBackward, 2)
	})
}

func TestPartitionsShareSchemas(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		info := avroInfo(t, record(fID))
		if v, err := r.GetOrCreate(ctx, "persistent://acme/ns/x-partition-3", info, global.SchemaFull); err != nil || v != 0 {
			t.Fatalf("GetOrCreate on a partition: %d, %v", v, err)
		}
		for _, name := range []string{"persistent://acme/ns/x", "acme/ns/x-partition-0", "persistent://acme/ns/x-partition-7"} {
			got, v, err := r.Latest(ctx, name)
			if err != nil || v != 0 || !same(got, info) {
				t.Fatalf("Latest(%s) = %d, %v", name, v, err)
			}
		}
		// A short name is persistent://public/default/…; another topic
		// whose name extends this one's shares nothing.
		if _, _, err := r.Latest(ctx, "persistent://acme/ns/x2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("x2 sees x's schemas: %v", err)
		}
		mustCreate(t, r, info, global.SchemaFull, 0) // acme/ns/orders: a lineage of its own
		if _, err := r.GetOrCreate(ctx, "not a/valid//name", info, global.SchemaFull); !errors.Is(err, ErrInvalidTopic) {
			t.Fatalf("bad topic name: %v", err)
		}
	})
}

func TestDeleteStartsANewLineage(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		if _, err := r.Delete(ctx, topic); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Delete with no schema: %v", err)
		}
		old := avroInfo(t, record(fID+","+fName))
		mustCreate(t, r, old, global.SchemaFull, 0)
		mustCreate(t, r, avroInfo(t, record(fID+","+fName+","+fAgeDef)), global.SchemaFull, 1)
		v, err := r.Delete(ctx, topic)
		if err != nil || v != 2 {
			t.Fatalf("Delete = %d, %v; want the tombstone at 2", v, err)
		}
		if v, err := r.Delete(ctx, topic); err != nil || v != 2 {
			t.Fatalf("second Delete = %d, %v; want the same tombstone", v, err)
		}
		if _, _, err := r.Latest(ctx, topic); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Latest after Delete: %v", err)
		}
		if _, err := r.Get(ctx, topic, 2); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(tombstone): %v", err)
		}
		if _, err := r.Get(ctx, topic, 0); err != nil {
			t.Fatalf("a version before the tombstone must stay readable: %v", err)
		}
		if all, err := r.All(ctx, topic); err != nil || len(all) != 0 {
			t.Fatalf("All after Delete = %v, %v", all, err)
		}
		if _, ok, _ := r.VersionOf(ctx, topic, old); ok {
			t.Fatal("VersionOf finds a schema from before the tombstone")
		}
		// A schema of another type, incompatible with everything before,
		// starts the new lineage at 3; the old schema after it is checked
		// against it only, and refused.
		fresh := Info{Type: String}
		mustCreate(t, r, fresh, global.SchemaAlwaysIncompatible, 3)
		if _, err := r.GetOrCreate(ctx, topic, old, global.SchemaFull); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("old schema after the new lineage: %v", err)
		}
		all, err := r.All(ctx, topic)
		if err != nil || len(all) != 1 || all[0].Version != 3 {
			t.Fatalf("All = %+v, %v", all, err)
		}
	})
}

// TestConcurrentDifferentSchemas: brokers adding different compatible
// schemas at once each get a version of their own, with no gap.
func TestConcurrentDifferentSchemas(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		mustCreate(t, newRegistry(t, st, region), avroInfo(t, record(fID)), global.SchemaFull, 0)
		const n = 6
		versions := make([]Version, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			r := newRegistry(t, st, region) // one registry per broker
			info := avroInfo(t, record(fID+fmt.Sprintf(`,{"name":"F%d","type":"int","default":0}`, i)))
			wg.Go(func() { versions[i], errs[i] = r.GetOrCreate(ctx, topic, info, global.SchemaFull) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		slices.Sort(versions)
		if want := []Version{1, 2, 3, 4, 5, 6}; !slices.Equal(versions, want) {
			t.Fatalf("versions %v, want %v", versions, want)
		}
	})
}

// TestConcurrentSameSchema: brokers adding the same schema at once settle
// on one version, written once.
func TestConcurrentSameSchema(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		info := avroInfo(t, record(fID+","+fName))
		const n = 6
		versions := make([]Version, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			r := newRegistry(t, st, region)
			wg.Go(func() { versions[i], errs[i] = r.GetOrCreate(ctx, topic, info, global.SchemaFull) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil || versions[i] != 0 {
				t.Fatalf("writer %d: version %d, %v", i, versions[i], errs[i])
			}
		}
		kvs, _, err := st.List(ctx, meta.Prefix(topicKey(region, topic)))
		if err != nil || len(kvs) != 1 {
			t.Fatalf("%d versions stored (%v), want 1", len(kvs), err)
		}
	})
}

func TestProducerAndConsumerRules(t *testing.T) {
	forEachStore(t, func(t *testing.T, st meta.Store, region string) {
		ctx := ctxT(t)
		r := newRegistry(t, st, region)
		full := DefaultPolicy(global.SchemaFull)
		enforced := full
		enforced.ValidationEnforced = true
		noAuto := full
		noAuto.AllowAutoUpdate = false
		v0 := avroInfo(t, record(fID+","+fName))

		// No schema on a topic without one: always fine.
		if v, err := r.ForProducer(ctx, topic, Info{}, enforced); err != nil || v != NoVersion {
			t.Fatalf("no schema, no topic schema: %d, %v", v, err)
		}
		// Auto-update off: nothing registered, so refused.
		if _, err := r.ForProducer(ctx, topic, v0, noAuto); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("auto-update off: %v", err)
		}
		// An idle topic takes a consumer's schema.
		if err := r.ForConsumer(ctx, topic, v0, full, true); err != nil {
			t.Fatalf("idle consumer: %v", err)
		}
		if v, err := r.ForProducer(ctx, topic, v0, noAuto); err != nil || v != 0 {
			t.Fatalf("registered schema with auto-update off: %d, %v", v, err)
		}
		// No schema on a topic with one: refused only when enforced.
		if v, err := r.ForProducer(ctx, topic, Info{Type: Bytes}, full); err != nil || v != NoVersion {
			t.Fatalf("bytes producer: %d, %v", v, err)
		}
		if _, err := r.ForProducer(ctx, topic, Info{Type: None}, enforced); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("enforced: %v", err)
		}
		if ok, err := r.AllowsNoSchema(ctx, topic, true); err != nil || ok {
			t.Fatalf("AllowsNoSchema(enforced) = %v, %v", ok, err)
		}
		v1 := avroInfo(t, record(fID+","+fName+","+fAgeDef))
		if v, err := r.ForProducer(ctx, topic, v1, full); err != nil || v != 1 {
			t.Fatalf("compatible producer: %d, %v", v, err)
		}
		// Consumers: AUTO_CONSUME and no schema pass; an old reader passes
		// BACKWARD against the latest under FULL (it ignores Age), and a
		// reader needing a field producers never wrote does not.
		for _, info := range []Info{{}, {Type: AutoConsume}, v0} {
			if err := r.ForConsumer(ctx, topic, info, full, false); err != nil {
				t.Fatalf("consumer %v: %v", info.Type, err)
			}
		}
		needsEmail := avroInfo(t, record(fID+","+fName+`,{"name":"Email","type":"string"}`))
		if err := r.ForConsumer(ctx, topic, needsEmail, full, true); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("consumer needing Email: %v", err)
		}
		if err := r.ForConsumer(ctx, topic, needsEmail, DefaultPolicy(global.SchemaAlwaysCompatible), false); err != nil {
			t.Fatalf("ALWAYS_COMPATIBLE consumer: %v", err)
		}
		if err := r.CompatibleForConsumer(ctx, "persistent://acme/ns/empty", v0, global.SchemaFull); !errors.Is(err, ErrIncompatible) {
			t.Fatalf("consumer on a topic with no schema: %v", err)
		}
	})
}

// TestCorruptValueRefused: a damaged version is an error, never served.
func TestCorruptValueRefused(t *testing.T) {
	ctx := ctxT(t)
	st := metatest.Memory(t)
	r := newRegistry(t, st, "r")
	mustCreate(t, r, avroInfo(t, record(fID)), global.SchemaFull, 0)
	kv, err := st.Get(ctx, versionKey("r", topic, 0))
	if err != nil {
		t.Fatal(err)
	}
	damaged := strings.Replace(string(kv.Value), `"type":"AVRO"`, `"type":"JSON"`, 1)
	if _, err := st.Update(ctx, kv.Key, []byte(damaged), kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, topic, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get: %v, want ErrCorrupt", err)
	}
	if _, _, err := r.Latest(ctx, topic); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Latest: %v, want ErrCorrupt", err)
	}
	if _, err := st.Create(ctx, versionKey("r", topic, 1), []byte(`{"v":2}`), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, topic, 1); !errors.Is(err, ErrCorrupt) || !errors.Is(err, meta.ErrValueVersion) {
		t.Fatalf("newer value format: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Config){
		"tiny schemas":  func(c *Config) { c.MaxSchemaBytes = 10 },
		"huge schemas":  func(c *Config) { c.MaxSchemaBytes = 2 << 20 },
		"no attempts":   func(c *Config) { c.MaxCreateAttempts = 0 },
		"short timeout": func(c *Config) { c.RequestTimeout = 0 },
		"no clock":      func(c *Config) { c.Now = nil },
	} {
		c := DefaultConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

func mustCreate(t *testing.T, r *Registry, info Info, s Strategy, want Version) {
	t.Helper()
	mustCreateOn(t, r, topic, info, s, want)
}

func mustCreateOn(t *testing.T, r *Registry, name string, info Info, s Strategy, want Version) {
	t.Helper()
	v, err := r.GetOrCreate(ctxT(t), name, info, s)
	if err != nil || v != want {
		t.Fatalf("GetOrCreate(%s, %v): version %d, %v; want %d", name, info.Type, v, err, want)
	}
}
