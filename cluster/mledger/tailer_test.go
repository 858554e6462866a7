package mledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/testkit"
)

// tailer opens a Tailer as its own process: its own ledger client, the
// shared store.
func (e *env) tailer(topic string, from Position) *Tailer {
	e.t.Helper()
	tl, err := OpenTailer(e.t.Context(), DefaultTailerConfig(region), e.ledgerClient("tailer-"+topic), e.store, topic, from)
	if err != nil {
		e.t.Fatalf("open tailer of %s: %v", topic, err)
	}
	e.t.Cleanup(func() { tl.Close() })
	return tl
}

// tailN reads exactly n entries through tl, failing on an error or after
// 20 s.
func tailN(t testing.TB, tl *Tailer, n int) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out []Entry
	for len(out) < n {
		es, err := tl.Next(ctx, n-len(out))
		if err != nil {
			t.Fatalf("tail after %d of %d entries: %v", len(out), n, err)
		}
		if len(es) == 0 {
			t.Fatal("Next returned no entries and no error")
		}
		out = append(out, es...)
	}
	return out
}

// appendSeqs appends messages seq from..to-1 and returns their positions.
func appendSeqs(t testing.TB, ml *ManagedLedger, from, to int) []Position {
	t.Helper()
	var ps []Position
	for i := from; i < to; i++ {
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Errorf("append %d: %v", i, err)
			return ps
		}
		ps = append(ps, p)
	}
	return ps
}

// checkTailed checks that es are the entries at want, holding seq
// first, first+1, ...
func checkTailed(t testing.TB, es []Entry, want []Position, first int) {
	t.Helper()
	if len(es) != len(want) {
		t.Fatalf("tailed %d entries, want %d", len(es), len(want))
	}
	for i, e := range es {
		if e.Position != want[i] {
			t.Fatalf("entry %d at %v, appended at %v", i, e.Position, want[i])
		}
		if d := decode(t, e); d.seq != uint64(first+i) {
			t.Fatalf("entry %d at %v holds seq %d, want %d", i, e.Position, d.seq, first+i)
		}
	}
}

// nothingMore checks that Next has no entry for tl within a short wait.
// A wrong answer (an extra entry) fails it whatever the machine's speed.
func nothingMore(t testing.TB, tl *Tailer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if es, err := tl.Next(ctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after the last entry: %d entries, %v; want a deadline", len(es), err)
	}
}

// nextResult is what one Next returned.
type nextResult struct {
	es  []Entry
	err error
}

// nextAsync calls Next(10) on its own goroutine; awaitNext takes its result.
func nextAsync(t testing.TB, tl *Tailer) <-chan nextResult {
	done := make(chan nextResult, 1)
	go func() {
		es, err := tl.Next(t.Context(), 10)
		done <- nextResult{es, err}
	}()
	return done
}

// awaitNext waits up to 20 s for a Next started by nextAsync, which waits
// for what, and fails on its error.
func awaitNext(t testing.TB, done <-chan nextResult, what string) []Entry {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Next waiting for %s: %v", what, r.err)
		}
		return r.es
	case <-time.After(20 * time.Second):
		t.Fatalf("Next did not return after %s", what)
	}
	return nil
}

func TestTailerAcrossRollovers(t *testing.T) { testTailerAcrossRollovers(t, newEnv) }

func testTailerAcrossRollovers(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 5
	ml := e.open(e.factory("owner", cfg), "roll")
	tl := e.tailer("roll", Position{})
	const total = 120
	var want []Position
	var wg sync.WaitGroup
	wg.Go(func() { want = appendSeqs(t, ml, 0, total) })
	got := tailN(t, tl, total)
	wg.Wait()
	checkTailed(t, got, want, 0)
	checkIndexes(t, got, -1)
	if n := len(ml.Ledgers()); n < total/5 {
		t.Fatalf("%d ledgers, want %d or more rollovers", n, total/5)
	}
	nothingMore(t, tl)
	if inc := tl.Incarnation(); inc <= 0 {
		t.Fatalf("Incarnation %d once the record is read", inc)
	}
}

func TestTailerFromMiddle(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 7
	ml := e.open(e.factory("owner", cfg), "mid")
	ps := appendSeqs(t, ml, 0, 30)
	// From inside a ledger.
	tl := e.tailer("mid", ps[12])
	checkTailed(t, tailN(t, tl, 17), ps[13:], 13)
	// From the last entry of a ledger: the next ledger's first comes next.
	seam := 6
	if ps[seam].Ledger == ps[seam+1].Ledger {
		t.Fatalf("entries %v and %v share a ledger; the test expects a seam", ps[seam], ps[seam+1])
	}
	tl2 := e.tailer("mid", ps[seam])
	checkTailed(t, tailN(t, tl2, 30-seam-1), ps[seam+1:], seam+1)
	// Both follow what comes next.
	more := appendSeqs(t, ml, 30, 35)
	checkTailed(t, tailN(t, tl, 5), more, 30)
	checkTailed(t, tailN(t, tl2, 5), more, 30)
	nothingMore(t, tl)
	// A position past the end of a closed ledger names no entry.
	bad, err := OpenTailer(t.Context(), DefaultTailerConfig(region), e.ledgerClient("bad"), e.store, "mid", Position{ps[0].Ledger, 50})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Next(t.Context(), 1); !errors.Is(err, ErrInvalidPosition) {
		t.Fatalf("Next from past a closed ledger's end: %v, want ErrInvalidPosition", err)
	}
}

