package loadmgr

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// failFirstWatch is a store whose first watch fails at once, after a key
// was written that only a new List can find.
type failFirstWatch struct {
	meta.Store
	failed atomic.Bool
	lists  atomic.Int64
}

func (f *failFirstWatch) List(ctx context.Context, prefix string) ([]meta.KV, int64, error) {
	f.lists.Add(1)
	return f.Store.List(ctx, prefix)
}

func (f *failFirstWatch) Watch(ctx context.Context, prefix string, fromRev int64) <-chan meta.WatchResponse {
	if !f.failed.CompareAndSwap(false, true) {
		return f.Store.Watch(ctx, prefix, fromRev)
	}
	ch := make(chan meta.WatchResponse, 1)
	if _, err := f.Store.Create(ctx, prefix+"during", []byte("x"), meta.NoLease); err != nil {
		ch <- meta.WatchResponse{Err: err}
	} else {
		ch <- meta.WatchResponse{Err: meta.ErrCompacted}
	}
	close(ch)
	return ch
}

// TestWatchPutsRelists: the owners' watch sees what was there before it
// started, what was written while its watch was down (by listing again
// after the watch's error), and what is written after.
func TestWatchPutsRelists(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	store := &failFirstWatch{Store: mem}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const prefix = "/owners/"
	if _, err := mem.Create(ctx, prefix+"before", []byte("x"), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := make(map[string]int)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		watchPuts(wctx, store, prefix, slog.New(slog.DiscardHandler), func(kv meta.KV) {
			mu.Lock()
			defer mu.Unlock()
			seen[kv.Key]++
		})
	})
	defer func() { stop(); wg.Wait() }()
	waitSeen := func(key string, n int) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("%s to be seen %d times", key, n), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[key] >= n
		})
	}
	waitSeen(prefix+"during", 1)
	waitSeen(prefix+"before", 2) // listed again after the failed watch
	if _, err := mem.Create(ctx, prefix+"after", []byte("x"), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	waitSeen(prefix+"after", 1)
	if n := store.lists.Load(); n != 2 {
		t.Fatalf("%d lists, want 2 (one at the start, one after the failed watch)", n)
	}
}
