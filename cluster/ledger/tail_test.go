package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/prometheus/client_golang/prometheus"
)

// tailRun is what one tailing run measured.
type tailRun struct {
	// lag[i] is the time from the writer confirming entry i to the tailing
	// reader returning it.
	lag []time.Duration
	// explicitLACs is how many LACs the writer sent explicitly.
	explicitLACs float64
}

func (r tailRun) percentile(p int) time.Duration {
	s := slices.Sorted(slices.Values(r.lag))
	return s[(len(s)-1)*p/100]
}

// runTail writes n entries to a 3/3/2 ledger on e's bookies, one every gap
// (on a schedule, so a slow add does not slow the rest), while a reader on
// another client tails the ledger with WaitLAC and Read, and measures how
// long after each entry's confirmation the reader returned it. It fails tb
// if the reader returns an entry before the writer confirmed it. The
// writer's client has cfg, with its own metrics registry.
func runTail(tb testing.TB, e *env, cfg ledger.Config, n int, gap time.Duration) tailRun {
	tb.Helper()
	reg := prometheus.NewRegistry()
	wcfg := cfg
	wcfg.Registerer = reg
	w, err := e.client("w", wcfg).Create(tb.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Stop()
	r, err := e.client("r", cfg).OpenForRead(tb.Context(), w.ID())
	if err != nil {
		tb.Fatal(err)
	}

	ctx, cancel := context.WithCancel(tb.Context())
	var reader sync.WaitGroup
	defer reader.Wait()
	defer cancel()

	var mu sync.Mutex
	confirmed := make([]time.Time, n)
	returned := make([]time.Time, n)
	readerErr := make(chan error, 1)
	reader.Go(func() {
		for next := int64(0); next < int64(n); {
			lac, err := r.WaitLAC(ctx, next-1)
			if err != nil {
				readerErr <- fmt.Errorf("WaitLAC after entry %d: %w", next-1, err)
				return
			}
			ents, err := r.Read(ctx, next, lac)
			if err != nil {
				readerErr <- fmt.Errorf("read %d..%d: %w", next, lac, err)
				return
			}
			now := time.Now()
			mu.Lock()
			for _, en := range ents {
				if confirmed[en.ID].IsZero() {
					mu.Unlock()
					readerErr <- fmt.Errorf("reader returned entry %d before the writer confirmed it", en.ID)
					return
				}
				returned[en.ID] = now
			}
			mu.Unlock()
			next = lac + 1
		}
		readerErr <- nil
	})

	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * gap))) // pacing the load
		err := w.AddFunc(ctx, payload(i), func(entry int64, err error) {
			if err != nil || entry != int64(i) {
				tb.Errorf("add %d: entry %d, %v", i, entry, err)
				return
			}
			mu.Lock()
			confirmed[entry] = time.Now()
			mu.Unlock()
		})
		if err != nil {
			tb.Fatalf("add %d: %v", i, err)
		}
	}
	if err := <-readerErr; err != nil {
		tb.Fatal(err)
	}
	run := tailRun{lag: make([]time.Duration, n)}
	mu.Lock()
	for i := range n {
		run.lag[i] = returned[i].Sub(confirmed[i])
	}
	mu.Unlock()
	run.explicitLACs = metricValue(tb, reg, "meridian_ledger_explicit_lacs_total", "")
	return run
}

