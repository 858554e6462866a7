package autorecovery_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

const region = "test-region"

func TestMain(m *testing.M) { testkit.Main(m) }

// world is one in-memory region: a metadata store, in-memory bookies and
// the clients and services made on them, all stopped by t.Cleanup. Tests
// run it under synctest, so its delays cost no wall time.
type world struct {
	t       *testing.T
	store   *meta.Memory
	bookies *ledgertest.Cluster
	ids     []string
	// admin is the one administration the tests poll through: a ledger
	// client per poll would pile up directory watches for the whole test.
	admin *autorecovery.Admin
}

func testLogger() *slog.Logger {
	if os.Getenv("AUTORECOVERY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newWorld(t *testing.T, n int) *world {
	t.Helper()
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w := &world{t: t, store: store, bookies: ledgertest.NewCluster()}
	for i := 1; i <= n; i++ {
		w.addBookie(fmt.Sprintf("b%d", i))
	}
	w.admin = autorecovery.NewAdmin(store, region, w.client("admin"))
	return w
}

func (w *world) addBookie(id string) {
	w.t.Helper()
	w.bookies.AddBookie(id)
	if err := ledgertest.Register(context.Background(), w.store, region, id, "", false); err != nil {
		w.t.Fatal(err)
	}
	w.ids = append(w.ids, id)
}

// lose takes a bookie down and its registration away, as a crash whose
// disk is gone does.
func (w *world) lose(id string) {
	w.t.Helper()
	w.bookies.SetDown(id, true)
	if err := ledgertest.Unregister(context.Background(), w.store, region, id); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) client(name string) *ledger.Client {
	w.t.Helper()
	cfg := ledger.DefaultConfig(region, 1)
	cfg.AddTimeout = 200 * time.Millisecond
	cfg.ReadTimeout = 200 * time.Millisecond
	cfg.MetaTimeout = time.Second
	cfg.RetryInterval = 50 * time.Millisecond
	cfg.ExplicitLACInterval = 10 * time.Millisecond
	cfg.LACPollWait = 100 * time.Millisecond
	c, err := ledger.New(cfg, w.store, w.bookies.Client(name), testLogger().With("client", name), rand.New(rand.NewPCG(uint64(len(name)), 7)))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { c.Close() })
	return c
}

func testConfig(worker string) autorecovery.Config {
	cfg := autorecovery.DefaultConfig(region, worker)
	cfg.LostBookieRecoveryDelay = 30 * time.Second
	cfg.AuditInterval = 10 * time.Second
	cfg.CheckInterval = 0
	cfg.RetryInterval = time.Second
	cfg.ClaimTTL = 2 * time.Second
	cfg.RateBytesPerSecond = 1 << 20
	cfg.Logger = testLogger().With("worker", worker)
	return cfg
}

// start runs auto-recovery on a ledger client of its own, with metrics in
// a registry of its own.
func (w *world) start(cfg autorecovery.Config) (*autorecovery.Service, *prometheus.Registry) {
	w.t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	s, err := autorecovery.Start(cfg, w.store, w.client("recovery-"+cfg.WorkerID), rand.New(rand.NewPCG(3, uint64(len(cfg.WorkerID)))))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(s.Close)
	return s, reg
}

func payload(l int64, i int) []byte {
	b := make([]byte, 16+i%200)
	for j := range b {
		b[j] = byte(int(l)*7 + i*31 + j)
	}
	return b
}

// write adds entries from..to-1 to w's ledger and waits for each.
func write(t *testing.T, wr *ledger.Writer, from, to int) {
	t.Helper()
	futs := make([]*ledger.AddFuture, 0, to-from)
	for i := from; i < to; i++ {
		f, err := wr.Add(t.Context(), payload(wr.ID(), i))
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		futs = append(futs, f)
	}
	for i, f := range futs {
		if id, err := f.Wait(t.Context()); err != nil || id != int64(from+i) {
			t.Fatalf("add %d to ledger %d: entry %d, %v", from+i, wr.ID(), id, err)
		}
	}
}

// closedLedger writes n entries to a new 3/3/2 ledger and closes it.
func closedLedger(t *testing.T, c *ledger.Client, n int) int64 {
	t.Helper()
	wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(t, wr, 0, n)
	if err := wr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // the copies past Qa land after confirmation
	return wr.ID()
}

