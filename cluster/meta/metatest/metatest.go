// Package metatest is the embedded-etcd harness for the tests of the
// packages above the metadata store: a real etcd is their metadata store in
// integration tests (house rule 11). Rather than start one each, a package's
// tests share one member (Shared), each under a key prefix of its own
// (Prefix). A test that stops, restarts or loads its etcd, or writes keys
// that other tests write too, starts one of its own (Start). Dial connects a
// client, closed when the test ends.
//
// The shared member is closed after the package's tests by testkit.Main, so
// a package that uses it has
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// cluster/meta's own tests cannot import this package (it imports
// cluster/meta), and keep their harness; its external tests (package
// meta_test, the TLS and etcd authentication ones) can.
package metatest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// FastEmbedConfig is a one-member, loopback, temporary-directory etcd
// (meta.DefaultEmbedConfig) with raft made quick for loopback: heartbeats
// every 20ms and elections after 200ms, so that it is ready at once and
// etcd's minimum lease TTL (1.5 election timeouts) is well under a second.
// Its user passwords are hashed at bcrypt's lowest cost: at the default,
// checking one takes a second of CPU under the race detector. It waits up
// to 30s to be ready, and logs nothing.
func FastEmbedConfig() meta.EmbedConfig {
	cfg := meta.DefaultEmbedConfig()
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.BcryptCost = bcrypt.MinCost
	cfg.StartTimeout = 30 * time.Second
	cfg.Logger = nil
	return cfg
}

// shared is the member the tests of this test binary share.
var shared struct {
	once sync.Once
	e    *meta.Embed
	err  error
}

// Shared returns the member that the package's tests share, started with
// FastEmbedConfig on first use and closed by testkit.Main once they have
// all run. It keeps every test's keys, across -count=N runs too, so a test
// writes under Prefix, or under names of its own that no other run repeats.
func Shared(t testing.TB) *meta.Embed {
	t.Helper()
	shared.once.Do(func() {
		// Not the test's context: the member outlives the test.
		shared.e, shared.err = meta.StartEmbed(context.Background(), FastEmbedConfig())
		if shared.err == nil {
			testkit.AfterTests(shared.e.Close)
		}
	})
	if shared.err != nil {
		t.Fatalf("start the shared embedded etcd: %v", shared.err)
	}
	return shared.e
}

// Start starts a member of the test's own with cfg (FastEmbedConfig, say,
// with a DataDir to restart it on), and closes it when the test ends, after
// the clients dialled later (cleanups run last first, and etcd's graceful
// stop waits for its clients' streams). A test may Close it sooner.
func Start(t testing.TB, cfg meta.EmbedConfig) *meta.Embed {
	t.Helper()
	e, err := meta.StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close the embedded etcd: %v", err)
		}
	})
	return e
}

// Dial returns a client of the etcd at endpoints (meta.DefaultEtcdConfig,
// logging nothing), closed when the test ends. A test may Close it sooner.
func Dial(t testing.TB, endpoints []string) *meta.Etcd {
	t.Helper()
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	s, err := meta.Dial(t.Context(), endpoints, cfg)
	if err != nil {
		t.Fatalf("dial etcd at %v: %v", endpoints, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// prefixes numbers the prefixes Prefix returns.
var prefixes atomic.Int64

// Prefix returns a key prefix that no other call in the test binary
// returns, -count=N runs of the same test included: "/test/<n>/<test name>",
// with the name escaped into one segment (meta.Key). It starts with '/' and
// does not end with one.
func Prefix(t testing.TB) string {
	return meta.Key("test", strconv.FormatInt(prefixes.Add(1), 10), t.Name())
}

// Memory is an in-memory Store with the default config, closed at the end
// of the test: the store of unit tests (integration tests use an embedded
// etcd, Shared or Start).
func Memory(t testing.TB) *meta.Memory {
	t.Helper()
	m, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
