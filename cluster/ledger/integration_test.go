package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

var flagEntries = flag.Int("ledger.entries", 2000, "entries written by the real-bookie integration test (100000 for the long run)")

// realWorld is an embedded etcd and real bookies serving TCP on 127.0.0.1.
type realWorld struct {
	t       testing.TB
	store   meta.Store
	bookies map[string]*bookie.Bookie
	dirs    map[string]string
}

func newRealWorld(t testing.TB) *realWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("starts embedded etcd and real bookies")
	}
	cfg := metatest.FastEmbedConfig()
	cfg.Logger = testLogger(t)
	e := metatest.Start(t, cfg)
	return &realWorld{t: t, store: metatest.Dial(t, e.Endpoints()), bookies: map[string]*bookie.Bookie{}, dirs: map[string]string{}}
}

func (w *realWorld) startBookie(id string) {
	w.t.Helper()
	if w.dirs[id] == "" {
		w.dirs[id] = w.t.TempDir()
	}
	cfg := bookie.DefaultConfig()
	cfg.Region, cfg.ID, cfg.DataDir = region, id, w.dirs[id]
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Meta = w.store
	cfg.LeaseTTL = 2 * time.Second
	cfg.GCInterval = 0
	cfg.Logger = testLogger(w.t)
	b, err := bookie.Start(w.t.Context(), cfg)
	if err != nil {
		w.t.Fatalf("start bookie %s: %v", id, err)
	}
	w.bookies[id] = b
	w.t.Cleanup(func() { b.Close() })
}

func (w *realWorld) client(name string) *ledger.Client {
	w.t.Helper()
	res, err := ledger.NewBKProto(w.store, region, bkproto.DefaultConnConfig(nil))
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := ledger.DefaultConfig(region, 1)
	cfg.AddTimeout = 3 * time.Second
	cfg.ReadTimeout = 3 * time.Second
	cfg.RetryInterval = 100 * time.Millisecond
	cfg.ExplicitLACInterval = 5 * time.Millisecond
	cfg.LACPollWait = time.Second
	cfg.MaxInFlightEntries = 256
	c, err := ledger.New(cfg, w.store, res, testLogger(w.t).With("client", name), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		c.Close()
		res.Close()
	})
	return c
}

// waitBookies waits until the client's directory lists n bookies.
func waitBookies(t testing.TB, c *ledger.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		changed := c.Directory().Changed()
		if len(c.Directory().Snapshot()) == n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %d bookies, have %v", n, c.Directory().Snapshot())
		}
	}
}