// verify reads every entry of a closed ledger with a fresh client.
func verify(t *testing.T, w *world, id int64, n int) {
	t.Helper()
	r, err := w.client(fmt.Sprintf("verify-%d-%d", id, time.Now().UnixNano())).OpenForRead(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if lac := r.LastAddConfirmed(); lac != int64(n-1) {
		t.Fatalf("ledger %d: last entry %d, want %d", id, lac, n-1)
	}
	got, err := r.Read(t.Context(), 0, int64(n-1))
	if err != nil {
		t.Fatalf("ledger %d: %v", id, err)
	}
	for i, e := range got {
		if !bytes.Equal(e.Payload, payload(id, i)) {
			t.Fatalf("ledger %d entry %d differs", id, i)
		}
	}
}

// names reports whether any fragment of ledger id names bookie b.
func names(t *testing.T, c *ledger.Client, id int64, b string) bool {
	t.Helper()
	md, err := c.Metadata(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(md.Fragments, func(f ledger.Fragment) bool { return slices.Contains(f.Ensemble, b) })
}

func marks(t *testing.T, w *world) []autorecovery.UnderReplicatedLedger {
	t.Helper()
	ur, err := w.admin.UnderReplicated(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ur
}

// value is a gauge's or counter's value, or a summary's sum.
func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += metricValue(m)
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Summary != nil:
		return m.GetSummary().GetSampleSum()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// TestLostBookieRepaired: a bookie is lost for good. After the delay, and
// not before, its ledgers are marked, then repaired: every closed ledger's
// fragments and the earlier fragment of the open one move off it, the
// open ledger's writer goes on without an error, and everything reads
// back with the bookie still gone.
func TestLostBookieRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 6)
		c := w.client("writer")
		l1 := closedLedger(t, c, 200)
		lost := mustMetadata(t, c, l1).Fragments[0].Ensemble[0]
		var l2 int64
		for {
			// A second closed ledger on the lost bookie too.
			l2 = closedLedger(t, c, 50)
			if names(t, c, l2, lost) {
				break
			}
		}
		open, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Stop()
		write(t, open, 0, 100)
		_, reg := w.start(testConfig("a"))

		w.lose(lost)
		write(t, open, 100, 200) // an ensemble change if the open ledger had it
		time.Sleep(25 * time.Second)
		if ur := marks(t, w); len(ur) != 0 || !names(t, c, l1, lost) {
			t.Fatalf("marked or moved within the delay: %+v", ur)
		}
		testkit.WaitFor(t, "the repairs done", func() bool {
			return len(marks(t, w)) == 0 && !names(t, c, l1, lost) && !names(t, c, l2, lost)
		})
		write(t, open, 200, 300)
		if err := open.Close(t.Context()); err != nil {
			t.Fatalf("the writer after the repair of its earlier fragment: %v", err)
		}
		md := mustMetadata(t, c, open.ID())
		if slices.Contains(md.LastEnsemble(), lost) {
			t.Fatalf("the open ledger's writer kept the lost bookie: %+v", md.Fragments)
		}
		testkit.WaitFor(t, "the closed ledger repaired too", func() bool {
			return len(marks(t, w)) == 0 && !names(t, c, open.ID(), lost)
		})
		verify(t, w, l1, 200)
		verify(t, w, l2, 50)
		verify(t, w, open.ID(), 300)
		if v := value(t, reg, "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED"); v < 2 {
			t.Errorf("ledgers replicated %v, want at least 2", v)
		}
		if v := value(t, reg, "replication_worker_NUM_BYTES_WRITTEN"); v <= 0 {
			t.Errorf("bytes written %v", v)
		}
		if v := value(t, reg, "auditor_NUM_UNDER_REPLICATED_LEDGERS"); v != 0 {
			t.Errorf("under-replicated ledgers %v after the repairs", v)
		}
		if v := value(t, reg, "meridian_autorecovery_auditor_leading"); v != 1 {
			t.Errorf("leading %v", v)
		}
	})
}

// TestRestartWithinDelayCopiesNothing: a bookie that goes and comes back
// within the delay (a rolling restart) costs nothing.
func TestRestartWithinDelayCopiesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 4)
		c := w.client("writer")
		l := closedLedger(t, c, 20)
		_, reg := w.start(testConfig("a"))
		b := mustMetadata(t, c, l).Fragments[0].Ensemble[1]
		for range 3 {
			w.lose(b)
			time.Sleep(20 * time.Second)
			w.bookies.SetDown(b, false)
			if err := ledgertest.Register(context.Background(), w.store, region, b, "", false); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Second)
		}
		if ur := marks(t, w); len(ur) != 0 || !names(t, c, l, b) {
			t.Fatalf("a restarted bookie's ledger was marked or moved: %+v", ur)
		}
		if v := value(t, reg, "auditor_NUM_DELAYED_BOOKIE_AUDITS_CANCELLED"); v != 3 {
			t.Errorf("delayed audits cancelled %v, want 3", v)
		}
		if v := value(t, reg, "replication_worker_NUM_ENTRIES_WRITTEN"); v != 0 {
			t.Errorf("entries copied %v, want 0", v)
		}
	})
}