func TestTailerBeforeTopicExists(t *testing.T) {
	e := newEnv(t)
	tl := e.tailer("later", Position{})
	if inc := tl.Incarnation(); inc != 0 {
		t.Fatalf("Incarnation %d before the topic exists", inc)
	}
	done := nextAsync(t, tl)
	ml := e.open(e.factory("owner", testConfig()), "later")
	ps := appendSeqs(t, ml, 0, 1)
	checkTailed(t, awaitNext(t, done, "the topic to be created and written"), ps, 0)
	kv, err := e.store.Get(t.Context(), ListKey(region, "later"))
	if err != nil {
		t.Fatal(err)
	}
	if tl.Incarnation() != kv.CreateRevision {
		t.Fatalf("Incarnation %d, record created at revision %d", tl.Incarnation(), kv.CreateRevision)
	}
}

func TestTailerIdleWriterWakes(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("owner", testConfig()), "idle")
	tl := e.tailer("idle", Position{})
	ps := appendSeqs(t, ml, 0, 3)
	checkTailed(t, tailN(t, tl, 3), ps, 0)
	// Caught up on an open ledger: Next long-polls the LAC. Several rounds,
	// each appending while Next waits.
	for round := range 3 {
		done := nextAsync(t, tl)
		more := appendSeqs(t, ml, 3+round, 4+round)
		checkTailed(t, awaitNext(t, done, "a new entry"), more, 3+round)
	}
	nothingMore(t, tl)
}

func TestTailerCorruptEntryIsAnError(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("owner", testConfig()), "bad")
	ps := appendSeqs(t, ml, 0, 5)
	for _, id := range []string{"bka", "bkb", "bkc"} {
		e.bookies.Corrupt(id, ps[2].Ledger, ps[2].Entry)
	}
	tl := e.tailer("bad", Position{})
	got := tailN(t, tl, 2)
	checkTailed(t, got, ps[:2], 0)
	for range 2 { // the error stays: the entry is never skipped
		es, err := tl.Next(t.Context(), 10)
		if !errors.Is(err, ledger.ErrChecksum) || len(es) != 0 {
			t.Fatalf("Next over an entry corrupt on every replica: %d entries, %v; want ErrChecksum", len(es), err)
		}
	}
}

func TestTailerCloseUnblocksNext(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("owner", testConfig()), "quiet")
	appendSeqs(t, ml, 0, 1)
	for _, topic := range []string{"quiet", "absent"} {
		from := Position{}
		if topic == "quiet" {
			from = ml.LastConfirmed() // caught up: Next waits on the LAC
		}
		tl := e.tailer(topic, from)
		done := make(chan error, 1)
		go func() {
			_, err := tl.Next(context.Background(), 1)
			done <- err
		}()
		if err := tl.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("%s: Next after Close: %v, want ErrClosed", topic, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Close did not unblock Next", topic)
		}
		if _, err := tl.Next(t.Context(), 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s: Next on a closed tailer: %v", topic, err)
		}
	}
}

