package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

const testRegion = "r"

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testOwnership is a started ownership of broker id on store, released at
// the end of the test.
func testOwnership(t *testing.T, store meta.Store, id string, onLost func()) *ownership {
	t.Helper()
	self := Owner{BrokerID: id, ServiceURL: "pulsar://" + id + ":6650"}
	o := newOwnership(store, testRegion, self, 30*time.Second, DefaultLookupConfig(), clockwork.NewRealClock(), testRand(), discardLogger(), onLost)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.release(context.Background()) })
	return o
}

func evenBundles(t *testing.T, n int) []topology.Bundle {
	t.Helper()
	bs, err := topology.EvenBundles(n)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func (o *ownership) leaseForTest() meta.Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.lease
}

// TestLostLeaseClaimsNothingUntilUnloaded: from the moment the session
// lease ends until onLost (which unloads every topic) has returned, the
// broker claims no bundle and answers no lookup, whether for a bundle it
// held or a new one: ServiceNotReady, and no key written. Only then does it
// take a new lease and claim again. The old code cleared the lease and ran
// onLost outside the lock, so a lookup meanwhile claimed under a new lease
// while the old topics were still loaded.
func TestLostLeaseClaimsNothingUntilUnloaded(t *testing.T) {
	store := metatest.Memory(t)
	unloading, finish := make(chan struct{}), make(chan struct{})
	var lostCalls int
	o := testOwnership(t, store, "b1", func() {
		lostCalls++
		close(unloading)
		<-finish // the unload is slow
	})
	// Whatever happens, onLost returns before release waits for it.
	var finished sync.Once
	endUnload := func() { finished.Do(func() { close(finish) }) }
	t.Cleanup(endUnload)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bundles := evenBundles(t, 4)
	if _, mine, err := o.acquire(ctx, "t", "ns", bundles[0], placeLeastLoaded); err != nil || !mine {
		t.Fatalf("first claim: mine %v, %v", mine, err)
	}
	old := o.leaseForTest()
	if !store.Expire(old.ID()) {
		t.Fatal("the lease was not live")
	}
	select {
	case <-unloading:
	case <-ctx.Done():
		t.Fatal("onLost was not called after the lease expired")
	}

	for _, b := range bundles[:2] { // the one it held, and a new one
		for _, where := range []placing{placeLeastLoaded, placeHere} {
			_, _, err := o.acquire(ctx, "t", "ns", b, where)
			if !errors.Is(err, wire.ErrServiceNotReady) {
				t.Fatalf("acquire of %s while the lost lease's topics unload: %v, want ServiceNotReady", b, err)
			}
			if _, err := store.Get(ctx, o.bundleKey("t", "ns", b)); !errors.Is(err, meta.ErrNotFound) {
				t.Fatalf("bundle %s was claimed while the lost lease's topics unload (get: %v)", b, err)
			}
		}
	}
	if _, err := store.Get(ctx, o.brokerKey()); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the broker registered again while its topics unload (get: %v)", err)
	}

	endUnload()
	var mine bool
	testkit.WaitFor(t, "an acquire after the unload", func() bool {
		_, m, err := o.acquire(ctx, "t", "ns", bundles[0], placeLeastLoaded)
		if err != nil && !errors.Is(err, wire.ErrServiceNotReady) {
			t.Fatalf("acquire after the unload: %v", err)
		}
		mine = m
		return err == nil
	})
	if !mine {
		t.Fatal("after the unload the broker, alone in its region, does not own the bundle")
	}
	if l := o.leaseForTest(); l == nil || l.ID() == old.ID() {
		t.Fatalf("claimed again under lease %v, want a new one (old %x)", l, old.ID())
	}
	if lostCalls != 1 {
		t.Fatalf("onLost ran %d times, want 1", lostCalls)
	}
}

// blockingGrants is a Store whose Grant blocks until released, counting
// calls, to show that grants run outside ownership's lock and one at a
// time.
type blockingGrants struct {
	meta.Store
	mu      sync.Mutex
	grants  int
	entered chan struct{}
	release chan struct{}
}

func (s *blockingGrants) Grant(ctx context.Context, ttl time.Duration) (meta.Lease, error) {
	s.mu.Lock()
	s.grants++
	s.mu.Unlock()
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Grant(ctx, ttl)
}