// TestPausedRecoveryWaits: while recovery is paused nothing is marked or
// copied; once resumed, a bookie lost longer than the delay is repaired.
func TestPausedRecoveryWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 4)
		c := w.client("writer")
		l := closedLedger(t, c, 20)
		adm := w.admin
		if err := adm.SetPaused(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		_, reg := w.start(testConfig("a"))
		b := mustMetadata(t, c, l).Fragments[0].Ensemble[2]
		w.lose(b)
		time.Sleep(3 * time.Minute)
		if ur := marks(t, w); len(ur) != 0 || !names(t, c, l, b) {
			t.Fatalf("paused recovery marked or moved: %+v", ur)
		}
		if v := value(t, reg, "meridian_autorecovery_paused"); v != 1 {
			t.Errorf("paused gauge %v", v)
		}
		if err := adm.SetPaused(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the repair once resumed", func() bool { return !names(t, c, l, b) && len(marks(t, w)) == 0 })
		verify(t, w, l, 20)
	})
}

// TestWorkerLosingItsClaimNeverPublishes: the worker repairing a ledger
// loses its claim (its lease lapses, as when it is cut off or killed); the
// ledger passes to another worker, which finishes it, and the first never
// publishes a swap.
func TestWorkerLosingItsClaimNeverPublishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 6)
		c := w.client("writer")
		l := closedLedger(t, c, 400)
		lost := mustMetadata(t, c, l).Fragments[0].Ensemble[0]
		slow := testConfig("slow")
		slow.RateBytesPerSecond = 4 << 10 // 400 entries of ~120 bytes: about 12 s
		slow.Auditor = true
		w.start(slow)
		w.lose(lost)
		var claim meta.KV
		testkit.WaitFor(t, "the slow worker's claim", func() bool {
			kv, err := w.store.Get(t.Context(), bkproto.ClaimKey(region, l))
			claim = kv
			return err == nil
		})
		before := mustRevision(t, w, l)
		if !w.store.Expire(claim.Lease) {
			t.Fatal("no lease to expire")
		}
		other := testConfig("other")
		other.Auditor = false
		other.RateBytesPerSecond = 64 << 20
		w.start(other)
		testkit.WaitFor(t, "another worker's repair", func() bool { return !names(t, c, l, lost) && len(marks(t, w)) == 0 })
		// Exactly one swap landed: the other worker's.
		if got := mustRevision(t, w, l); got == before {
			t.Fatal("no swap")
		}
		verify(t, w, l, 400)
	})
}

// TestReplacementFailsMidCopy: the first replacement refuses the copies;
// the worker chooses another, and the metadata never names the failed one.
func TestReplacementFailsMidCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 4)
		c := w.client("writer")
		l := closedLedger(t, c, 100)
		ens := mustMetadata(t, c, l).Fragments[0].Ensemble
		var spare string
		for _, b := range w.ids {
			if !slices.Contains(ens, b) {
				spare = b
			}
		}
		// The only spare takes a few adds, then fails every one: it
		// dies during the copy, but stays registered.
		w.bookies.InjectError(spare, ledgertest.OpAdd)
		w.bookies.SetReadOnly(spare, true)
		_, reg := w.start(testConfig("a"))
		w.lose(ens[1])
		testkit.WaitFor(t, "the failed replacement noted", func() bool {
			return value(t, reg, "meridian_autorecovery_replacements_failed_total") >= 1
		})
		if names(t, c, l, spare) {
			t.Fatal("the metadata names a replacement that failed the copy")
		}
		w.addBookie("b5")
		testkit.WaitFor(t, "the repair onto the new bookie", func() bool { return names(t, c, l, "b5") && len(marks(t, w)) == 0 })
		if names(t, c, l, ens[1]) || names(t, c, l, spare) {
			t.Fatalf("after the repair: %+v", mustMetadata(t, c, l).Fragments)
		}
		verify(t, w, l, 100)
	})
}