// TestTailingReaderLag: a tailing reader returns each entry within 2 ms of
// its confirmation, both when the writer goes idle after every add (one a
// second) and under load (10,000 a second), with the production
// ExplicitLACInterval. Time is virtual, and every message to a bookie takes
// 20µs each way, so the figures are the mechanism's and do not depend on the
// machine: an idle writer sends its LAC the moment the entry is confirmed,
// and a loaded one lets the next add carry it, with no explicit LAC but for
// the first entry (no add came before it) and the last (no add follows it).
// The wall-clock figures are BenchmarkTailLatency's.
func TestTailingReaderLag(t *testing.T) {
	const limit = 2 * time.Millisecond
	for _, tc := range []struct {
		name             string
		n                int
		gap              time.Duration
		worst            time.Duration // the largest lag allowed
		minLACs, maxLACs float64       // explicit LACs the writer may send
	}{
		// Idle after every add: the LAC leaves on confirmation, so the lag
		// is a few messages' flight, far below ExplicitLACInterval.
		{name: "1msg/s", n: 30, gap: time.Second, worst: 200 * time.Microsecond, minLACs: 30, maxLACs: 30},
		// The last entry's LAC waits ExplicitLACInterval for an add that
		// does not come.
		{name: "10kmsg/s", n: 5000, gap: 100 * time.Microsecond, worst: limit, minLACs: 0, maxLACs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, 31, "b1", "b2", "b3")
				e.bookies.SetDelay(func(string, string, ledgertest.Op, int64, bool) time.Duration {
					return 20 * time.Microsecond
				})
				cfg := testConfig()
				cfg.ExplicitLACInterval = ledger.DefaultConfig(region, 1).ExplicitLACInterval
				cfg.LACPollWait = ledger.DefaultConfig(region, 1).LACPollWait
				run := runTail(t, e, cfg, tc.n, tc.gap)
				p50, p99, worst := run.percentile(50), run.percentile(99), run.percentile(100)
				t.Logf("lag p50 %v, p99 %v, max %v; explicit LACs %v for %d entries", p50, p99, worst, run.explicitLACs, tc.n)
				if p99 >= limit {
					t.Errorf("lag p99 %v, want under %v", p99, limit)
				}
				if worst >= tc.worst {
					t.Errorf("largest lag %v, want under %v", worst, tc.worst)
				}
				if run.explicitLACs < tc.minLACs || run.explicitLACs > tc.maxLACs {
					t.Errorf("%v explicit LACs for %d entries, want %v..%v", run.explicitLACs, tc.n, tc.minLACs, tc.maxLACs)
				}
			})
		})
	}
}