// mixedPayload is entry i's payload: mostly small, some up to 256 KiB.
func mixedPayload(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 77))
	n := r.IntN(512)
	if r.IntN(50) == 0 {
		n = r.IntN(256 << 10)
	}
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// addAll adds entries from..to-1 pipelined and fails on any failed add.
func addAll(t *testing.T, w *ledger.Writer, from, to int, during func(i int)) {
	t.Helper()
	futs := make(chan *ledger.AddFuture, 1024)
	done := make(chan error, 1)
	go func() {
		i := from
		for f := range futs {
			id, err := f.Wait(t.Context())
			if err == nil && id != int64(i) {
				err = fmt.Errorf("add %d confirmed as entry %d", i, id)
			}
			if err != nil {
				done <- fmt.Errorf("add %d: %w", i, err)
				for range futs {
				}
				return
			}
			i++
		}
		done <- nil
	}()
	for i := from; i < to; i++ {
		if during != nil {
			during(i)
		}
		f, err := w.Add(t.Context(), mixedPayload(i))
		if err != nil {
			close(futs)
			<-done
			t.Fatalf("add %d: %v", i, err)
		}
		futs <- f
	}
	close(futs)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func verifyAll(t *testing.T, c *ledger.Client, id int64, n int) {
	t.Helper()
	r, err := c.OpenForRead(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if lac := r.LastAddConfirmed(); lac != int64(n-1) {
		t.Fatalf("LAC %d, want %d", lac, n-1)
	}
	for first := 0; first < n; first += 500 {
		last := min(first+499, n-1)
		ents, err := r.Read(t.Context(), int64(first), int64(last))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !bytes.Equal(e.Payload, mixedPayload(int(e.ID))) {
				t.Fatalf("entry %d differs", e.ID)
			}
		}
	}
}

// TestRealBookiesEnsembleChange writes through real TCP bookies on embedded
// etcd (E=3 Qw=3 Qa=2, four bookies), kills an ensemble member mid-stream,
// and checks that no add fails, the change shows in the metadata, and every
// entry reads back byte-identical.
func TestRealBookiesEnsembleChange(t *testing.T) {
	w := newRealWorld(t)
	for i := range 4 {
		w.startBookie(fmt.Sprintf("bk%d", i))
	}
	c := w.client("writer")
	waitBookies(t, c, 4)
	wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Stop()
	md, _ := c.Metadata(t.Context(), wr.ID())
	victim := md.LastEnsemble()[1]
	n := *flagEntries
	start := time.Now()
	addAll(t, wr, 0, n, func(i int) {
		if i == n/2 {
			if err := w.bookies[victim].Close(); err != nil {
				t.Errorf("closing %s: %v", victim, err)
			}
		}
	})
	took := time.Since(start)
	st, err := wr.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	md, _ = c.Metadata(t.Context(), wr.ID())
	if len(md.Fragments) < 2 || slices.Contains(md.LastEnsemble(), victim) {
		t.Fatalf("no ensemble change away from %s: %+v", victim, md.Fragments)
	}
	if md.State != ledger.StateClosed || md.LastEntry != int64(n-1) {
		t.Fatalf("closed metadata: %+v", md)
	}
	t.Logf("%d entries in %v (%.0f/s), fragments %+v, stats %+v", n, took, float64(n)/took.Seconds(), md.Fragments, st)
	verifyAll(t, w.client("reader"), wr.ID(), n)
}

// TestRealBookiesDelayedEnsembleChange runs with three bookies only: after
// one dies adds continue on Qa=2, and the ensemble changes once a fourth
// bookie registers.
func TestRealBookiesDelayedEnsembleChange(t *testing.T) {
	w := newRealWorld(t)
	for i := range 3 {
		w.startBookie(fmt.Sprintf("bk%d", i))
	}
	c := w.client("writer")
	waitBookies(t, c, 3)
	wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Stop()
	addAll(t, wr, 0, 200, nil)
	w.bookies["bk1"].Close()
	addAll(t, wr, 200, 400, nil)
	md, _ := c.Metadata(t.Context(), wr.ID())
	if len(md.Fragments) != 1 {
		t.Fatalf("ensemble changed with no spare: %+v", md.Fragments)
	}
	if st, _ := wr.Stats(t.Context()); !st.UnderReplicated {
		t.Fatalf("stats after losing a bookie with no spare: %+v", st)
	}
	w.startBookie("bk3")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		// The writer reacts to the registration on its own; a few more
		// adds are what a live topic would be doing meanwhile.
		addAll(t, wr, int(mustStats(t, wr).NextEntry), int(mustStats(t, wr).NextEntry)+10, nil)
		if mustStats(t, wr).EnsembleChanges == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no ensemble change after bk3 registered: %+v", mustStats(t, wr))
		}
	}
	n := int(mustStats(t, wr).NextEntry)
	addAll(t, wr, n, n+100, nil)
	if err := wr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	md, _ = c.Metadata(t.Context(), wr.ID())
	if len(md.Fragments) != 2 || !slices.Contains(md.LastEnsemble(), "bk3") || slices.Contains(md.LastEnsemble(), "bk1") {
		t.Fatalf("fragments after bk3 registered: %+v", md.Fragments)
	}
	verifyAll(t, w.client("reader"), wr.ID(), n+100)
}

