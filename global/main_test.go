package global

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// TestMain closes the shared etcd (metatest.Shared), then fails the run if a
// goroutine outlives the tests.
func TestMain(m *testing.M) { testkit.Main(m) }

// waitFor bounds each test's context.
const waitFor = 20 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
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