// TestTailingReaderOneCallPerEntry: while entries come, a tailing reader's
// long-poll asks one bookie, whose answer carries the entry with the LAC
// that confirms it, so each entry costs the reader one bookie call and no
// read. The bookie it asks first answers its long-polls a second late (its
// plain reads are not slowed): that costs the first entry one
// SpeculativeLACWait, after which the reader asks a bookie that answers.
func TestTailingReaderOneCallPerEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 35, "b1", "b2", "b3")
		var mu sync.Mutex
		calls := map[ledgertest.Op]int{}
		slow := "" // the bookie whose long-poll answers take a second
		e.bookies.SetDelay(func(client, bookie string, op ledgertest.Op, _ int64, back bool) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if client == "r" && !back {
				calls[op]++
			}
			if client == "r" && back && op == ledgertest.OpWaitEntry && bookie == slow {
				return time.Second
			}
			return 20 * time.Microsecond
		})
		cfg := testConfig()
		cfg.ExplicitLACInterval = ledger.DefaultConfig(region, 1).ExplicitLACInterval
		ctx := t.Context()
		w, err := e.client("w", cfg).Create(ctx, 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		r, err := e.client("r", cfg).OpenForRead(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		slow = r.Metadata().LastEnsemble()[0]
		clear(calls)
		mu.Unlock()

		const n = 50
		returned := make(chan time.Time, n)
		tailed := make(chan error, 1)
		go func() {
			for next := int64(0); next < n; {
				lac, err := r.WaitLAC(ctx, next-1)
				if err != nil {
					tailed <- err
					return
				}
				ents, err := r.Read(ctx, next, lac)
				if err != nil {
					tailed <- err
					return
				}
				for _, en := range ents {
					if string(en.Payload) != string(payload(int(en.ID))) {
						tailed <- fmt.Errorf("entry %d: wrong payload", en.ID)
						return
					}
					returned <- time.Now()
				}
				next = lac + 1
			}
			tailed <- nil
		}()
		// The first entry is tailed before the next is added: the slow
		// bookie's cost falls on it alone.
		var confirmed, got []time.Time
		for i := range n {
			if _, err := w.Add(ctx, payload(i)); err != nil {
				t.Fatal(err)
			}
			confirmed = append(confirmed, time.Now())
			if i == 0 {
				got = append(got, <-returned)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := <-tailed; err != nil {
			t.Fatal(err)
		}
		for len(got) < n {
			got = append(got, <-returned)
		}
		for i := range n {
			lag := got[i].Sub(confirmed[i])
			limit := time.Millisecond
			if i == 0 {
				limit += cfg.SpeculativeLACWait
			}
			if lag > limit {
				t.Errorf("entry %d returned %v after its confirmation, want at most %v", i, lag, limit)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("reader's calls for %d entries: %d long-poll reads, %d reads, %d LAC reads", n, calls[ledgertest.OpWaitEntry], calls[ledgertest.OpRead], calls[ledgertest.OpReadLAC])
		if calls[ledgertest.OpRead] != 0 || calls[ledgertest.OpReadLAC] != 0 {
			t.Errorf("%d reads and %d LAC reads besides the long-polls, want none", calls[ledgertest.OpRead], calls[ledgertest.OpReadLAC])
		}
		if got := calls[ledgertest.OpWaitEntry]; got > n+3 {
			t.Errorf("%d long-poll reads for %d entries, want one per entry (and the whole ensemble once)", got, n)
		}
	})
}

// TestSharedTailOnePollPerEntry: two tailers of one ledger on one client
// (the replication tasks of a topic for two remotes) share the Reader
// OpenTail gives them, so each new entry costs the bookies one long-poll
// read in all, not one per tailer, and both tailers get every entry.
// Released by both, the Reader is dropped: the next OpenTail opens afresh.
func TestSharedTailOnePollPerEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 37, "b1", "b2", "b3")
		var mu sync.Mutex
		calls := map[ledgertest.Op]int{}
		e.bookies.SetDelay(func(client, _ string, op ledgertest.Op, _ int64, back bool) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if client == "r" && !back {
				calls[op]++
			}
			return 20 * time.Microsecond
		})
		cfg := testConfig()
		cfg.ExplicitLACInterval = ledger.DefaultConfig(region, 1).ExplicitLACInterval
		ctx := t.Context()
		w, err := e.client("w", cfg).Create(ctx, 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		rc := e.client("r", cfg)
		r1, release1, err := rc.OpenTail(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		r2, release2, err := rc.OpenTail(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if r1 != r2 {
			t.Fatal("two OpenTails of one ledger on one client gave two Readers")
		}
		mu.Lock()
		clear(calls)
		mu.Unlock()

		const n = 50
		tail := func(r *ledger.Reader) error {
			for next := int64(0); next < n; {
				lac, err := r.WaitLAC(ctx, next-1)
				if err != nil {
					return err
				}
				ents, err := r.Read(ctx, next, lac)
				if err != nil {
					return err
				}
				for _, en := range ents {
					if string(en.Payload) != string(payload(int(en.ID))) {
						return fmt.Errorf("entry %d: wrong payload", en.ID)
					}
				}
				next = lac + 1
			}
			return nil
		}
		tailed := make(chan error, 2)
		go func() { tailed <- tail(r1) }()
		go func() { tailed <- tail(r2) }()
		for i := range n {
			if _, err := w.Add(ctx, payload(i)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for range 2 {
			if err := <-tailed; err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		t.Logf("two tailers' calls for %d entries: %d long-poll reads, %d reads, %d LAC reads", n, calls[ledgertest.OpWaitEntry], calls[ledgertest.OpRead], calls[ledgertest.OpReadLAC])
		if got := calls[ledgertest.OpWaitEntry]; got > n+3 {
			t.Errorf("%d long-poll reads for %d entries and two tailers, want one per entry (and the whole ensemble once)", got, n)
		}
		if calls[ledgertest.OpRead] != 0 {
			t.Errorf("%d reads besides the long-polls, want none", calls[ledgertest.OpRead])
		}
		mu.Unlock()

		release1()
		release1() // a second release of the same share is a no-op
		if r3, release3, err := rc.OpenTail(ctx, w.ID()); err != nil || r3 != r1 {
			t.Fatalf("with one share left, OpenTail gave another Reader (err %v)", err)
		} else {
			release3()
		}
		release2()
		r4, release4, err := rc.OpenTail(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer release4()
		if r4 == r1 {
			t.Error("after every share was released, OpenTail gave the old Reader back")
		}
	})
}

// TestSharedTailOutlivesAStoppedTailer: when the tailer whose long-poll
// another tailer shares stops waiting, the other goes on waiting on a poll
// of its own and gets the next entry.
func TestSharedTailOutlivesAStoppedTailer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 38, "b1", "b2", "b3")
		cfg := testConfig()
		ctx := t.Context()
		w, err := e.client("w", cfg).Create(ctx, 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		r, release, err := e.client("r", cfg).OpenTail(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		leader, stop := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() {
			_, err := r.WaitLAC(leader, -1)
			stopped <- err
		}()
		synctest.Wait() // the first tailer's poll is in flight
		waited := make(chan error, 1)
		var lac int64
		go func() {
			var err error
			lac, err = r.WaitLAC(ctx, -1)
			waited <- err
		}()
		synctest.Wait() // the second shares it
		stop()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Fatalf("the stopped tailer's WaitLAC: %v, want context.Canceled", err)
		}
		if _, err := w.Append(ctx, payload(0)); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; err != nil {
			t.Fatalf("the other tailer's WaitLAC: %v", err)
		}
		if lac != 0 {
			t.Fatalf("the other tailer's WaitLAC returned LAC %d, want 0", lac)
		}
	})
}

// BenchmarkTailLatency measures, in wall-clock time on in-memory bookies
// with no latency, how long after the writer's confirmation a tailing reader
// returns each entry (p50, p99, max), at several add rates, and how many
// explicit LACs the writer sent per entry. Each op is one entry at the
// sub-benchmark's rate, so the 1 msg/s case wants -benchtime=Nx with a small
// N (60x takes a minute). An idle Go process sleeps about 1 ms at the least,
// so the 10k msg/s load arrives in bursts of about ten adds a millisecond,
// and the last entry of a burst waits for the next one to carry its LAC
// (or ExplicitLACInterval): that, not the steady state, makes its p99.
func BenchmarkTailLatency(b *testing.B) {
	for _, rate := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			e := newEnv(b, 32, "b1", "b2", "b3")
			cfg := ledger.DefaultConfig(region, 1)
			b.ResetTimer()
			run := runTail(b, e, cfg, b.N, time.Second/time.Duration(rate))
			b.StopTimer()
			b.ReportMetric(float64(run.percentile(50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(run.percentile(99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(run.percentile(100).Microseconds()), "max-µs")
			b.ReportMetric(run.explicitLACs/float64(b.N), "explicit-LACs/op")
		})
	}
}

// TestCloseSendsLastLAC: a writer closed right after a burst of adds sends
// the last entries' LAC before it closes the ledger, so a reader already in
// its long-poll returns them at once, not when the long-poll ends and it
// reads the closed metadata.
func TestCloseSendsLastLAC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 34, "b1", "b2", "b3")
		cfg := testConfig()
		cfg.LACPollWait = time.Minute
		w := create(t, e.client("w", cfg), 3, 3, 2)
		r, err := e.client("r", cfg).OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, w, 0, 5) // dense adds: entry 4's LAC waits for another
		synctest.Wait()
		seen, err := r.UpdateLAC(t.Context())
		if err != nil || seen >= 4 {
			t.Fatalf("LAC before close = %d, %v; want below 4 (no add carried entry 4's)", seen, err)
		}
		type answer struct {
			lac int64
			err error
			at  time.Time
		}
		got := make(chan answer, 1)
		go func() {
			lac, err := r.WaitLAC(t.Context(), seen)
			got <- answer{lac, err, time.Now()}
		}()
		synctest.Wait() // the reader is in its long-poll
		start := time.Now()
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.err != nil || a.lac != 4 {
			t.Fatalf("WaitLAC(%d) across the close = %d, %v; want 4", seen, a.lac, a.err)
		}
		if waited := a.at.Sub(start); waited >= cfg.ExplicitLACInterval {
			t.Fatalf("the reader got the last entries %v after the close; want at once", waited)
		}
	})
}