// TestNoGoodCopyIsReported: with the lost bookie gone and every other
// copy of one entry damaged, the ledger stays marked and says why; it is
// never skipped, and the gauge of ledgers with lost entries shows it.
func TestNoGoodCopyIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 5)
		c := w.client("writer")
		l := closedLedger(t, c, 30)
		ens := mustMetadata(t, c, l).Fragments[0].Ensemble
		w.bookies.Corrupt(ens[1], l, 12)
		w.bookies.Corrupt(ens[2], l, 12)
		_, reg := w.start(testConfig("a"))
		w.lose(ens[0])
		testkit.WaitFor(t, "the lost entry reported", func() bool {
			ur := marks(t, w)
			return len(ur) == 1 && ur[0].EntryLost
		})
		ur := marks(t, w)
		if ur[0].Ledger != l || !names(t, c, l, ens[0]) || ur[0].LastError == "" {
			t.Fatalf("mark %+v", ur[0])
		}
		t.Logf("reported: %s", ur[0].LastError)
		testkit.WaitFor(t, "the gauge", func() bool {
			return value(t, reg, "auditor_NUM_LEDGERS_HAVING_NO_REPLICA_OF_AN_ENTRY") == 1
		})
		if v := value(t, reg, "replication_worker_NUM_ENTRIES_UNABLE_TO_READ_FOR_REPLICATION"); v < 1 {
			t.Errorf("entries unable to read %v", v)
		}
	})
}

// TestLedgerDeletedDuringRepair: a ledger deleted while its copy runs is
// not swapped, and its mark goes.
func TestLedgerDeletedDuringRepair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 5)
		c := w.client("writer")
		l := closedLedger(t, c, 300)
		lost := mustMetadata(t, c, l).Fragments[0].Ensemble[0]
		cfg := testConfig("a")
		cfg.RateBytesPerSecond = 4 << 10
		w.start(cfg)
		w.lose(lost)
		testkit.WaitFor(t, "the claim", func() bool {
			_, err := w.store.Get(t.Context(), bkproto.ClaimKey(region, l))
			return err == nil
		})
		if err := c.Delete(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "the mark gone", func() bool { return len(marks(t, w)) == 0 })
		if _, err := c.Metadata(t.Context(), l); !errors.Is(err, ledger.ErrLedgerNotFound) {
			t.Fatalf("the deleted ledger's metadata came back: %v", err)
		}
	})
}

// TestDecommission: a live bookie is decommissioned: it is marked
// read-only (writers move off it), everything it holds is copied
// elsewhere, and the progress says when it can be removed. Unknown
// bookies, and one the ensembles cannot do without, are refused.
func TestDecommission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 4)
		c := w.client("writer")
		var ls []int64
		for range 3 {
			ls = append(ls, closedLedger(t, c, 40))
		}
		adm := w.admin
		if _, err := adm.Decommission(t.Context(), "nobody"); !errors.Is(err, autorecovery.ErrUnknownBookie) {
			t.Fatalf("decommission of an unknown bookie: %v", err)
		}
		w.start(testConfig("a"))
		d, err := adm.Decommission(t.Context(), "b1")
		if err != nil || d.State != autorecovery.StateDecommissioning {
			t.Fatalf("decommission b1: %+v, %v", d, err)
		}
		// Three writable bookies left for ensembles of three: b2 may not
		// go as well.
		if _, err := adm.Decommission(t.Context(), "b2"); !errors.Is(err, autorecovery.ErrQuorumNeedsBookie) {
			t.Fatalf("decommission of a bookie the ensembles need: %v", err)
		}
		testkit.WaitFor(t, "the drain", func() bool {
			d, err := adm.DecommissionStatus(t.Context(), "b1")
			return err == nil && d.Done
		})
		for _, l := range ls {
			if names(t, c, l, "b1") {
				t.Fatalf("ledger %d still names b1", l)
			}
		}
		w.lose("b1")
		for _, l := range ls {
			verify(t, w, l, 40)
		}
		list, err := adm.Bookies(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, bi := range list {
			if bi.ID == "b1" && (bi.State != autorecovery.StateDecommissioning || bi.Ledgers != 0) {
				t.Fatalf("b1 in the list: %+v", bi)
			}
		}
	})
}

