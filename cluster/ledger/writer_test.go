package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
)

func create(t *testing.T, c *ledger.Client, e, qw, qa int) *ledger.Writer {
	t.Helper()
	w, err := c.Create(t.Context(), e, qw, qa, ledger.Groups{}, map[string]string{"owner": t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func appendN(t *testing.T, w *ledger.Writer, from, n int) {
	t.Helper()
	futs := make([]*ledger.AddFuture, 0, n)
	for i := from; i < from+n; i++ {
		f, err := w.Add(t.Context(), payload(i))
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		futs = append(futs, f)
	}
	for i, f := range futs {
		id, err := f.Wait(t.Context())
		if err != nil || id != int64(from+i) {
			t.Fatalf("add %d: entry %d, err %v", from+i, id, err)
		}
	}
}

func readAll(t *testing.T, r *ledger.Reader, want int) {
	t.Helper()
	if lac := r.LastAddConfirmed(); lac != int64(want-1) {
		t.Fatalf("LAC %d, want %d", lac, want-1)
	}
	if want == 0 {
		return
	}
	got, err := r.Read(t.Context(), 0, int64(want-1))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range got {
		if e.ID != int64(i) || !bytes.Equal(e.Payload, payload(i)) {
			t.Fatalf("entry %d: id %d, payload mismatch", i, e.ID)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := ledger.DefaultConfig("r", 1).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*ledger.Config){
		"no region":              func(c *ledger.Config) { c.Region = "" },
		"no region number":       func(c *ledger.Config) { c.RegionNumber = 0 },
		"region number too high": func(c *ledger.Config) { c.RegionNumber = ledger.MaxRegionNumber + 1 },
		"zero timeout":           func(c *ledger.Config) { c.AddTimeout = 0 },
		"no in-flight":           func(c *ledger.Config) { c.MaxInFlightEntries = 0 },
		"tiny byte cap":          func(c *ledger.Config) { c.MaxInFlightBytes = 10 },
		"huge poll wait":         func(c *ledger.Config) { c.LACPollWait = time.Hour },
		"no speculation":         func(c *ledger.Config) { c.SpeculativeReadTimeout = 0 },
		"no slow memory":         func(c *ledger.Config) { c.SlowBookieMemory = 0 },
		"no clock":               func(c *ledger.Config) { c.Clock = nil },
	} {
		cfg := ledger.DefaultConfig("r", 1)
		mut(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ledger.ErrInvalidConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestCreateValidatesQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		for _, q := range [][3]int{{3, 2, 3}, {2, 3, 2}, {3, 3, 0}} {
			if _, err := c.Create(t.Context(), q[0], q[1], q[2], ledger.Groups{}, nil); !errors.Is(err, ledger.ErrInvalidConfig) {
				t.Errorf("%v: err = %v", q, err)
			}
		}
		if _, err := c.Create(t.Context(), 4, 3, 2, ledger.Groups{}, nil); !errors.Is(err, ledger.ErrNotEnoughBookies) {
			t.Errorf("E=4 on 3 bookies: err = %v", err)
		}
	})
}

func TestAddReadClose(t *testing.T) {
	for _, q := range [][3]int{{1, 1, 1}, {3, 3, 2}, {3, 2, 2}, {3, 3, 3}} {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, 1, "b1", "b2", "b3", "b4")
			c := e.client("w", testConfig())
			w := create(t, c, q[0], q[1], q[2])
			w2 := create(t, c, q[0], q[1], q[2])
			if w2.ID() <= w.ID() {
				t.Fatalf("ledger ids not increasing: %d then %d", w.ID(), w2.ID())
			}
			appendN(t, w, 0, 100)

			// Open while the writer is live: reads go up to the LAC
			// bookies have seen (the explicit LAC brings it to 99).
			rc := e.client("r", testConfig())
			r, err := rc.OpenForRead(t.Context(), w.ID())
			if err != nil {
				t.Fatal(err)
			}
			if lac, err := r.WaitLAC(t.Context(), 98); err != nil || lac != 99 {
				t.Fatalf("WaitLAC = %d, %v", lac, err)
			}
			readAll(t, r, 100)
			if _, err := r.Read(t.Context(), 0, 100); !errors.Is(err, ledger.ErrBeyondLAC) {
				t.Fatalf("read past LAC: %v", err)
			}

			if err := w.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			md, err := c.Metadata(t.Context(), w.ID())
			if err != nil {
				t.Fatal(err)
			}
			var length int64
			for i := range 100 {
				length += int64(len(payload(i)))
			}
			if md.State != ledger.StateClosed || md.LastEntry != 99 || md.Length != length || md.Custom["owner"] != t.Name() {
				t.Fatalf("metadata after close: %+v", md)
			}
			if _, err := w.Add(t.Context(), []byte("x")); !errors.Is(err, ledger.ErrWriterClosed) {
				t.Fatalf("add after close: %v", err)
			}
			if lac, err := r.WaitLAC(t.Context(), 99); !errors.Is(err, ledger.ErrLedgerClosed) || lac != 99 {
				t.Fatalf("WaitLAC on closed ledger = %d, %v", lac, err)
			}
			r2, err := rc.OpenForRead(t.Context(), w.ID())
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, r2, 100)
			// Every entry sits on exactly its write set.
			for i := int64(0); i < 100; i++ {
				ens := md.EnsembleFor(i)
				n := 0
				for _, slot := range md.Quorum().WriteSet(i) {
					if e.bookies.Has(ens[slot], w.ID(), i) {
						n++
					}
				}
				if n < q[2] {
					t.Fatalf("entry %d on %d bookies of its write set, want >= Qa=%d", i, n, q[2])
				}
			}
		})
	}
}