// TestWaitLACPausesWhenEveryBookieFails has every bookie refuse a tailing
// reader's LAC long-polls at once (bookies down): WaitLAC asks again only
// after RetryInterval, instead of polling in a loop (a metadata read and
// a call per bookie each time, which kept an idle replicator at 14% of a
// core), and returns once a bookie answers again.
func TestWaitLACPausesWhenEveryBookieFails(t *testing.T) {
	e := newEnv(t, 1, "b1", "b2", "b3")
	cfg := testConfig()
	w, err := e.client("w", cfg).Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r, err := e.client("r", cfg).OpenForRead(t.Context(), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	polls := 0
	e.bookies.SetDelay(func(client, _ string, op ledgertest.Op, _ int64, back bool) time.Duration {
		if client == "r" && op == ledgertest.OpWaitEntry && !back {
			mu.Lock()
			polls++
			mu.Unlock()
		}
		return 0
	})
	for _, b := range []string{"b1", "b2", "b3"} {
		e.bookies.Refuse("r", b)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := r.WaitLAC(t.Context(), -1)
		waited <- err
	}()
	// Over a second, a reader that pauses RetryInterval (50ms) between
	// polls makes at most about 20 of them, 3 calls each; one that does
	// not makes thousands.
	time.Sleep(time.Second)
	mu.Lock()
	n := polls
	mu.Unlock()
	if n > 3*(int(time.Second/cfg.RetryInterval)+2) {
		t.Errorf("%d LAC calls in a second with every bookie refusing, want at most one poll of 3 per RetryInterval (%v)", n, cfg.RetryInterval)
	}
	if n == 0 {
		t.Error("the reader never polled")
	}
	e.bookies.HealAll()
	if _, err := w.Add(t.Context(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitLAC after the bookies came back: %v", err)
	}
}
