package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// waitFor bounds every test's context.
const waitFor = 30 * time.Second

// regions numbers the tests' regions, unique across -count=N runs.
var regions atomic.Int64

func uniqueRegion() string { return fmt.Sprintf("r%d", regions.Add(1)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func etcdStore(t *testing.T) meta.Store {
	t.Helper()
	return metatest.Dial(t, metatest.Shared(t).Endpoints())
}

// stores are the two Store implementations every registry test runs on.
var stores = []struct {
	name string
	open func(t *testing.T) meta.Store
}{
	{"memory", func(t *testing.T) meta.Store { return metatest.Memory(t) }},
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