// TestTailingReaderSeesIdleWriter checks the explicit LAC: a reader waiting
// for the last entry of an idle writer gets it without another add.
func TestTailingReaderSeesIdleWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 2, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		r, err := e.client("r", testConfig()).OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		seen := int64(-1)
		for i := range 5 {
			if _, err := w.Append(t.Context(), payload(i)); err != nil {
				t.Fatal(err)
			}
			lac, err := r.WaitLAC(t.Context(), seen)
			if err != nil || lac != int64(i) {
				t.Fatalf("after add %d: WaitLAC = %d, %v", i, lac, err)
			}
			seen = lac
		}
		readAll(t, r, 5)
	})
}

func TestReadRetriesOtherReplicaOnChecksum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 3, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 3)
		appendN(t, w, 0, 3)
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		md, _ := c.Metadata(t.Context(), w.ID())
		first := md.EnsembleFor(1)[md.Quorum().WriteSet(1)[0]]
		e.bookies.Corrupt(first, w.ID(), 1)
		r, err := c.OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, r, 3)
		if s := c.Stats(); s.ChecksumErrors != 1 {
			t.Fatalf("checksum errors = %d, want 1", s.ChecksumErrors)
		}
	})
}

// TestReadRangeConcurrently: Read has a range's reads in flight together,
// as BookKeeper's client does. With 5 ms each way for every read, 100
// entries (more than readsInFlight) take two round trips, not a hundred,
// and come back in order.
func TestReadRangeConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 21, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 2, 2)
		appendN(t, w, 0, 100)
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.bookies.SetDelay(func(_, _ string, op ledgertest.Op, _ int64, _ bool) time.Duration {
			if op == ledgertest.OpRead {
				return 5 * time.Millisecond
			}
			return 0
		})
		r, err := c.OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := r.Read(t.Context(), 0, 99)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 20*time.Millisecond {
			t.Errorf("reading 100 entries took %v at 10 ms a round trip: the reads were not in flight together", took)
		}
		for i, en := range got {
			if en.ID != int64(i) || !bytes.Equal(en.Payload, payload(i)) {
				t.Fatalf("entry %d: got entry %d, or its payload differs", i, en.ID)
			}
		}
	})
}

func TestBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4, "b1", "b2", "b3")
		cfg := testConfig()
		cfg.MaxInFlightEntries = 2
		cfg.AddTimeout = time.Minute
		c := e.client("w", cfg)
		w := create(t, c, 3, 3, 2)
		for _, b := range []string{"b1", "b2", "b3"} {
			e.bookies.Partition("w", b)
		}
		var futs []*ledger.AddFuture
		for i := range 2 {
			f, err := w.Add(t.Context(), payload(i))
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := w.Add(ctx, payload(2)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("third add with two in flight: %v", err)
		}
		e.bookies.HealAll()
		f, err := w.Add(t.Context(), payload(2))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		for i, f := range futs {
			if id, err := f.Wait(t.Context()); err != nil || id != int64(i) {
				t.Fatalf("add %d: %d, %v", i, id, err)
			}
		}
		big := make([]byte, cfg.MaxInFlightBytes+1)
		if _, err := w.Add(t.Context(), big); !errors.Is(err, ledger.ErrEntryTooLarge) {
			t.Fatalf("oversized add: %v", err)
		}
	})
}

func TestFencedWriterCannotAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 5, "b1", "b2", "b3")
		w := create(t, e.client("w", testConfig()), 3, 3, 2)
		appendN(t, w, 0, 10)
		r, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if md := r.Metadata(); md.State != ledger.StateClosed || md.LastEntry != 9 {
			t.Fatalf("recovered metadata %+v", md)
		}
		readAll(t, r, 10)
		if _, err := w.Append(t.Context(), payload(10)); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("add after recovery: %v", err)
		}
		if err := w.Close(t.Context()); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("close after recovery: %v", err)
		}
		// Recovering a closed ledger is a no-op that returns the result.
		r2, err := e.client("rec2", testConfig()).OpenAndRecover(t.Context(), w.ID())
		if err != nil || r2.LastAddConfirmed() != 9 {
			t.Fatalf("second recovery: %v, %v", r2, err)
		}
	})
}

func TestRecoverEmptyLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 6, "b1", "b2", "b3")
		w := create(t, e.client("w", testConfig()), 3, 2, 2)
		r, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if md := r.Metadata(); md.LastEntry != -1 || md.Length != 0 {
			t.Fatalf("recovered empty ledger: %+v", md)
		}
		if _, err := w.Append(t.Context(), payload(0)); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("add after recovery: %v", err)
		}
	})
}

// TestEnsembleChangeWithSpare kills an ensemble member mid-stream with a
// spare registered: no add fails, the change shows in the metadata, and a
// reader sees exactly the confirmed prefix.
func TestEnsembleChangeWithSpare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 7, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 50)
		md, _ := c.Metadata(t.Context(), w.ID())
		victim := md.LastEnsemble()[1]
		e.bookies.SetDown(victim, true)
		appendN(t, w, 50, 50)
		md, _ = c.Metadata(t.Context(), w.ID())
		// The new fragment starts at the first entry not yet confirmed when
		// the failure was seen: 50 or a little later.
		first := md.Fragments[len(md.Fragments)-1].FirstEntry
		if len(md.Fragments) != 2 || slices.Contains(md.LastEnsemble(), victim) || first < 50 || first > 99 {
			t.Fatalf("no ensemble change in metadata: %+v", md.Fragments)
		}
		st, err := w.Stats(t.Context())
		if err != nil || st.EnsembleChanges != 1 || len(st.FailedBookies) != 0 {
			t.Fatalf("stats %+v, %v", st, err)
		}
		// Entries of the new fragment reach all three of its bookies (the
		// third copy may land after confirmation: let RPCs settle).
		synctest.Wait()
		for i := first; i < 100; i++ {
			for _, b := range md.LastEnsemble() {
				if !e.bookies.Has(b, w.ID(), i) {
					t.Fatalf("entry %d missing on %s", i, b)
				}
			}
		}
		r, err := e.client("r", testConfig()).OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if lac, err := r.WaitLAC(t.Context(), 98); err != nil || lac != 99 {
			t.Fatalf("reader LAC %d, %v", lac, err)
		}
		readAll(t, r, 100)
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDelayedEnsembleChange kills a member with no spare: adds go on with Qa
// acks, the writer reports itself under-replicated, and the ensemble changes
// when a fourth bookie registers.
func TestDelayedEnsembleChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 8, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 20)
		e.bookies.SetDown("b2", true)
		appendN(t, w, 20, 30)
		md, _ := c.Metadata(t.Context(), w.ID())
		if len(md.Fragments) != 1 {
			t.Fatalf("ensemble changed with no spare: %+v", md.Fragments)
		}
		st, _ := w.Stats(t.Context())
		if !st.UnderReplicated || !slices.Equal(st.FailedBookies, []string{"b2"}) {
			t.Fatalf("stats without spare: %+v", st)
		}
		e.addBookie("b4")
		synctest.Wait() // the watch delivers b4 and the writer reacts
		if st, _ = w.Stats(t.Context()); st.EnsembleChanges != 1 || st.UnderReplicated != true {
			t.Fatalf("stats after b4 registered: %+v", st)
		}
		appendN(t, w, 50, 10)
		want := slices.Clone(md.LastEnsemble())
		want[slices.Index(want, "b2")] = "b4"
		md, _ = c.Metadata(t.Context(), w.ID())
		if len(md.Fragments) != 2 || !slices.Equal(md.LastEnsemble(), want) || md.Fragments[1].FirstEntry != 50 {
			t.Fatalf("after b4 registered: %+v", md.Fragments)
		}
		synctest.Wait() // third copies may land after confirmation
		for i := int64(50); i < 60; i++ {
			if !e.bookies.Has("b4", w.ID(), i) {
				t.Fatalf("entry %d not on the new bookie", i)
			}
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		r, err := c.OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, r, 60)
	})
}

func TestReadOnlyBookieReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 9, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 3, 3)
		md, _ := c.Metadata(t.Context(), w.ID())
		ro := md.LastEnsemble()[0]
		e.bookies.SetReadOnly(ro, true)
		e.bookies.InjectError(md.LastEnsemble()[2], ledgertest.OpAdd, errors.New("disk hiccup"))
		appendN(t, w, 0, 10)
		md, _ = c.Metadata(t.Context(), w.ID())
		if slices.Contains(md.LastEnsemble(), ro) {
			t.Fatalf("read-only bookie still in ensemble: %v", md.Fragments)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReaderFollowsEnsembleChange: a reader that opened before an ensemble
// change reads entries of the new fragment from the new ensemble (its LAC
// poll brings the new metadata; Read also re-reads it when every replica of
// an entry fails).
func TestReaderFollowsEnsembleChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 15, "b1", "b2", "b3", "b4")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 1, 1) // each entry on exactly one bookie
		appendN(t, w, 0, 6)
		r, err := e.client("r", testConfig()).OpenForRead(t.Context(), w.ID())
		if err != nil {
			t.Fatal(err)
		}
		victim := mustMetadata(t, c, w.ID()).LastEnsemble()[1]
		e.bookies.SetDown(victim, true)
		appendN(t, w, 6, 12)
		if len(mustMetadata(t, c, w.ID()).Fragments) != 2 {
			t.Fatal("no ensemble change")
		}
		if lac, err := r.WaitLAC(t.Context(), 16); err != nil || lac != 17 {
			t.Fatalf("WaitLAC = %d, %v", lac, err)
		}
		// Entries 1 and 4 lived on the victim only: they are lost with it,
		// as Qw=1 promises. The new fragment's entries must all be readable.
		first := mustMetadata(t, c, w.ID()).Fragments[1].FirstEntry
		got, err := r.Read(t.Context(), first, 17)
		if err != nil {
			t.Fatalf("reading the new fragment: %v", err)
		}
		for _, en := range got {
			if !bytes.Equal(en.Payload, payload(int(en.ID))) {
				t.Fatalf("entry %d differs", en.ID)
			}
		}
	})
}

// TestIdleWriterLearnsFencing: a writer with nothing to add learns from its
// explicit LAC, which fenced bookies refuse, that recovery took its ledger.
func TestIdleWriterLearnsFencing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 16, "b1", "b2", "b3")
		cfg := testConfig()
		w := create(t, e.client("w", cfg), 3, 3, 2)
		appendN(t, w, 0, 3) // the explicit LAC for entry 2 is due in 10ms
		synctest.Wait()     // third copies land before the fence
		if _, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w.ID()); err != nil {
			t.Fatal(err)
		}
		if st := mustStats(t, w); st.Err != nil {
			t.Fatalf("writer fenced before its explicit LAC was due: %+v", st)
		}
		time.Sleep(2 * cfg.ExplicitLACInterval) // virtual time: the LAC goes out
		synctest.Wait()
		if st := mustStats(t, w); !errors.Is(st.Err, ledger.ErrFenced) {
			t.Fatalf("idle writer after its explicit LAC met fenced bookies: %+v", st)
		}
	})
}

func TestDeleteLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 17, "b1", "b2", "b3")
		c := e.client("w", testConfig())
		w := create(t, c, 3, 2, 2)
		if err := c.Delete(t.Context(), w.ID()); !errors.Is(err, ledger.ErrLedgerOpen) {
			t.Fatalf("delete open ledger: %v", err)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(t.Context(), w.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OpenForRead(t.Context(), w.ID()); !errors.Is(err, ledger.ErrLedgerNotFound) {
			t.Fatalf("open deleted ledger: %v", err)
		}
	})
}

