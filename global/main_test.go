package global

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// waitFor bounds every wait in the tests.
const waitFor = 20 * time.Second

// shared is one embedded etcd member for the etcd tests, started on first
// use; every test writes under its own prefix.
var shared struct {
	once sync.Once
	e    *meta.Embed
	err  error
}

// runs numbers prefixes, unique across -count=N runs on the shared etcd.
var runs atomic.Int64

func fastEmbedConfig() meta.EmbedConfig {
	cfg := meta.DefaultEmbedConfig()
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.StartTimeout = 30 * time.Second
	cfg.Logger = nil
	return cfg
}

func sharedEtcd(t *testing.T) *meta.Embed {
	t.Helper()
	shared.once.Do(func() {
		shared.e, shared.err = meta.StartEmbed(context.Background(), fastEmbedConfig())
	})
	if shared.err != nil {
		t.Fatalf("start embedded etcd: %v", shared.err)
	}
	return shared.e
}

func dialT(t *testing.T, endpoints []string) *meta.Etcd {
	t.Helper()
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 5 * time.Second
	s, err := meta.Dial(ctxT(t), endpoints, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func newMemory(t *testing.T) *meta.Memory {
	t.Helper()
	m, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newStore is a Store over st under prefix, with a short request timeout
// so that outage tests fail fast.
func newStore(t *testing.T, st meta.Store, prefix string) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Prefix = prefix
	cfg.Logger = nil
	cfg.RequestTimeout = 2 * time.Second
	s, err := NewStore(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startCache(t *testing.T, s *Store, mod ...func(*CacheConfig)) *Cache {
	t.Helper()
	cfg := DefaultCacheConfig()
	cfg.Logger = nil
	cfg.RetryMin, cfg.RetryMax = 10*time.Millisecond, 200*time.Millisecond
	cfg.ListTimeout = 2 * time.Second
	cfg.ProbeInterval = 50 * time.Millisecond
	for _, f := range mod {
		f(&cfg)
	}
	c, err := StartCache(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually waits until cond holds, polling on a short ticker, failing
// after waitFor with what.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// must(f()).ok(t) is f's value, or fails the test with f's error.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) ok(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func wantErr(t *testing.T, what string, err error, want ...error) {
	t.Helper()
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Fatalf("%s: got error %v, want %v", what, err, w)
		}
	}
}
