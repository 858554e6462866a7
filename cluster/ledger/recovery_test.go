package ledger_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// writeUnderReplicated writes n entries to a 3/3/2 ledger on b1..b3 while b3
// is down, so the tail beyond the bookies' LAC sits on two bookies only, then
// abandons the writer.
func writeUnderReplicated(t *testing.T, e *env, n int) *ledger.Writer {
	t.Helper()
	w := create(t, e.client("w", testConfig()), 3, 3, 2)
	e.bookies.SetDown("b3", true)
	appendN(t, w, 0, n)
	w.Stop()
	return w
}

// TestRecoveryReplacesDeadBookie: recovery cannot write back to a full Qw
// while an ensemble member is dead; with a spare registered it writes the
// recovered entries to a new ensemble, then publishes the fragment.
func TestRecoveryReplacesDeadBookie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 11, "b1", "b2", "b3")
		w := writeUnderReplicated(t, e, 20)
		e.addBookie("b4")
		rc := e.client("rec", testConfig())
		r, err := rc.OpenAndRecover(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		// The new fragment starts after the highest LAC the bookies had
		// seen; if that was -1 (every add left before any confirmation)
		// it replaces the first fragment outright.
		md := r.Metadata()
		last := md.Fragments[len(md.Fragments)-1]
		if md.LastEntry != 19 || last.FirstEntry > 19 || slices.Contains(last.Ensemble, "b3") || !slices.Contains(last.Ensemble, "b4") {
			t.Fatalf("recovered metadata: %+v", md)
		}
		for i := last.FirstEntry; i <= 19; i++ {
			for _, b := range md.LastEnsemble() {
				if !e.bookies.Has(b, w.ID(), i) {
					t.Fatalf("recovered entry %d not on %s", i, b)
				}
			}
		}
		readAll(t, r, 20)
	})
}

// TestRecoveryWaitsForBookie: with no spare, recovery keeps retrying the
// dead bookie and completes once it is back; it never closes short.
func TestRecoveryWaitsForBookie(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 12, "b1", "b2", "b3")
		w := writeUnderReplicated(t, e, 20)
		rc := e.client("rec", testConfig())
		type result struct {
			r   *ledger.Reader
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := rc.OpenAndRecover(t.Context(), w.ID())
			done <- result{r, err}
		}()
		synctest.Wait()
		select {
		case res := <-done:
			t.Fatalf("recovery finished with a member down and no spare: %v", res.err)
		default:
		}
		if md, _ := rc.Metadata(t.Context(), w.ID()); md.State != ledger.StateInRecovery {
			t.Fatalf("state during recovery: %s", md.State)
		}
		e.bookies.SetDown("b3", false)
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		readAll(t, res.r, 20)
		if md := res.r.Metadata(); len(md.Fragments) != 1 {
			t.Fatalf("unexpected ensemble change: %+v", md.Fragments)
		}
		for i := int64(0); i < 20; i++ {
			if !e.bookies.Has("b3", w.ID(), i) && i > e.bookies.LAC("b1", w.ID()) {
				t.Fatalf("recovered entry %d was not written back to b3", i)
			}
		}
	})
}

// TestRecoveryRetriesTimeouts: an entry held by Qa bookies, whose third
// bookie answers NoSuchEntry, is kept although one holder times out for a
// while: a timeout is never "absent".
func TestRecoveryRetriesTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 13, "b1", "b2", "b3")
		w := writeUnderReplicated(t, e, 5)
		e.bookies.SetDown("b3", false) // b3 answers NoSuchEntry for 0..4
		e.bookies.Partition("rec", "b1")
		rc := e.client("rec", testConfig())
		done := make(chan error, 1)
		var r *ledger.Reader
		go func() {
			var err error
			r, err = rc.OpenAndRecover(t.Context(), w.ID())
			done <- err
		}()
		synctest.Wait()
		e.bookies.Heal("rec", "b1")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		readAll(t, r, 5)
	})
}

// TestConcurrentRecoverersAgree runs two recoverers at once many times.
func TestConcurrentRecoverersAgree(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, seed, "b1", "b2", "b3")
			w := writeUnderReplicated(t, e, 10)
			e.bookies.SetDown("b3", false)
			errs := make(chan error, 2)
			lasts := make(chan int64, 2)
			for _, name := range []string{"r1", "r2"} {
				rc := e.client(name, testConfig())
				go func() {
					r, err := rc.OpenAndRecover(t.Context(), w.ID())
					if err == nil {
						lasts <- r.LastAddConfirmed()
					}
					errs <- err
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if a, b := <-lasts, <-lasts; a != b || a != 9 {
				t.Fatalf("recoverers returned lastEntry %d and %d, want 9", a, b)
			}
			if _, err := w.Append(t.Context(), payload(10)); !errors.Is(err, ledger.ErrWriterClosed) {
				t.Fatalf("stopped writer add: %v", err)
			}
		})
	}
}

// TestWriterEnsembleChangeFailsInRecovery: once the ledger is IN_RECOVERY
// (a recoverer's first step, before it has fenced anything), the writer's
// ensemble-change CAS fails and the writer stops with ErrFenced; the
// metadata keeps the recoverer's version.
func TestWriterEnsembleChangeFailsInRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 14, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 5)

		key := ledger.LedgerKey(region, w.ID())
		kv, err := e.store.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		if err := json.Unmarshal(kv.Value, &md); err != nil {
			t.Fatal(err)
		}
		md["state"] = string(ledger.StateInRecovery)
		b, _ := json.Marshal(md)
		if _, err := e.store.Update(t.Context(), key, b, kv.ModRevision); err != nil {
			t.Fatal(err)
		}

		ens := mustMetadata(t, c, w.ID()).LastEnsemble()
		e.bookies.SetDown(ens[0], true)
		f, err := w.Add(t.Context(), payload(5))
		if err != nil {
			t.Fatal(err)
		}
		// Entry 5 may still reach Qa on the two live bookies (nothing is
		// fenced), but the ensemble change must not happen, and the writer
		// must stop. The down bookie's refusal can reach the writer after
		// the live bookies' acks of entry 5 (and of a next entry: that
		// entry succeeding is safe, since nothing is fenced yet), so wait
		// until the writer has handled every result before adding again.
		f.Wait(t.Context())
		synctest.Wait()
		if _, err := w.Append(t.Context(), payload(6)); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("add after the writer's ensemble change met IN_RECOVERY: %v", err)
		}
		got := mustMetadata(t, c, w.ID())
		if got.State != ledger.StateInRecovery || len(got.Fragments) != 1 || !slices.Equal(got.LastEnsemble(), ens) {
			t.Fatalf("metadata after the writer's failed CAS: %+v", got)
		}
	})
}

func mustMetadata(t *testing.T, c *ledger.Client, id int64) *ledger.Metadata {
	t.Helper()
	md, err := c.Metadata(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return md
}
