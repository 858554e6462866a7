package ledger_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/testkit"
)

// TestReadPassesAFrozenBookie reads a closed ledger while one bookie of its
// ensemble takes reads and never answers (frozen, or cut off). Each entry
// read it is asked first goes to the next member after
// SpeculativeReadTimeout, not after ReadTimeout, and once it has been
// overtaken it is asked last: only the reads already sent to it before that
// wait on it, and the whole read takes about one speculative timeout.
func TestReadPassesAFrozenBookie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 36, "b1", "b2", "b3")
		var mu sync.Mutex
		frozen, asked := "", 0 // the frozen bookie, and the reads it was sent
		e.bookies.SetDelay(func(client, bookie string, op ledgertest.Op, _ int64, back bool) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if client == "r" && bookie == frozen && op == ledgertest.OpRead && !back {
				asked++
			}
			return 20 * time.Microsecond
		})
		cfg := testConfig()
		cfg.ReadTimeout = time.Minute
		cfg.SpeculativeReadTimeout = 100 * time.Millisecond
		ctx := t.Context()
		w, err := e.client("w", cfg).Create(ctx, 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 600
		for i := range n {
			if _, err := w.Add(ctx, payload(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := e.client("r", cfg).OpenForRead(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		frozen = r.Metadata().LastEnsemble()[0]
		mu.Unlock()
		e.bookies.Partition("r", frozen)

		start := time.Now()
		ents, err := r.Read(ctx, 0, n-1)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		for i, en := range ents {
			if en.ID != int64(i) || string(en.Payload) != string(payload(i)) {
				t.Fatalf("entry %d: got entry %d, or a wrong payload", i, en.ID)
			}
		}
		if len(ents) != n {
			t.Fatalf("read %d entries, want %d", len(ents), n)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%d entries read in %v; %d reads were sent to the frozen bookie", n, took, asked)
		// Without speculation a third of the entries would wait a
		// ReadTimeout each, 64 at a time.
		if limit := 2 * cfg.SpeculativeReadTimeout; took > limit {
			t.Errorf("the read took %v, want at most %v", took, limit)
		}
		// The first wave of concurrent reads may all reach it before the
		// first is overtaken; none after.
		if asked > 64 {
			t.Errorf("%d reads were sent to the frozen bookie, want at most one wave of 64", asked)
		}
	})
}

// TestReadTimesOnTheClientsClock reads one entry whose first replica is cut
// off, on a client whose Config.Clock is fake and whose ReadTimeout (an RPC
// deadline, on the wall clock) is far away: the read asks the next replica
// only when the fake clock passes SpeculativeReadTimeout, the cut-off
// bookie is then asked last until the clock passes SlowBookieMemory, and
// first again after it.
func TestReadTimesOnTheClientsClock(t *testing.T) {
	e := newEnv(t, 37, "b1", "b2", "b3")
	ctx := t.Context()
	w, err := e.client("w", testConfig()).Create(ctx, 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	fc := clockwork.NewFakeClock()
	cfg := testConfig()
	cfg.Clock, cfg.ReadTimeout = fc, 10*time.Minute
	r, err := e.client("r", cfg).OpenForRead(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	cut := r.Metadata().EnsembleFor(0)[0] // entry 0's first replica
	var asked atomic.Int64                // reads sent to cut
	e.bookies.SetDelay(func(client, bookie string, op ledgertest.Op, _ int64, back bool) time.Duration {
		if client == "r" && bookie == cut && op == ledgertest.OpRead && !back {
			asked.Add(1)
		}
		return 0
	})
	e.bookies.Partition("r", cut)
	read := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.Read(ctx, 0, 0)
			done <- err
		}()
		return done
	}
	// overtake waits until a read has asked cut and armed its speculative
	// timer, checks that it waits for the clock, then moves the clock on.
	overtake := func(wantAsked int64) {
		t.Helper()
		done := read()
		if err := fc.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the read to ask the cut-off bookie", func() bool { return asked.Load() == wantAsked })
		select {
		case err := <-done:
			t.Fatalf("the read ended (err %v) before the clock reached SpeculativeReadTimeout", err)
		default:
		}
		fc.Advance(cfg.SpeculativeReadTimeout)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	overtake(1)
	// Within SlowBookieMemory the cut-off bookie goes last: the read needs
	// no speculation and no clock.
	if err := <-read(); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d reads sent to the cut-off bookie within SlowBookieMemory, want 1", n)
	}
	fc.Advance(cfg.SlowBookieMemory)
	overtake(2)
}
