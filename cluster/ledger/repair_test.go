package ledger_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// outside returns the bookies of all that none of the ensembles holds.
func outside(all []string, ensembles ...[]string) []string {
	var out []string
	for _, b := range all {
		if !slices.ContainsFunc(ensembles, func(ens []string) bool { return slices.Contains(ens, b) }) {
			out = append(out, b)
		}
	}
	return out
}

var sixBookies = []string{"b1", "b2", "b3", "b4", "b5", "b6"}

// closedLedger writes n entries to a new ledger of e/qw/qa and closes it,
// once every copy has landed.
func closedLedger(t *testing.T, c *ledger.Client, e, qw, qa, n int) int64 {
	t.Helper()
	w := create(t, c, e, qw, qa)
	appendN(t, w, 0, n)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // copies past Qa land after confirmation
	return w.ID()
}

// repairSlot re-replicates what bookie from holds of fragment frag onto to,
// as auto-recovery does: copy, then swap by CAS at the snapshot's revision.
func repairSlot(t *testing.T, c *ledger.Client, id int64, frag int, from, to string) ledger.Snapshot {
	t.Helper()
	s, err := c.Snapshot(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	slot := slices.Index(s.Metadata.Fragments[frag].Ensemble, from)
	if slot < 0 {
		t.Fatalf("%s is not in fragment %d: %+v", from, frag, s.Metadata.Fragments)
	}
	if _, err := c.CopyFragment(t.Context(), s.Metadata, frag, slot, to, ledger.CopyOptions{}); err != nil {
		t.Fatalf("copy fragment %d slot %d to %s: %v", frag, slot, to, err)
	}
	ns, err := c.ApplyRepair(t.Context(), s, []ledger.Swap{{Fragment: frag, Slot: slot, From: from, To: to}}, "", 0)
	if err != nil {
		t.Fatalf("swap %s for %s in fragment %d: %v", to, from, frag, err)
	}
	return ns
}

// TestWriterGoesOnAfterRepair: a repair of an earlier fragment lands while
// the writer writes; the writer's adds go on, its next ensemble change is
// made on top of the repair (its CAS conflicts, it adopts the repair, and
// applies its change again), and its close keeps the repair. Without the
// writer accepting repairs, the ensemble change fails with ErrFenced.
func TestWriterGoesOnAfterRepair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 31, sixBookies...)
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 40)
		first := mustMetadata(t, c, w.ID()).LastEnsemble()
		lost := first[0]
		e.bookies.SetDown(lost, true)
		appendN(t, w, 40, 40) // an ensemble change: fragment 1 replaces lost
		md := mustMetadata(t, c, w.ID())
		if len(md.Fragments) != 2 {
			t.Fatalf("no ensemble change: %+v", md.Fragments)
		}
		spare := outside(sixBookies, md.Fragments[0].Ensemble, md.LastEnsemble())[0]
		repaired := repairSlot(t, e.client("repairer", testConfig()), w.ID(), 0, lost, spare)

		// The writer has not seen the repair: its next ensemble change
		// conflicts, adopts the repair and is made on top of it.
		appendN(t, w, 80, 10)
		e.bookies.SetDown(md.LastEnsemble()[1], true)
		appendN(t, w, 90, 30)
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("close after a repair: %v", err)
		}
		final := mustMetadata(t, c, w.ID())
		if len(final.Fragments) != 3 || !slices.Equal(final.Fragments[0].Ensemble, repaired.Metadata.Fragments[0].Ensemble) ||
			final.State != ledger.StateClosed || final.LastEntry != 119 {
			t.Fatalf("final metadata %+v lost the repair %+v or the writer's changes", final, repaired.Metadata.Fragments)
		}
		st, err := w.Stats(t.Context())
		if err == nil || st.Err != nil {
			t.Fatalf("a closed writer's stats: %+v, %v", st, err)
		}
		// Every entry reads back, fragment 0's from where the repair put
		// them, with its original bookie still down.
		r, err := e.client("r", testConfig()).OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, r, 120)
	})
}

// TestIdleWriterAdoptsRepair: a writer waiting for a spare (delayed
// ensemble change) re-reads its metadata every RetryInterval; a repair
// found there is adopted, not taken for fencing, and the ensemble changes
// once a spare registers.
func TestIdleWriterAdoptsRepair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 32, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 20)
		// An add is confirmed by two of its three copies; let the third
		// land too. The repair below reads fragment 0 from its one member
		// left up, which must hold every entry.
		synctest.Wait()
		md := mustMetadata(t, c, w.ID())
		lost := md.LastEnsemble()[0]
		e.bookies.SetDown(lost, true)
		appendN(t, w, 20, 20) // fragment 1 takes the fourth bookie
		md = mustMetadata(t, c, w.ID())
		if len(md.Fragments) != 2 {
			t.Fatalf("no ensemble change: %+v", md.Fragments)
		}
		// The only bookie outside fragment 0 is in the last ensemble: a
		// repair may use it.
		spare := outside(md.LastEnsemble(), md.Fragments[0].Ensemble)[0]
		// A member of the last ensemble fails with no spare: the writer
		// retries every RetryInterval, reading its metadata each time.
		e.bookies.SetDown(md.LastEnsemble()[1], true)
		appendN(t, w, 40, 5)
		repairSlot(t, e.client("repairer", testConfig()), w.ID(), 0, lost, spare)
		appendN(t, w, 45, 5)
		synctest.Wait()
		if st, err := w.Stats(t.Context()); err != nil || st.Err != nil {
			t.Fatalf("writer after the repair: %+v, %v", st, err)
		}
		e.addBookie("b5")
		appendN(t, w, 50, 10)
		// The failed bookie's refusals may reach the writer after the
		// adds were confirmed without it: let them, and the ensemble
		// change they cause, happen before the close.
		synctest.Wait()
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("close: %v", err)
		}
		final := mustMetadata(t, c, w.ID())
		if slices.Contains(final.Fragments[0].Ensemble, lost) || len(final.Fragments) != 3 {
			t.Fatalf("final metadata %+v: want the repair of fragment 0 and the writer's second change", final.Fragments)
		}
	})
}

