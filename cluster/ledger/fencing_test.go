package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
)

var (
	flagSeeds = flag.Int("ledger.seeds", 200, "number of seeds TestFencingProperty runs")
	flagSeed  = flag.Int64("ledger.seed", -1, "run TestFencingProperty for this one seed only (replay)")
)

// quorums the property test draws from, with the bookies each needs at least.
var propertyQuorums = [][3]int{
	{3, 3, 2}, {3, 3, 2}, {3, 2, 2}, {3, 3, 1}, {4, 3, 2}, {5, 3, 2}, {4, 2, 1}, {3, 3, 3}, {1, 1, 1},
}

// TestFencingProperty is the fencing property test. Each seed builds a world
// of in-memory bookies and an in-memory store, starts a writer adding
// entries in a pipeline, cuts the writer off from some bookies (a partial
// partition), and, with adds still in flight, runs one or two recoverers at
// once; some seeds partition a recoverer from a bookie for a while (its reads
// time out, or are refused at once) or restart a bookie during recovery, and
// half of them run a repairer (auto-recovery's copy and swap) throughout. Latencies are random, so
// adds land on bookies before, during and after fencing. Then it checks:
//
//   - the old writer's next add fails with ErrFenced, and no add it had in
//     flight succeeds past the recovered last entry;
//   - the closed ledger holds every entry the writer had confirmed,
//     byte-identical;
//   - two recoverers agree on lastEntry;
//   - a tailing reader never saw an entry past the recovered last entry,
//     nor a wrong payload.
//
// A failing seed prints itself; replay it with -ledger.seed=N. Time is
// virtual (testing/synctest), so the schedule below costs no wall time.
func TestFencingProperty(t *testing.T) {
	seeds := make([]uint64, 0, *flagSeeds)
	if *flagSeed >= 0 {
		seeds = append(seeds, uint64(*flagSeed))
	} else {
		for s := range *flagSeeds {
			seeds = append(seeds, uint64(s))
		}
	}
	var failed []uint64
	for _, seed := range seeds {
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fencingScenario(t, seed) })
		})
		if !ok {
			failed = append(failed, seed)
			t.Logf("seed %d failed; replay: go test ./cluster/ledger -run 'TestFencingProperty' -ledger.seed=%d -v", seed, seed)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d seeds failed: %v", len(failed), len(seeds), failed)
	}
}

type addOutcome struct {
	entry int64
	err   error
}

