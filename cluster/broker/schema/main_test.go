package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/meridian-mq/meridian/cluster/meta"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The shared etcd outlives the tests that use it; stop it before
	// looking for leaked goroutines.
	if shared.e != nil {
		if err := shared.e.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the shared etcd:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitFor bounds every test's context.
const waitFor = 30 * time.Second

// shared is one embedded etcd member for the etcd tests, started on first
// use; every test writes under a region of its own.
var shared struct {
	once sync.Once
	e    *meta.Embed
	err  error
}

// regions numbers the tests' regions, unique across -count=N runs.
var regions atomic.Int64

func uniqueRegion() string { return fmt.Sprintf("r%d", regions.Add(1)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func memoryStore(t *testing.T) meta.Store {
	t.Helper()
	m, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func etcdStore(t *testing.T) meta.Store {
	t.Helper()
	shared.once.Do(func() {
		cfg := meta.DefaultEmbedConfig()
		cfg.HeartbeatInterval = 20 * time.Millisecond
		cfg.ElectionTimeout = 200 * time.Millisecond
		cfg.StartTimeout = 30 * time.Second
		cfg.Logger = nil
		shared.e, shared.err = meta.StartEmbed(context.Background(), cfg)
	})
	if shared.err != nil {
		t.Fatalf("start embedded etcd: %v", shared.err)
	}
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 5 * time.Second
	s, err := meta.Dial(ctxT(t), shared.e.Endpoints(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stores are the two Store implementations every registry test runs on.
var stores = []struct {
	name string
	open func(t *testing.T) meta.Store
}{
	{"memory", memoryStore},
	{"etcd", etcdStore},
}

func newRegistry(t *testing.T, st meta.Store, region string) *Registry {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Logger = nil
	cfg.RequestTimeout = 5 * time.Second
	r, err := New(st, region, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// clientDef returns an Avro definition the way pulsar-client-go puts it in
// SchemaInfo.Schema for NewAvroSchema and NewJSONSchema: parsed with
// hamba/avro and marshalled back.
func clientDef(t testing.TB, def string) []byte {
	t.Helper()
	s, err := avro.ParseWithCache(def, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatalf("parse %s: %v", def, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// record is an Avro record "test.Example" with the given fields (JSON
// field objects, comma-separated).
func record(fields string) string {
	return `{"type":"record","name":"Example","namespace":"test","fields":[` + fields + `]}`
}

const (
	fID        = `{"name":"ID","type":"int"}`
	fIDLong    = `{"name":"ID","type":"long"}`
	fName      = `{"name":"Name","type":"string"}`
	fNameDef   = `{"name":"Name","type":"string","default":""}`
	fAgeDef    = `{"name":"Age","type":"int","default":0}`
	fAge       = `{"name":"Age","type":"int"}`
	fFull      = `{"name":"FullName","type":"string"}`
	fFullAlias = `{"name":"FullName","type":"string","aliases":["Name"]}`
)

func avroInfo(t testing.TB, def string) Info {
	return Info{Type: Avro, Data: clientDef(t, def)}
}

func jsonInfo(t testing.TB, def string) Info {
	return Info{Type: JSON, Data: clientDef(t, def)}
}