// TestRepairRefusesWhatIsNotFinal: the last fragment of an open ledger is
// its writer's and a ledger in recovery its recoverer's; a change to the
// last fragment (as another writer would make) still fences the writer.
func TestRepairRefusesWhatIsNotFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 33, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 10)
		s, err := c.Snapshot(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		ens := s.Metadata.LastEnsemble()
		spare := outside([]string{"b1", "b2", "b3", "b4"}, ens)[0]
		if _, err := c.CopyFragment(t.Context(), s.Metadata, 0, 0, spare, ledger.CopyOptions{}); !errors.Is(err, ledger.ErrLedgerOpen) {
			t.Fatalf("copy of an open ledger's last fragment: %v", err)
		}
		swap := []ledger.Swap{{Fragment: 0, Slot: 0, From: ens[0], To: spare}}
		if _, err := c.ApplyRepair(t.Context(), s, swap, "", 0); !errors.Is(err, ledger.ErrLedgerOpen) {
			t.Fatalf("swap in an open ledger's last fragment: %v", err)
		}
		// What a second writer would do: change the last fragment.
		kv, err := e.store.Get(t.Context(), ledger.LedgerKey(region, w.ID()))
		if err != nil {
			t.Fatal(err)
		}
		changed := bytes.Replace(kv.Value, []byte(`"`+ens[0]+`"`), []byte(`"`+spare+`"`), 1)
		if _, err := e.store.Update(t.Context(), kv.Key, changed, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
		e.bookies.SetDown(ens[1], true)
		if _, err := w.Append(t.Context(), payload(10)); err == nil {
			synctest.Wait()
		}
		if _, err := w.Append(t.Context(), payload(11)); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("add after the last fragment changed under the writer: %v", err)
		}

		rec, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		closed, err := c.Snapshot(t.Context(), rec.ID())
		if err != nil || closed.Metadata.State != ledger.StateClosed {
			t.Fatalf("after recovery: %+v, %v", closed, err)
		}
		// A stale snapshot's swap conflicts.
		if _, err := c.ApplyRepair(t.Context(), s, swap, "", 0); !errors.Is(err, ledger.ErrLedgerOpen) && !errors.Is(err, meta.ErrConflict) {
			t.Fatalf("swap at a stale revision: %v", err)
		}
	})
}

// TestRepairCopiesFromGoodCopies: an entry missing on one survivor and
// damaged on another is copied from the third; an entry with no good copy
// left fails the copy with ErrNoGoodCopy, never a silent skip; a
// replacement that fails the adds is reported as ErrReplacementFailed.
func TestRepairCopiesFromGoodCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 34, sixBookies...)
		c := e.client("w", testConfig())
		id := closedLedger(t, c, 4, 4, 2, 30)
		s, err := c.Snapshot(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		ens := s.Metadata.Fragments[0].Ensemble
		spares := outside(sixBookies, ens)
		lost := ens[0]
		e.bookies.SetDown(lost, true)
		e.bookies.Corrupt(ens[1], id, 7)
		e.bookies.Corrupt(ens[2], id, 7)
		st, err := c.CopyFragment(t.Context(), s.Metadata, 0, 0, spares[0], ledger.CopyOptions{InFlight: 3})
		if err != nil || st.Entries != 30 {
			t.Fatalf("copy with one good copy of entry 7: %+v, %v", st, err)
		}
		for i := int64(0); i < 30; i++ {
			if !e.bookies.Has(spares[0], id, i) {
				t.Fatalf("entry %d not copied", i)
			}
		}
		// Every entry still has a good copy here, so that the copy can
		// only fail on its replacement (with entry 7 gone too, which error
		// comes first would depend on the copies' interleaving).
		e.bookies.SetReadOnly(spares[1], true)
		if _, err := c.CopyFragment(t.Context(), s.Metadata, 0, 1, spares[1], ledger.CopyOptions{}); !errors.Is(err, ledger.ErrReplacementFailed) {
			t.Fatalf("copy to a read-only bookie: %v", err)
		}
		e.bookies.SetReadOnly(spares[1], false)
		e.bookies.Corrupt(ens[3], id, 7)
		if _, err := c.CopyFragment(t.Context(), s.Metadata, 0, 0, spares[1], ledger.CopyOptions{}); !errors.Is(err, ledger.ErrNoGoodCopy) {
			t.Fatalf("copy with no good copy of entry 7 left: %v", err)
		}
	})
}

// TestReaderFollowsRepairOfClosedLedger: a reader that opened a closed
// ledger before a repair moved its copies reads them where they are now,
// once every original copy of an entry is gone.
func TestReaderFollowsRepairOfClosedLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 35, sixBookies...)
		c := e.client("w", testConfig())
		id := closedLedger(t, c, 3, 3, 2, 20)
		r, err := e.client("r", testConfig()).OpenForRead(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		ens := slices.Clone(mustMetadata(t, c, id).Fragments[0].Ensemble)
		spares := outside(sixBookies, ens)
		for i, lost := range ens {
			e.bookies.SetDown(lost, true)
			repairSlot(t, c, id, 0, lost, spares[i])
		}
		readAll(t, r, 20)
	})
}