// TestTailerLedgerGone: retention deleting ledgers the tailer has not read
// is ErrLedgerGone, never a skip; ledgers deleted before from are skipped.
func TestTailerLedgerGone(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 5
	cfg.RetentionTime, cfg.RetentionSize = 0, 0 // no cursor: delete at rollover
	ml := e.open(e.factory("owner", cfg), "ret")
	first := ml.Ledgers()[0]
	tl := e.tailer("ret", Position{})
	ps := appendSeqs(t, ml, 0, 23)
	settle(t, ml) // the last rollover and its retention are done
	if ml.Ledgers()[0] == first {
		t.Fatalf("retention deleted nothing: ledgers %v", ml.Ledgers())
	}
	// Let the tailer see every change of the record before it reads, so
	// that it is the record dropping the ledgers that it reports.
	kv, err := e.store.Get(t.Context(), ListKey(region, "ret"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the tailer to see the record's last change", func() bool {
		if err := tl.syncRecord(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		return tl.recRev == kv.ModRevision
	})
	if _, err := tl.Next(t.Context(), 10); !errors.Is(err, ErrLedgerGone) {
		t.Fatalf("Next with its ledgers deleted: %v, want ErrLedgerGone", err)
	}
	// From the last entry of a deleted ledger (a durable cursor's
	// mark-delete position, which retention has passed), reading starts
	// at the first ledger still listed.
	start := 0
	for start < len(ps) && ps[start].Ledger != ml.Ledgers()[0] {
		start++
	}
	tl2 := e.tailer("ret", ps[start-1])
	checkTailed(t, tailN(t, tl2, len(ps)-start), ps[start:], start)
}

func TestTailerTopicDeletedAndRecreated(t *testing.T) {
	e := newEnv(t)
	f := e.factory("owner", testConfig())
	ml := e.open(f, "gone")
	ps := appendSeqs(t, ml, 0, 2)
	tl := e.tailer("gone", Position{})
	checkTailed(t, tailN(t, tl, 2), ps, 0)
	first := tl.Incarnation()
	if err := ml.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := tl.Next(ctx, 1); !errors.Is(err, ErrTopicDeleted) {
		t.Fatalf("Next after the topic was deleted: %v, want ErrTopicDeleted", err)
	}
	ml = e.open(f, "gone")
	ps = appendSeqs(t, ml, 0, 1)
	tl2 := e.tailer("gone", Position{})
	checkTailed(t, tailN(t, tl2, 1), ps, 0)
	if tl2.Incarnation() == first || tl2.Incarnation() == 0 {
		t.Fatalf("incarnations %d then %d: the new topic must differ", first, tl2.Incarnation())
	}
}

func TestTailerConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*TailerConfig)
	}{
		{"no region", func(c *TailerConfig) { c.Region = "" }},
		{"zero entries", func(c *TailerConfig) { c.MaxEntriesPerNext = 0 }},
		{"tiny bytes", func(c *TailerConfig) { c.MaxBytesPerNext = 10 }},
		{"no timeout", func(c *TailerConfig) { c.MetaTimeout = 0 }},
	} {
		cfg := DefaultTailerConfig(region)
		c.mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", c.name, err)
		}
	}
	if err := DefaultTailerConfig(region).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestTailerLedgerMetadataGone: a listed ledger whose metadata is gone (the
// middle of a retention, or an operator's deletion) is ErrLedgerGone.
func TestTailerLedgerMetadataGone(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 5
	ml := e.open(e.factory("owner", cfg), "hole")
	ps := appendSeqs(t, ml, 0, 12)
	settle(t, ml)
	if err := e.ledgerClient("operator").Delete(t.Context(), ps[5].Ledger); err != nil {
		t.Fatal(err)
	}
	tl := e.tailer("hole", Position{})
	checkTailed(t, tailN(t, tl, 5), ps[:5], 0)
	if es, err := tl.Next(t.Context(), 10); !errors.Is(err, ErrLedgerGone) {
		t.Fatalf("Next into a ledger whose metadata is gone: %d entries, %v; want ErrLedgerGone", len(es), err)
	}
}

// TestTailerOwnerFailover: the owner dies while the tailer waits on its
// open ledger; the next owner recovers (closes) that ledger and writes a
// new one. The tailer learns of it from the record, not from its LAC
// long-poll, which is held for a minute here: every entry comes once and
// in order, well within the test's 20 s.
func TestTailerOwnerFailover(t *testing.T) {
	e := newEnv(t)
	first := e.open(e.factory("a", testConfig()), "fo")
	ps := appendSeqs(t, first, 0, 3)
	lcfg := ledgerTestConfig()
	lcfg.LACPollWait = time.Minute
	client, err := ledger.New(lcfg, e.store, e.bookies.Client("tailer"), testLogger(t), rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	tl, err := OpenTailer(t.Context(), DefaultTailerConfig(region), client, e.store, "fo", Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	checkTailed(t, tailN(t, tl, 3), ps, 0)
	done := nextAsync(t, tl)
	first.crash()
	second := e.open(e.factory("b", testConfig()), "fo")
	more := appendSeqs(t, second, 3, 5)
	got := awaitNext(t, done, "the next owner's entries")
	if len(got) < 2 {
		got = append(got, tailN(t, tl, 2-len(got))...)
	}
	checkTailed(t, got, more, 3)
	nothingMore(t, tl)
}

func TestTailerTerminatedTopic(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 4
	ml := e.open(e.factory("owner", cfg), "term")
	ps := appendSeqs(t, ml, 0, 10)
	tl := e.tailer("term", Position{})
	checkTailed(t, tailN(t, tl, 5), ps[:5], 0)
	if _, err := ml.Terminate(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkTailed(t, tailN(t, tl, 5), ps[5:], 5)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if es, err := tl.Next(ctx, 10); !errors.Is(err, ErrEndOfTopic) {
		t.Fatalf("Next at the end of a terminated topic: %d entries, %v; want ErrEndOfTopic", len(es), err)
	}
}