// TestLedgerIDsUniqueUnderConcurrency creates ledgers from several clients
// at once: the CAS counter hands out distinct ids.
func TestLedgerIDsUniqueUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 18, "b1", "b2", "b3")
		ids := make(chan int64, 40)
		for i := range 4 {
			c := e.client(fmt.Sprintf("c%d", i), testConfig())
			go func() {
				for range 10 {
					w, err := c.Create(t.Context(), 1, 1, 1, ledger.Groups{}, nil)
					if err != nil {
						t.Error(err)
						ids <- -1
						continue
					}
					w.Stop()
					ids <- w.ID()
				}
			}()
		}
		seen := map[int64]bool{}
		for range 40 {
			id := <-ids
			if id < 1 || seen[id] {
				t.Fatalf("ledger id %d invalid or handed out twice", id)
			}
			seen[id] = true
		}
	})
}

// lossyStore applies an Update and then, while armed, reports a timeout
// instead of its result: the answer of a write that landed is lost.
type lossyStore struct {
	meta.Store
	mu    sync.Mutex
	armed int
}

func (s *lossyStore) arm(n int) {
	s.mu.Lock()
	s.armed = n
	s.mu.Unlock()
}

func (s *lossyStore) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	rev, err := s.Store.Update(ctx, key, value, modRev)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.armed > 0 && strings.Contains(key, "/ledgers/") {
		s.armed--
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

// TestLostMetadataAnswers: an ensemble change and a close whose CAS landed
// but whose answer was lost are recognised as the writer's own on the retry,
// not taken for fencing, and nothing is confirmed in between.
func TestLostMetadataAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 20, "b1", "b2", "b3", "b4")
		store := &lossyStore{Store: e.store}
		c, err := ledger.New(testConfig(), store, e.bookies.Client("w"), testLogger(t), rand.New(rand.NewPCG(20, 1)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 10)
		store.arm(1)
		e.bookies.SetDown(mustMetadata(t, c, w.ID()).LastEnsemble()[2], true)
		appendN(t, w, 10, 10)
		if st := mustStats(t, w); st.Err != nil || st.EnsembleChanges != 1 {
			t.Fatalf("writer after a lost ensemble-change answer: %+v", st)
		}
		if md := mustMetadata(t, c, w.ID()); len(md.Fragments) != 2 {
			t.Fatalf("fragments: %+v", md.Fragments)
		}
		store.arm(1)
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("close with a lost answer: %v", err)
		}
		if md := mustMetadata(t, c, w.ID()); md.State != ledger.StateClosed || md.LastEntry != 19 {
			t.Fatalf("after close: %+v", md)
		}
	})
}

// TestAddFuncReportsInOrder checks AddFunc's contract: each add is reported
// exactly once, in entry order, successes and failures alike, and an add
// refused by a stopped writer is not reported at all.
func TestAddFuncReportsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1, "b1")
		w := create(t, e.client("w", testConfig()), 1, 1, 1)
		type outcome struct {
			add   int
			entry int64
			err   error
		}
		var mu sync.Mutex
		var got []outcome
		addFunc := func(i int) {
			t.Helper()
			err := w.AddFunc(t.Context(), payload(i), func(entry int64, err error) {
				mu.Lock()
				got = append(got, outcome{i, entry, err})
				mu.Unlock()
			})
			if err != nil {
				t.Fatalf("add %d: %v", i, err)
			}
		}
		for i := range 50 {
			addFunc(i)
		}
		synctest.Wait()
		// The bookie stops answering: the next adds stay pending until the
		// writer stops, which fails them.
		e.bookies.Partition("w", "b1")
		for i := 50; i < 55; i++ {
			addFunc(i)
		}
		synctest.Wait()
		w.Stop()
		if err := w.AddFunc(t.Context(), payload(55), func(int64, error) { t.Error("a refused add was reported") }); !errors.Is(err, ledger.ErrWriterClosed) {
			t.Fatalf("add after Stop: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 55 {
			t.Fatalf("%d outcomes, want 55", len(got))
		}
		for i, o := range got {
			switch {
			case o.add != i:
				t.Fatalf("outcome %d is add %d's", i, o.add)
			case i < 50 && (o.err != nil || o.entry != int64(i)):
				t.Fatalf("add %d: entry %d, err %v", i, o.entry, o.err)
			case i >= 50 && !errors.Is(o.err, ledger.ErrWriterClosed):
				t.Fatalf("add %d after the partition: entry %d, err %v", i, o.entry, o.err)
			}
		}
	})
}
