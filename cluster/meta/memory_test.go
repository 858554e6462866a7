package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func newTestMemory(t *testing.T, clock clockwork.Clock, history int) *Memory {
	t.Helper()
	cfg := DefaultMemoryConfig()
	cfg.Clock = clock
	cfg.HistoryLimit = history
	m, err := NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemoryContract(t *testing.T) {
	clock := clockwork.NewFakeClock()
	runContract(t, harness{
		newStore: func(t *testing.T) Store { return newTestMemory(t, clock, 1000) },
		ttl:      5 * time.Second,
		elapse:   clock.Advance,
		compact:  func(_ *testing.T, s Store, rev int64) { s.(*Memory).Compact(rev) },
	})
}

func TestMemoryConfigValidate(t *testing.T) {
	if err := DefaultMemoryConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if _, err := NewMemory(MemoryConfig{HistoryLimit: 0}); err == nil {
		t.Fatal("HistoryLimit 0 accepted")
	}
	if _, err := NewMemory(MemoryConfig{HistoryLimit: 1}); err == nil {
		t.Fatal("no Clock accepted")
	}
}

// A lease expired on the server's side (Expire) deletes its keys at once and
// ends its holder's lease, without any time passing.
func TestMemoryExpire(t *testing.T) {
	m := newTestMemory(t, clockwork.NewFakeClock(), 100)
	defer m.Close()
	ctx := t.Context()
	l, err := m.Grant(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "/k", nil, l.ID()); err != nil {
		t.Fatal(err)
	}
	if !m.Expire(l.ID()) {
		t.Fatal("Expire found no lease")
	}
	if !closed(l.Done()) {
		t.Fatal("Done open after Expire")
	}
	if _, err := m.Get(ctx, "/k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Expire: %v", err)
	}
	if m.Expire(l.ID()) {
		t.Fatal("Expire of an expired lease reported true")
	}
}

// A watcher that does not read falls behind the bounded history and gets
// ErrCompacted instead of holding memory without bound.
func TestMemorySlowWatcherCompacted(t *testing.T) {
	m := newTestMemory(t, clockwork.NewFakeClock(), 4)
	defer m.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rev, err := m.Create(ctx, "/k", []byte("0"), NoLease)
	if err != nil {
		t.Fatal(err)
	}
	ch := m.Watch(ctx, "/", rev)
	for i := range 10 {
		if rev, err = m.Update(ctx, "/k", []byte{byte('1' + i)}, rev); err != nil {
			t.Fatal(err)
		}
	}
	var last WatchResponse
	for r := range ch {
		last = r
	}
	if !errors.Is(last.Err, ErrCompacted) {
		t.Fatalf("slow watcher ended with %+v, want ErrCompacted", last)
	}
	if m.Revision() != rev {
		t.Fatalf("Revision() = %d, want %d", m.Revision(), rev)
	}
}
