package mledger

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// ledgerKeysStore watches the store operations on ledger metadata: it
// counts the ledger records created, and, once hold is called, holds every
// delete of a ledger record until release, as an etcd that has stopped
// answering would. A held delete ignores its context: it models a call
// that does not come back, which nothing may wait for.
type ledgerKeysStore struct {
	meta.Store
	prefix  string
	creates atomic.Int64

	mu       sync.Mutex
	holding  bool
	released chan struct{}
	held     chan string // each delete as it is held
}

func newLedgerKeysStore(s meta.Store) *ledgerKeysStore {
	return &ledgerKeysStore{
		Store:    s,
		prefix:   strings.TrimSuffix(ledger.LedgerKey(region, 0), "0"),
		released: make(chan struct{}),
		held:     make(chan string, 1000),
	}
}

func (s *ledgerKeysStore) hold() {
	s.mu.Lock()
	s.holding = true
	s.mu.Unlock()
}

// release lets every held delete, and every later one, through.
func (s *ledgerKeysStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding {
		s.holding = false
		close(s.released)
	}
}

func (s *ledgerKeysStore) Create(ctx context.Context, key string, value []byte, lease meta.LeaseID) (int64, error) {
	if strings.HasPrefix(key, s.prefix) {
		s.creates.Add(1)
	}
	return s.Store.Create(ctx, key, value, lease)
}

func (s *ledgerKeysStore) Delete(ctx context.Context, key string, modRev int64) error {
	s.mu.Lock()
	holding := s.holding && strings.HasPrefix(key, s.prefix)
	s.mu.Unlock()
	if holding {
		s.held <- key
		<-s.released
	}
	return s.Store.Delete(ctx, key, modRev)
}

func newLedgerKeysEnv(t *testing.T) (*env, *ledgerKeysStore) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	s := newLedgerKeysStore(mem)
	return newEnvOn(t, s, 3), s
}

// TestRetentionNeverHoldsUpAppends: a ledger delete held in the store
// during a rollover holds up no append. Appends go on through four more
// rollovers while it is held, retention keeps dropping ledgers from the
// list meanwhile, and they are all deleted once the store lets go.
func TestRetentionNeverHoldsUpAppends(t *testing.T) {
	e, s := newLedgerKeysEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 10
	cfg.RetentionTime, cfg.RetentionSize = 0, 0 // no cursor: every closed ledger goes
	f := e.factory("a", cfg)
	ml := e.open(f, "held-delete")
	t.Cleanup(s.release) // before the factory closes: cleanups run last first
	s.hold()
	first := ml.Ledgers()[0]
	const total = 55
	appended := appendInBackground(t.Context(), t, ml, total, 0)
	// The bound only ends a failing run: appends that wait for the held
	// delete never finish before the release.
	select {
	case key := <-s.held:
		if key != ledger.LedgerKey(region, first) {
			t.Fatalf("held a delete of %s, want ledger %d's", key, first)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("retention never deleted the first ledger")
	}
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("appends stalled behind a held ledger delete")
	}
	// Retention went on dropping the closed ledgers from the list: the
	// record is written before the deletes, which wait behind the held one.
	testkit.WaitFor(t, "retention to drop the closed ledgers from the list", func() bool { return len(ml.Ledgers()) == 1 })
	if _, err := f.client.Metadata(t.Context(), first); err != nil {
		t.Fatalf("the held ledger's metadata is gone before the release: %v", err)
	}
	s.release()
	// The dropped ledgers (the first and the four after it; the topic's
	// are the only ledgers of this store) are deleted once the store
	// answers again.
	testkit.WaitFor(t, "the dropped ledgers' deletion", func() bool {
		for id := first; id < ml.Ledgers()[0]; id++ {
			if _, err := f.client.Metadata(t.Context(), id); !errors.Is(err, ledger.ErrLedgerNotFound) {
				return false
			}
		}
		return true
	})
	if got := len(readAll(t, ml)); got != total%10 {
		t.Fatalf("read %d entries from the last ledger, want %d", got, total%10)
	}
}

// TestNextLedgerCreatedAhead: once the ledger being written is three
// quarters full, the owner creates the next one; the rollover then starts
// it without creating a ledger itself, and one left unused is deleted when
// the topic closes.
func TestNextLedgerCreatedAhead(t *testing.T) {
	e, s := newLedgerKeysEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 8
	f := e.factory("a", cfg)
	ml := e.open(f, "ahead")
	ahead := func() int64 {
		ml.next.mu.Lock()
		defer ml.next.mu.Unlock()
		if ml.next.w == nil {
			return 0
		}
		return ml.next.w.ID()
	}
	appendN := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(0, 5)
	settle(t, ml)
	if id := ahead(); id != 0 {
		t.Fatalf("ledger %d created ahead at 5 of 8 entries", id)
	}
	appendN(5, 1) // 6 of 8: three quarters
	testkit.WaitFor(t, "the next ledger to be created ahead", func() bool { return ahead() != 0 })
	next := ahead()
	creates := s.creates.Load()
	appendN(6, 2) // the 8th rolls over
	if got := ml.Ledgers(); len(got) != 2 || got[1] != next {
		t.Fatalf("ledgers %v after the rollover, want the one made ahead, %d, last", got, next)
	}
	if n := s.creates.Load() - creates; n != 0 {
		t.Fatalf("the rollover created %d ledgers with one made ahead", n)
	}
	appendN(8, 6)
	testkit.WaitFor(t, "the next ledger to be created ahead", func() bool { return ahead() != 0 })
	unused := ahead()
	if err := ml.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Metadata(t.Context(), unused); !errors.Is(err, ledger.ErrLedgerNotFound) {
		t.Fatalf("the unused ledger made ahead, %d, is left after close: %v", unused, err)
	}
	ml = e.open(f, "ahead")
	if got := len(readAll(t, ml)); got != 14 {
		t.Fatalf("read %d entries after reopening, want 14", got)
	}
}

// TestHousekeepingOnTheClock: the housekeeping ticker runs on the
// factory's clock, so moving a fake clock past a ledger's maximum age rolls
// it over with no append.
func TestHousekeepingOnTheClock(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.HousekeepingInterval = time.Minute
	cfg.MaxLedgerRolloverTime = 10 * time.Minute
	cfg.MinLedgerRolloverTime = 0
	ml := e.open(e.factory("a", cfg), "aged")
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 0, 1, 0), 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(9 * time.Minute)
	settle(t, ml)
	if n := len(ml.Ledgers()); n != 1 {
		t.Fatalf("%d ledgers before the maximum age, want 1", n)
	}
	e.clock.Advance(time.Minute)
	testkit.WaitFor(t, "the aged ledger to roll over", func() bool { return len(ml.Ledgers()) == 2 })
}

// TestLedgerIDsIncreaseAlongTheList: the ledger made ahead and the one a
// rollover makes itself never overlap, so the list's ids increase (readers
// look ledgers up by id, in order). With a rollover every 4 entries, the
// owner's request for the next ledger (at the 3rd) races the rollover (at
// the 4th) a hundred times.
func TestLedgerIDsIncreaseAlongTheList(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 4
	ml := e.open(e.factory("a", cfg), "ids")
	const total = 400
	if err := <-appendInBackground(t.Context(), t, ml, total, 0); err != nil {
		t.Fatal(err)
	}
	ids := ml.Ledgers()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ledger %d follows ledger %d in the list %v", ids[i], ids[i-1], ids)
		}
	}
	if got := len(readAll(t, ml)); got != total {
		t.Fatalf("read %d entries, want %d", got, total)
	}
}
