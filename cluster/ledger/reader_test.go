package ledger_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
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
		w, err := e.client("w", cfg).Create(ctx, 3, 3, 2, nil)
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