func fencingScenario(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 0xfe4ce))
	var q [3]int
	for {
		q = propertyQuorums[rnd.IntN(len(propertyQuorums))]
		if q[0] <= 5 {
			break
		}
	}
	nBookies := q[0] + rnd.IntN(3)
	ids := make([]string, nBookies)
	for i := range ids {
		ids[i] = fmt.Sprintf("b%d", i)
	}
	e := newEnv(t, seed, ids...)
	slow := map[string]time.Duration{}
	for _, id := range ids {
		slow[id] = time.Duration(rnd.IntN(4)) * time.Millisecond
	}
	// Each message's latency is a hash of what it is (and how many times
	// the same message went before), not a draw from a shared stream, so
	// that a seed replays the same latencies whatever order goroutines run.
	type msgKey struct {
		client, bookie string
		op             ledgertest.Op
		entry          int64
		back           bool
	}
	sent := map[msgKey]uint64{}
	e.bookies.SetDelay(func(client, bookie string, op ledgertest.Op, entry int64, back bool) time.Duration {
		k := msgKey{client, bookie, op, entry, back}
		sent[k]++
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%s/%d/%d/%v/%d", seed, client, bookie, op, entry, back, sent[k])
		return slow[bookie] + time.Duration(h.Sum64()%3000)*time.Microsecond
	})

	cfg := testConfig()
	cfg.AddTimeout = 40 * time.Millisecond
	cfg.ReadTimeout = 40 * time.Millisecond
	cfg.RetryInterval = 15 * time.Millisecond
	cfg.MaxInFlightEntries = 4 + rnd.IntN(30)
	// The production interval, below the adds' random gaps: the writer
	// both piggybacks its LAC and sends it explicitly while it is fenced.
	cfg.ExplicitLACInterval = ledger.DefaultConfig(region, 1).ExplicitLACInterval
	wc := e.client("w", cfg)
	w, err := wc.Create(t.Context(), q[0], q[1], q[2], ledger.Groups{}, nil)
	if err != nil {
		t.Fatalf("create %v: %v", q, err)
	}
	defer w.Stop()
	md, err := wc.Metadata(t.Context(), w.ID())
	if err != nil {
		t.Fatal(err)
	}
	ens := md.LastEnsemble()
	t.Logf("seed %d: quorum %v, bookies %d, ensemble %v", seed, q, nBookies, ens)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	// The writer: pipelined adds with random gaps until told to stop or an
	// add fails.
	var (
		outMu    sync.Mutex
		outcomes []addOutcome // by add order = entry id
	)
	stopAdding := make(chan struct{})
	adderDone := make(chan struct{})
	maxAdds := 20 + rnd.IntN(200)
	gap := rand.New(rand.NewPCG(seed, 0x9a9))
	go func() {
		defer close(adderDone)
		var futs sync.WaitGroup
		defer futs.Wait()
		for i := range maxAdds {
			select {
			case <-stopAdding:
				return
			default:
			}
			f, err := w.Add(ctx, payload(i))
			if err != nil {
				return
			}
			outMu.Lock()
			outcomes = append(outcomes, addOutcome{entry: -1})
			outMu.Unlock()
			futs.Add(1)
			go func() {
				defer futs.Done()
				id, err := f.Result()
				outMu.Lock()
				outcomes[i] = addOutcome{entry: id, err: err}
				outMu.Unlock()
				if err == nil && id != int64(i) {
					t.Errorf("add %d confirmed as entry %d", i, id)
				}
			}()
			time.Sleep(time.Duration(gap.IntN(1500)) * time.Microsecond)
		}
	}()

	// A tailing reader that follows the LAC until the ledger is closed.
	type seen struct {
		entry int64
		data  []byte
	}
	var readerSaw []seen
	readerDone := make(chan struct{})
	rd, err := e.client("rd", cfg).OpenForRead(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(readerDone)
		next := int64(0)
		for ctx.Err() == nil {
			lac, err := rd.WaitLAC(ctx, next-1)
			for next <= lac {
				ents, rerr := rd.Read(ctx, next, lac)
				for _, en := range ents {
					readerSaw = append(readerSaw, seen{en.ID, en.Payload})
					next = en.ID + 1
				}
				if rerr != nil {
					break
				}
			}
			if errors.Is(err, ledger.ErrLedgerClosed) && next > lac {
				return
			}
		}
	}()

	// On half the seeds a repairer re-replicates the fragments the
	// writer's ensemble changes left behind, and the closed ledger's, while
	// all the rest goes on (auto-recovery's copy and swap). Its choices
	// come from a source of their own, so that every seed keeps the
	// schedule it had before repairs were added.
	repairsDone := make(chan int, 1)
	if rrnd := rand.New(rand.NewPCG(seed, 0x4e9a1)); rrnd.IntN(2) == 0 {
		go func() { repairsDone <- repairer(ctx, e.client("rep", cfg), w.ID(), ids, rrnd, stopAdding) }()
	} else {
		close(repairsDone)
	}

	// Faults, on a virtual-time schedule.
	time.Sleep(time.Duration(rnd.IntN(30)) * time.Millisecond)
	cut := rnd.IntN(q[0] + 1) // 0..E members cut from the writer
	for _, i := range rnd.Perm(q[0])[:cut] {
		e.bookies.Partition("w", ens[i])
	}
	time.Sleep(time.Duration(rnd.IntN(10)) * time.Millisecond)

	recoverers := 1 + rnd.IntN(2)
	type recResult struct {
		name string
		last int64
		err  error
	}
	results := make(chan recResult, recoverers)
	for i := range recoverers {
		name := fmt.Sprintf("rec%d", i)
		rc := e.client(name, cfg)
		if rnd.IntN(2) == 0 {
			// The recoverer's reads to one bookie time out for a while.
			victim := ens[rnd.IntN(len(ens))]
			if rnd.IntN(2) == 0 {
				e.bookies.Partition(name, victim)
			} else {
				e.bookies.Refuse(name, victim)
			}
			healAfter := time.Duration(rnd.IntN(200)) * time.Millisecond
			time.AfterFunc(healAfter, func() { e.bookies.Heal(name, victim) })
		}
		go func() {
			r, err := rc.OpenAndRecover(ctx, w.ID())
			res := recResult{name: name, err: err, last: -2}
			if err == nil {
				res.last = r.LastAddConfirmed()
			}
			results <- res
		}()
	}
	if rnd.IntN(2) == 0 {
		// A bookie restarts during recovery.
		victim := ens[rnd.IntN(len(ens))]
		time.Sleep(time.Duration(rnd.IntN(5)) * time.Millisecond)
		e.bookies.SetDown(victim, true)
		time.Sleep(time.Duration(rnd.IntN(100)) * time.Millisecond)
		e.bookies.SetDown(victim, false)
	}
	last := int64(-2)
	for range recoverers {
		res := <-results
		if res.err != nil {
			t.Fatalf("%s: recovery failed: %v", res.name, res.err)
		}
		if last != -2 && res.last != last {
			t.Errorf("recoverers disagree: lastEntry %d and %d", last, res.last)
		}
		last = res.last
	}
	fmd, err := wc.Metadata(ctx, w.ID())
	if err != nil || fmd.State != ledger.StateClosed || fmd.LastEntry != last {
		t.Fatalf("metadata after recovery: %+v, %v (recovered lastEntry %d)", fmd, err, last)
	}

	// The old writer's next add must fail with ErrFenced.
	close(stopAdding)
	<-adderDone
	repairs := <-repairsDone
	if f, err := w.Add(ctx, []byte("after fencing")); err != nil {
		t.Errorf("next add refused with %v, want a future failing with ErrFenced", err)
	} else if id, err := f.Wait(ctx); !errors.Is(err, ledger.ErrFenced) {
		t.Errorf("old writer's next add after recovery: entry %d, err %v; want ErrFenced", id, err)
	}

	// Every confirmed add is in the closed ledger, byte-identical, and none
	// lies past lastEntry.
	e.bookies.HealAll()
	cr, err := e.client("check", cfg).OpenForRead(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var got []ledger.Entry
	if last >= 0 {
		if got, err = cr.Read(ctx, 0, last); err != nil {
			t.Fatalf("reading the recovered ledger: %v", err)
		}
	}
	for i, en := range got {
		if !bytes.Equal(en.Payload, payload(i)) {
			t.Errorf("recovered entry %d: payload differs from what the writer sent", i)
		}
	}
	confirmed := 0
	outMu.Lock()
	for i, o := range outcomes {
		if o.err == nil && o.entry >= 0 {
			confirmed++
			if o.entry > last {
				t.Errorf("entry %d was confirmed to the writer but recovery closed at %d", i, last)
			}
		}
	}
	outMu.Unlock()

	<-readerDone
	for _, s := range readerSaw {
		if s.entry > last {
			t.Errorf("tailing reader saw entry %d past the recovered lastEntry %d", s.entry, last)
		} else if !bytes.Equal(s.data, payload(int(s.entry))) {
			t.Errorf("tailing reader saw a wrong payload for entry %d", s.entry)
		}
	}
	t.Logf("seed %d: cut %d, recoverers %d, adds %d, confirmed %d, lastEntry %d, reader saw %d, repairs %d",
		seed, cut, recoverers, len(outcomes), confirmed, last, len(readerSaw), repairs)
}