func mustStats(t *testing.T, w *ledger.Writer) ledger.WriterStats {
	t.Helper()
	st, err := w.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRealBookiesRecovery fences a live writer through real bookies: the
// recovered ledger holds every confirmed entry, the old writer's next add
// fails with ErrFenced, and a second recovery returns the same result.
func TestRealBookiesRecovery(t *testing.T) {
	w := newRealWorld(t)
	for i := range 3 {
		w.startBookie(fmt.Sprintf("bk%d", i))
	}
	c := w.client("writer")
	waitBookies(t, c, 3)
	wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Stop()
	addAll(t, wr, 0, 300, nil)
	// Adds in flight while recovery fences: some may be confirmed, the
	// rest fail; none may be confirmed past the recovered lastEntry.
	var futs []*ledger.AddFuture
	for i := 300; i < 400; i++ {
		f, err := wr.Add(t.Context(), mixedPayload(i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	rc := w.client("recoverer")
	waitBookies(t, rc, 3)
	r, err := rc.OpenAndRecover(t.Context(), wr.ID())
	if err != nil {
		t.Fatal(err)
	}
	last := r.LastAddConfirmed()
	if last < 299 {
		t.Fatalf("recovered lastEntry %d, but 0..299 were confirmed", last)
	}
	for _, f := range futs {
		if id, err := f.Wait(t.Context()); err == nil && id > last {
			t.Fatalf("entry %d confirmed past the recovered lastEntry %d", id, last)
		}
	}
	if _, err := wr.Append(t.Context(), []byte("after recovery")); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("old writer's add after recovery: %v", err)
	}
	verifyAll(t, w.client("reader"), wr.ID(), int(last)+1)
	r2, err := w.client("recoverer2").OpenAndRecover(t.Context(), wr.ID())
	if err != nil || r2.LastAddConfirmed() != last {
		t.Fatalf("second recovery: %v, %v", r2, err)
	}
}

// cutDialer is a bkproto.Dialer whose links to chosen addresses can be cut:
// open connections are closed and new dials refused, as a partition between
// this client and that bookie would.
type cutDialer struct {
	mu    sync.Mutex
	cut   map[string]bool
	conns map[string][]net.Conn
}

func (d *cutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut[addr] {
		return nil, fmt.Errorf("dial %s: partitioned", addr)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns[addr] = append(d.conns[addr], c)
	}
	return c, err
}

func (d *cutDialer) Cut(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut[addr] = true
	for _, c := range d.conns[addr] {
		c.Close()
	}
}

// TestRealBookiesPartitionedWriter cuts the writer's TCP links to one
// ensemble member mid-stream (the bookie itself stays up for others): no
// add fails, the writer replaces the member, and another client reads every
// entry.
func TestRealBookiesPartitionedWriter(t *testing.T) {
	w := newRealWorld(t)
	for i := range 4 {
		w.startBookie(fmt.Sprintf("bk%d", i))
	}
	d := &cutDialer{cut: map[string]bool{}, conns: map[string][]net.Conn{}}
	res, err := ledger.NewBKProto(w.store, region, bkproto.DefaultConnConfig(d))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	cfg := ledger.DefaultConfig(region, 1)
	cfg.RetryInterval = 100 * time.Millisecond
	c, err := ledger.New(cfg, w.store, res, testLogger(t), rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitBookies(t, c, 4)
	wr, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Stop()
	victim := mustMetadata(t, c, wr.ID()).LastEnsemble()[0]
	addAll(t, wr, 0, 1000, func(i int) {
		if i == 500 {
			d.Cut(w.bookies[victim].Addr())
		}
	})
	if err := wr.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if md := mustMetadata(t, c, wr.ID()); slices.Contains(md.LastEnsemble(), victim) {
		t.Fatalf("partitioned bookie %s still in the ensemble: %+v", victim, md.Fragments)
	}
	verifyAll(t, w.client("reader"), wr.ID(), 1000)
}