// TestOneGrantInFlight: concurrent claims while no lease is held share one
// grant, which runs outside ownership.mu (the registration record can be
// updated, and release called, while it is blocked).
func TestOneGrantInFlight(t *testing.T) {
	store := &blockingGrants{Store: metatest.Memory(t), entered: make(chan struct{}, 16), release: make(chan struct{})}
	o := newOwnership(store, testRegion, Owner{BrokerID: "b1", ServiceURL: "pulsar://b1:6650"}, 30*time.Second,
		DefaultLookupConfig(), clockwork.NewRealClock(), testRand(), discardLogger(), func() {})
	defer o.release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bundles := evenBundles(t, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(bundles))
	for i, b := range bundles {
		wg.Go(func() { _, _, errs[i] = o.acquire(ctx, "t", "ns", b, placeHere) })
	}
	<-store.entered
	// The grant is blocked: ownership.mu must be free.
	locked := make(chan struct{})
	go func() {
		o.mu.Lock()
		_ = o.mu.granting
		o.mu.Unlock()
		close(locked)
	}()
	select {
	case <-locked:
	case <-ctx.Done():
		t.Fatal("ownership.mu is held across Grant")
	}
	close(store.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	if store.grants != 1 {
		t.Fatalf("%d grants for %d concurrent claims, want 1", store.grants, len(bundles))
	}
	lease := o.leaseForTest().ID()
	for _, b := range bundles {
		kv, err := store.Get(ctx, o.bundleKey("t", "ns", b))
		if err != nil || kv.Lease != lease {
			t.Fatalf("bundle %s: lease %x, %v; want the one session lease %x", b, kv.Lease, err, lease)
		}
	}
}

// fakeBroker registers a broker record under a lease of its own, as
// another broker of the region would.
func fakeBroker(t *testing.T, store meta.Store, id string, draining bool, load *LoadReport) meta.Lease {
	t.Helper()
	ctx := context.Background()
	l, err := store.Grant(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Revoke(context.Background()) })
	rec := BrokerRecord{Owner: Owner{BrokerID: id, ServiceURL: "pulsar://" + id + ":6650"}, Draining: draining, Load: load}
	v, err := meta.EncodeJSON(1, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, meta.RegionKey(testRegion, "brokers", id), v, l.ID()); err != nil {
		t.Fatal(err)
	}
	return l
}

