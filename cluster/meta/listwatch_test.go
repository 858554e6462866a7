package meta

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// failingWatch is a Store whose first Watch ends at once with an error, as
// a watch whose revision was compacted away does.
type failingWatch struct {
	Store
	mu     sync.Mutex
	failed bool
}

func (f *failingWatch) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	f.mu.Lock()
	fail := !f.failed
	f.failed = true
	f.mu.Unlock()
	if !fail {
		return f.Store.Watch(ctx, prefix, fromRev)
	}
	ch := make(chan WatchResponse, 1)
	ch <- WatchResponse{Err: ErrCompacted}
	close(ch)
	return ch
}

// TestListWatch: the listing goes to snapshot, the changes after it to
// events, and after a watch error the prefix is listed again, with the
// key written while no watch ran in the new listing.
func TestListWatch(t *testing.T) {
	mem := newTestMemory(t, clockwork.NewFakeClock(), 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := mem.Create(ctx, "p/a", []byte("1"), NoLease); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var snapshots [][]string
	var puts []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ListWatch(ctx, &failingWatch{Store: mem}, "p/", time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)),
			func(kvs []KV) {
				var keys []string
				for _, kv := range kvs {
					keys = append(keys, kv.Key)
				}
				mu.Lock()
				snapshots = append(snapshots, keys)
				mu.Unlock()
			},
			func(evs []Event) {
				mu.Lock()
				for _, ev := range evs {
					puts = append(puts, ev.KV.Key)
				}
				mu.Unlock()
			})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for {
			mu.Lock()
			ok := cond()
			state := fmt.Sprintf("snapshots %v, events %v", snapshots, puts)
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s: %s", what, state)
			case <-time.After(time.Millisecond):
			}
		}
	}
	// The first watch fails at once: the second listing follows it.
	waitFor("two listings", func() bool { return len(snapshots) == 2 })
	if want := [][]string{{"p/a"}, {"p/a"}}; !slices.EqualFunc(snapshots, want, slices.Equal[[]string]) {
		t.Fatalf("snapshots %v, want %v", snapshots, want)
	}
	if _, err := mem.Create(ctx, "p/b", []byte("2"), NoLease); err != nil {
		t.Fatal(err)
	}
	waitFor("the put of p/b", func() bool { return slices.Contains(puts, "p/b") })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ListWatch did not return after its ctx ended")
	}
}