// repairer swaps random members of the ledger's final fragments (every
// fragment but an open ledger's last) for bookies outside them, copying
// first, until stop closes and once more after; it returns how many swaps
// landed. Copies and swaps that fail (a bookie down, a conflict, recovery
// under way) are dropped, as a repair worker drops and retries them.
func repairer(ctx context.Context, c *ledger.Client, id int64, bookies []string, rnd *rand.Rand, stop <-chan struct{}) int {
	landed := 0
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		case <-time.After(time.Duration(1+rnd.IntN(20)) * time.Millisecond):
		}
		s, err := c.Snapshot(ctx, id)
		if err != nil {
			continue
		}
		md := s.Metadata
		frag := rnd.IntN(len(md.Fragments))
		if _, _, final := md.FragmentEntries(frag); !final {
			continue
		}
		ens := md.Fragments[frag].Ensemble
		slot := rnd.IntN(len(ens))
		var spares []string
		for _, b := range bookies {
			if !slices.Contains(ens, b) {
				spares = append(spares, b)
			}
		}
		if len(spares) == 0 {
			continue
		}
		to := spares[rnd.IntN(len(spares))]
		if _, err := c.CopyFragment(ctx, md, frag, slot, to, ledger.CopyOptions{InFlight: 1 + rnd.IntN(8)}); err != nil {
			continue
		}
		if _, err := c.ApplyRepair(ctx, s, []ledger.Swap{{Fragment: frag, Slot: slot, From: ens[slot], To: to}}, "", 0); err == nil {
			landed++
		}
	}
	return landed
}