// TestDecommissionInBookieGroups: a ledger is repaired only within the
// bookie groups its metadata names, so a decommission counts, for each
// ledger, the writable bookies its groups would still give. Ledger L1 is
// in group g topped up by h, L2 in g alone; g is b1-b3, h is b4, and b5
// and b6 are in no group. b4 may go (L1 keeps g's three), b1 may not (L2
// would have two of g for an ensemble of three, though the region would
// keep five), and once g is short (b3 marked lost) a bookie of neither
// group still may go: its leaving takes nothing from L2.
func TestDecommissionInBookieGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 6)
		for group, ids := range map[string][]string{"g": {"b1", "b2", "b3"}, "h": {"b4"}} {
			for _, id := range ids {
				// ledgertest.Register registers bookie id at id:0.
				if err := w.admin.SetRack(t.Context(), id+":0", group, autorecovery.BookieRack{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		synctest.Wait() // the clients' directories have the groups
		c := w.client("writer")
		for _, g := range []ledger.Groups{{Primary: "g", Secondary: "h"}, {Primary: "g"}} {
			wr, err := c.Create(t.Context(), 3, 3, 2, g, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := wr.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		adm := w.admin
		if _, err := adm.Decommission(t.Context(), "b4"); err != nil {
			t.Fatalf("decommission of b4, which L1 can do without: %v", err)
		}
		if err := adm.ClearState(t.Context(), "b4"); err != nil {
			t.Fatal(err)
		}
		_, err := adm.Decommission(t.Context(), "b1")
		if !errors.Is(err, autorecovery.ErrQuorumNeedsBookie) {
			t.Fatalf("decommission of b1, which L2 needs: %v, want ErrQuorumNeedsBookie", err)
		}
		for _, want := range []string{`bookie group "g"`, "2 writable bookies", "1 ledgers", "ensembles of 3"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("decommission of b1: %q does not say %q", err, want)
			}
		}
		if err := adm.MarkLost(t.Context(), "b3"); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.Decommission(t.Context(), "b5"); err != nil {
			t.Fatalf("decommission of b5, in no group of a ledger, while g is short: %v", err)
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

func mustRevision(t *testing.T, w *world, id int64) int64 {
	t.Helper()
	kv, err := w.store.Get(t.Context(), ledger.LedgerKey(region, id))
	if err != nil {
		t.Fatal(err)
	}
	return kv.ModRevision
}

func TestConfigValidate(t *testing.T) {
	if err := autorecovery.DefaultConfig("r", "w").Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*autorecovery.Config){
		"zero rate":     func(c *autorecovery.Config) { c.RateBytesPerSecond = 0 },
		"negative rate": func(c *autorecovery.Config) { c.RateBytesPerSecond = -1 },
		"no worker id":  func(c *autorecovery.Config) { c.WorkerID = "" },
		"no sampling":   func(c *autorecovery.Config) { c.CheckSampleRate = 0 },
		"short claim":   func(c *autorecovery.Config) { c.ClaimTTL = time.Second },
		"long delay":    func(c *autorecovery.Config) { c.LostBookieRecoveryDelay = 48 * time.Hour },
		"no clock":      func(c *autorecovery.Config) { c.Clock = nil },
	} {
		cfg := autorecovery.DefaultConfig("r", "w")
		mut(&cfg)
		if err := cfg.Validate(); !errors.Is(err, autorecovery.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRepairStaysInBookieGroups: a ledger placed in bookie group g (four
// of the region's seven bookies, set through the admin's SetRack) loses a
// member for good; its repair takes g's fourth bookie, never one of the
// three outside g, which would be as good a spare by racks alone.
func TestRepairStaysInBookieGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, 7)
		g := []string{"b1", "b3", "b5", "b7"}
		for _, id := range g {
			// ledgertest.Register registers bookie id at id:0.
			if err := w.admin.SetRack(t.Context(), id+":0", "g", autorecovery.BookieRack{}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the clients' directories have the groups
		c := w.client("writer")
		wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{Primary: "g"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		write(t, wr, 0, 20)
		if err := wr.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l := wr.ID()
		before := mustMetadata(t, c, l).Fragments[0].Ensemble
		spare := g[slices.IndexFunc(g, func(id string) bool { return !slices.Contains(before, id) })]
		w.start(testConfig("a"))
		lost := before[0]
		w.lose(lost)
		testkit.WaitFor(t, "the repair", func() bool { return !names(t, c, l, lost) && len(marks(t, w)) == 0 })
		if after := mustMetadata(t, c, l).Fragments[0].Ensemble; !slices.Contains(after, spare) {
			t.Fatalf("ensemble %v after losing %s: want g's spare %s in it, and no bookie outside g %v", after, lost, spare, g)
		}
		verify(t, w, l, 20)
	})
}