// ownBundles writes n ownership keys for broker id under lease.
func ownBundles(t *testing.T, store meta.Store, id string, lease meta.LeaseID, n int) {
	t.Helper()
	v, err := meta.EncodeJSON(1, Owner{BrokerID: id})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := store.Create(context.Background(), meta.RegionKey(testRegion, "owners", "t", "held-by-"+id, fmt.Sprint(i)), v, lease); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChoose: the ranking of placement. Each case registers brokers with
// bundle counts and message rates, and names the brokers choose may pick.
func TestChoose(t *testing.T) {
	type broker struct {
		id       string
		bundles  int
		rate     float64 // msgRateIn+Out; -1: no load report
		draining bool
	}
	for _, tc := range []struct {
		name    string
		brokers []broker
		exclude []string
		want    []string // any of these; empty: ServiceNotReady
	}{
		{"fewest bundles wins", []broker{{"a", 3, 0, false}, {"b", 1, 500, false}, {"c", 2, 0, false}}, nil, []string{"b"}},
		{"then the lowest rate", []broker{{"a", 1, 300, false}, {"b", 1, 100, false}, {"c", 2, 0, false}}, nil, []string{"b"}},
		{"no report counts as idle", []broker{{"a", 1, 10, false}, {"b", 1, -1, false}}, nil, []string{"b"}},
		{"ties go to any", []broker{{"a", 1, 0, false}, {"b", 1, 0, false}, {"c", 4, 0, false}}, nil, []string{"a", "b"}},
		{"draining takes nothing", []broker{{"a", 0, 0, true}, {"b", 5, 0, false}}, nil, []string{"b"}},
		{"excluded takes nothing", []broker{{"a", 0, 0, false}, {"b", 5, 0, false}}, []string{"a"}, []string{"b"}},
		{"nobody left", []broker{{"a", 0, 0, true}, {"b", 0, 0, false}}, []string{"b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := metatest.Memory(t)
			for _, b := range tc.brokers {
				var load *LoadReport
				if b.rate >= 0 {
					load = &LoadReport{MsgRateIn: b.rate / 2, MsgRateOut: b.rate / 2}
				}
				l := fakeBroker(t, store, b.id, b.draining, load)
				ownBundles(t, store, b.id, l.ID(), b.bundles)
			}
			o := newOwnership(store, testRegion, Owner{BrokerID: "observer"}, time.Minute, DefaultLookupConfig(),
				clockwork.NewRealClock(), testRand(), discardLogger(), func() {})
			picked := map[string]bool{}
			for range 40 {
				c, err := o.choose(context.Background(), tc.exclude...)
				if len(tc.want) == 0 {
					if !errors.Is(err, ErrNoBrokerAvailable) || !errors.Is(err, wire.ErrServiceNotReady) {
						t.Fatalf("choose: %+v, %v; want ErrNoBrokerAvailable, as ServiceNotReady", c, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				picked[c.BrokerID] = true
			}
			for id := range picked {
				if !contains(tc.want, id) {
					t.Fatalf("choose picked %s, want one of %v", id, tc.want)
				}
			}
			if len(tc.want) > 1 && len(picked) < 2 {
				t.Fatalf("40 choices among tied brokers %v all went to %v", tc.want, picked)
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// staleListing is a Store whose broker listing also shows a registration
// whose lease has just ended: what a List read just before the expiry
// returns.
type staleListing struct {
	meta.Store
	stale meta.KV
}

func (s staleListing) List(ctx context.Context, prefix string) ([]meta.KV, int64, error) {
	kvs, rev, err := s.Store.List(ctx, prefix)
	if err == nil && prefix == meta.Prefix(meta.RegionKey(testRegion, "brokers")) {
		kvs = append(kvs, s.stale)
	}
	return kvs, rev, err
}

// TestPlaceSkipsAnEndedLease: a broker whose lease ended between the
// listing and the create is passed over for the next one.
func TestPlaceSkipsAnEndedLease(t *testing.T) {
	mem := metatest.Memory(t)
	v, err := meta.EncodeJSON(1, BrokerRecord{Owner: Owner{BrokerID: "gone", ServiceURL: "pulsar://gone:6650"}})
	if err != nil {
		t.Fatal(err)
	}
	store := staleListing{Store: mem, stale: meta.KV{Key: meta.RegionKey(testRegion, "brokers", "gone"), Value: v, Lease: 0xdead}}
	o := testOwnership(t, store, "self", func() {})
	ownBundles(t, mem, "self", o.leaseForTest().ID(), 3) // "gone" (none) ranks first
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owner, mine, err := o.acquire(ctx, "t", "ns", evenBundles(t, 1)[0], placeLeastLoaded)
	if err != nil || !mine || owner.BrokerID != "self" {
		t.Fatalf("placed on %+v (mine %v), %v; want self, the one broker with a live lease", owner, mine, err)
	}
}

// TestDialProbe: what each kind of answer to a probe proves.
func TestDialProbe(t *testing.T) {
	o := newOwnership(metatest.Memory(t), testRegion, Owner{BrokerID: "self"}, time.Minute, DefaultLookupConfig(),
		clockwork.NewRealClock(), testRand(), discardLogger(), func() {})
	// Long enough for a loaded machine's listeners to answer; the silent
	// case waits it out.
	o.cfg.ProbeTimeout = 2 * time.Second
	listen := func(serve func(nc net.Conn, stop <-chan struct{})) string { return testkit.ListenLoopback(t, serve) }
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "pulsar://" + addr
	}()
	for _, tc := range []struct {
		name string
		url  string
		want liveness
	}{
		{"refused", refused, brokerDead},
		// A live broker closes so at its connection bounds, and a proxy in
		// front of a dead one resets: neither proves a death.
		{"accepted then closed", listen(func(net.Conn, <-chan struct{}) {}), brokerUnknown},
		{"reset after reading CONNECT", listen(func(nc net.Conn, _ <-chan struct{}) {
			io.ReadFull(nc, make([]byte, 8))
			_ = nc.(*net.TCPConn).SetLinger(0) // the deferred Close resets
		}), brokerUnknown},
		{"silent", listen(func(_ net.Conn, stop <-chan struct{}) { <-stop }), brokerUnknown},
		{"answers", listen(func(nc net.Conn, stop <-chan struct{}) { nc.Write([]byte{0, 0, 0, 1}); <-stop }), brokerAlive},
		{"not pulsar://", "pulsar+ssl://127.0.0.1:1", brokerUnknown},
		{"no URL", "", brokerUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := o.dialProbe(tc.url); got != tc.want {
				t.Fatalf("probe of %s: %v, want %v", tc.url, got, tc.want)
			}
		})
	}
}

// TestProbeRemembersAlive: within ProbeAliveFor a broker that answered is
// alive without a dial; after it, it is probed again.
func TestProbeRemembersAlive(t *testing.T) {
	clock := clockwork.NewFakeClock()
	o := newOwnership(metatest.Memory(t), testRegion, Owner{BrokerID: "self"}, time.Minute, DefaultLookupConfig(),
		clock, testRand(), discardLogger(), func() {})
	o.cfg.ProbeTimeout = 5 * time.Second // the answer is all that counts here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	dials := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			dials++
			mu.Unlock()
			nc.Write([]byte{0})
			nc.Close()
		}
	})
	owner := Owner{BrokerID: "x", ServiceURL: "pulsar://" + ln.Addr().String()}
	ctx := context.Background()
	for range 5 {
		if got := o.probe(ctx, owner); got != brokerAlive {
			t.Fatalf("probe: %v, want alive", got)
		}
	}
	clock.Advance(o.cfg.ProbeAliveFor)
	if got := o.probe(ctx, owner); got != brokerAlive {
		t.Fatalf("probe: %v, want alive", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if dials != 2 {
		t.Fatalf("%d dials for 5 probes within ProbeAliveFor and one after, want 2", dials)
	}
}
