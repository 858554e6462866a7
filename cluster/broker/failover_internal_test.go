package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// TestUnreachableVotes: a region votes only when every one of its brokers
// has seen the active region unreachable since the cut-off at least, and
// for the active region it probes now.
func TestUnreachableVotes(t *testing.T) {
	by := time.UnixMilli(10_000)
	down := func(region, broker string, since int64) global.FailoverView {
		return global.FailoverView{Region: region, Broker: broker, Active: "r1", UnreachableSinceMillis: since}
	}
	for _, tc := range []struct {
		name  string
		views []global.FailoverView
		want  int
	}{
		{"none", nil, 0},
		{"two regions long enough", []global.FailoverView{down("r2", "a", 5_000), down("r3", "a", 10_000)}, 2},
		{"one too recent", []global.FailoverView{down("r2", "a", 5_000), down("r3", "a", 10_001)}, 1},
		{"a broker of r2 still sees it", []global.FailoverView{down("r2", "a", 5_000), down("r2", "b", 0), down("r3", "a", 1)}, 1},
		{"every broker of r2 sees it down", []global.FailoverView{down("r2", "a", 5_000), down("r2", "b", 9_000)}, 1},
		{"a view of another active region", []global.FailoverView{{Region: "r2", Broker: "a", Active: "r3", UnreachableSinceMillis: 1}}, 0},
		{"the active region's own view", []global.FailoverView{down("r1", "a", 1)}, 0},
	} {
		if got := unreachableVotes(tc.views, "r1", by); got != tc.want {
			t.Errorf("%s: %d votes, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFailoverGate: a gated namespace's replicated subscriptions dispatch
// only once confirmed, while the session is valid and after the switch's
// wait; an ungated one always does; a dispatcher that found its gate shut
// is woken by the pass that opens it.
func TestFailoverGate(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newRegionFailover(&Service{}, DefaultFailoverConfig())
	f.now = func() time.Time { return now }
	tn := mustParseTopic(t, "persistent://t/ns/x")
	other := mustParseTopic(t, "persistent://t/other/x")
	drill := mustParseTopic(t, "persistent://t/ns/drill-partition-1")

	f.setGates(map[string]failoverGate{"t/ns": {ownActiveRegion: map[string]bool{"persistent://t/ns/drill": true}}})
	if !f.mayDispatch(other) {
		t.Fatal("an ungated namespace may not dispatch")
	}
	if !f.mayDispatch(drill) {
		t.Fatal("a partition of a topic with an active region of its own is gated by its namespace's failover")
	}
	opened := f.gateOpened()
	if f.mayDispatch(tn) {
		t.Fatal("unconfirmed, without a session: dispatches")
	}
	f.mu.validUntil = now.Add(time.Second)
	f.setGates(map[string]failoverGate{"t/ns": {confirmed: true, notBefore: now.Add(500 * time.Millisecond)}})
	select {
	case <-opened:
		t.Fatal("woken while the wait still shuts the gate")
	default:
	}
	if f.mayDispatch(tn) {
		t.Fatal("dispatches before the switch's wait is over")
	}
	now = now.Add(500 * time.Millisecond)
	f.setGates(map[string]failoverGate{"t/ns": {confirmed: true, notBefore: now}})
	select {
	case <-opened:
	default:
		t.Fatal("the pass that opened the gate woke no one")
	}
	if !f.mayDispatch(tn) {
		t.Fatal("confirmed, in session, after the wait: does not dispatch")
	}
	now = now.Add(500 * time.Millisecond) // validUntil reached: the session lapsed
	if f.mayDispatch(tn) || !f.sessionLapsed() {
		t.Fatal("dispatches on a lapsed session")
	}
}

// TestFailoverJudgesARegionMadeActiveAgainAfresh: r2's broker sees r1
// hold no session for the delay and switches to r2. While r2 is active it
// watches nothing. When the operator makes r1 active again, r2 judges r1
// from then on: what it saw of r1 before the switch must not switch it
// away again at once. (It did, in the e2e scenario of a cut from the
// global store: r1 had not yet re-created its sessions when it was made
// active again, and r2 still counted them gone since the cut.)
func TestFailoverJudgesARegionMadeActiveAgainAfresh(t *testing.T) {
	ctx := t.Context()
	gstore, cache, svc := failoverFixture(t, "r2")
	now := time.Now()
	f := newRegionFailover(svc, DefaultFailoverConfig())
	f.now = func() time.Time { return now }
	active := func() string {
		t.Helper()
		p, err := gstore.Namespace(ctx, "t", "ns")
		if err != nil {
			t.Fatal(err)
		}
		return p.ActiveRegion
	}
	setActive := func(region string) {
		t.Helper()
		_, rcpt, err := gstore.UpdateNamespace(ctx, "t", "ns", func(p *global.Policies) error {
			if region == "r1" {
				p.ActiveRegion = "r1"
				p.SetFallbackRegions([]string{"r2", "r3"})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := cache.Await(ctx, rcpt); err != nil {
			t.Fatal(err)
		}
	}
	setActive("r1") // waits for the cache's first load

	f.pass() // r1 holds no session: from now on
	now = now.Add(2 * time.Second)
	f.pass()
	if got := active(); got != "r2" {
		t.Fatalf("after r1 held no session for the delay, active region %s, want r2", got)
	}
	// r2 waits out the rest of a session TTL since it saw r1's sessions
	// gone: whatever ended them, a revocation included, r1's brokers stop
	// by their own timer within a TTL.
	p, err := gstore.Namespace(ctx, "t", "ns")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.AutoFailover()
	if want := (DefaultFailoverConfig().SessionTTL - 2*time.Second).Milliseconds(); a.LastSwitch == nil || a.LastSwitch.DispatchWaitMillis != want {
		t.Fatalf("switch %+v, want a wait of %d ms", a.LastSwitch, want)
	}
	setActive("") // the cache shows the switch
	f.pass()      // r2 is active: it watches nothing

	setActive("r1")
	f.pass()
	if got := active(); got != "r1" {
		t.Fatalf("r1, made active again, was switched away at once to %s", got)
	}
	now = now.Add(2 * time.Second)
	f.pass()
	if got := active(); got != "r2" {
		t.Fatalf("r1 held no session for the delay once more, active region %s, want r2", got)
	}
}

// mayDispatch reports whether the gate lets t's replicated subscriptions
// dispatch now; a topic that is not gated always may.
func (f *regionFailover) mayDispatch(t topology.TopicName) bool {
	_, allowed := f.gate(t)
	return allowed
}

func mustParseTopic(t *testing.T, name string) topology.TopicName {
	t.Helper()
	tn, err := topology.ParseTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// failoverFixture is a global store with regions r1, r2 and r3, tenant t
// and namespace t/ns active in r1 with automatic failover (fallback r2,
// then r3), and a Service of region with a cache of it, loaded.
func failoverFixture(t *testing.T, region string) (*global.Store, *global.Cache, *Service) {
	t.Helper()
	return failoverFixtureOn(t, region, metatest.Memory(t))
}

// failoverFixtureOn is failoverFixture on the metadata store st.
func failoverFixtureOn(t *testing.T, region string, st meta.Store) (*global.Store, *global.Cache, *Service) {
	t.Helper()
	ctx := t.Context()
	gcfg := global.DefaultConfig()
	gcfg.Logger = slog.New(slog.DiscardHandler)
	gstore, err := global.NewStore(st, gcfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		if _, err := gstore.CreateCluster(ctx, r, global.ClusterData{BrokerServiceURL: "pulsar://" + r + ":6650"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gstore.CreateTenant(ctx, "t", global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}); err != nil {
		t.Fatal(err)
	}
	p := global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	p.SetFallbackRegions([]string{"r2", "r3"})
	p.SetAutoFailover(&global.AutoFailover{DelaySeconds: 2})
	rcpt, err := gstore.CreateNamespace(ctx, "t", "ns", p)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := global.StartCache(gstore, global.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	svcCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	svc := &Service{cfg: ServiceConfig{Region: region, BrokerID: "b-" + region, CloseTimeout: time.Second}, gstore: gstore,
		policies: cache, log: slog.New(slog.DiscardHandler), ctx: svcCtx}
	if err := cache.Await(ctx, rcpt); err != nil {
		t.Fatal(err)
	}
	return gstore, cache, svc
}

// TestFailoverGateLeavesTopicsSwitchedByHand: in a namespace with automatic
// failover, a topic with an active region of its own (a drill's) is
// outside the gate, its partitions included, while the namespace's other
// topics stay behind it.
func TestFailoverGateLeavesTopicsSwitchedByHand(t *testing.T) {
	ctx := t.Context()
	gstore, cache, svc := failoverFixture(t, "r2")
	drill := mustParseTopic(t, "persistent://t/ns/drill")
	tp := global.TopicPolicies{Partitions: 2}
	tp.SetActiveRegion("r2")
	rcpt, err := gstore.CreateTopic(ctx, drill, tp)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Await(ctx, rcpt); err != nil {
		t.Fatal(err)
	}
	f := newRegionFailover(svc, DefaultFailoverConfig())
	f.setGates(f.gates(ctx, f.optedInNamespaces()))
	if !f.mayDispatch(drill.PartitionN(1)) {
		t.Fatal("a partition of the drill's topic, active here by its own policy, is held by the namespace's gate")
	}
	if f.mayDispatch(mustParseTopic(t, "persistent://t/ns/other")) {
		t.Fatal("another topic of the namespace, active in r1, dispatches in r2")
	}
}

// extendedStore answers TimeToLive with extra more than the lease has
// left: etcd rounds up to the next second, and a new leader extends every
// lease by an election timeout.
type extendedStore struct {
	meta.Store
	extra time.Duration
}

func (s extendedStore) TimeToLive(ctx context.Context, id meta.LeaseID) (remaining, granted time.Duration, err error) {
	remaining, granted, err = s.Store.TimeToLive(ctx, id)
	return remaining + s.extra, granted, err
}

// TestSessionNeverOutlivesItsTTL: a broker counts its session valid from
// when it asked for what its lease has left at least (the store's answer
// less global.LeaseTimeLeftSlack), less the margin, and never for more
// than the TTL less the margin, whatever the store reports: a decider
// that sees the session expired lets another region dispatch at once, and
// one that revokes it, one TTL after the revocation.
func TestSessionNeverOutlivesItsTTL(t *testing.T) {
	cfg := DefaultFailoverConfig()
	for _, tc := range []struct {
		name  string
		extra time.Duration
		want  time.Duration
	}{
		{"exact", 0, cfg.SessionTTL - global.LeaseTimeLeftSlack - cfg.Margin},
		{"rounded up and extended by an election", global.LeaseTimeLeftSlack + 2*time.Second, cfg.SessionTTL - cfg.Margin},
	} {
		_, _, svc := failoverFixtureOn(t, "r1", extendedStore{metatest.Memory(t), tc.extra})
		f := newRegionFailover(svc, cfg)
		now := time.Now()
		f.now = func() time.Time { return now }
		f.keepSession(t.Context(), true)
		f.mu.Lock()
		got := f.mu.validUntil.Sub(now)
		f.mu.Unlock()
		f.endSession()
		if got != tc.want {
			t.Errorf("%s: session valid for %v after the check, want %v", tc.name, got, tc.want)
		}
	}
}

// stallingStore makes every call wait, once stalled, until its context
// ends or the store is released: a global store electing a leader.
type stallingStore struct {
	meta.Store
	mu       sync.Mutex
	stalled  chan struct{} // nil while not stalled; closed on release
	arrivals int
}

func (s *stallingStore) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = make(chan struct{})
}

func (s *stallingStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled != nil {
		close(s.stalled)
		s.stalled = nil
	}
}

// calls is how many calls have waited on the stall.
func (s *stallingStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals
}

func (s *stallingStore) wait(ctx context.Context) error {
	s.mu.Lock()
	stalled := s.stalled
	if stalled != nil {
		s.arrivals++
	}
	s.mu.Unlock()
	if stalled == nil {
		return nil
	}
	select {
	case <-stalled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stallingStore) Grant(ctx context.Context, ttl time.Duration) (meta.Lease, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Grant(ctx, ttl)
}

func (s *stallingStore) List(ctx context.Context, prefix string) ([]meta.KV, int64, error) {
	if err := s.wait(ctx); err != nil {
		return nil, 0, err
	}
	return s.Store.List(ctx, prefix)
}

// TestProbesGoOnWhileTheStoreStalls: while the global store does not
// answer (the region that held its leader is lost, and the others elect
// one), a broker's passes wait on it, but its probes go on: the failover
// delay counts from the first failed probe, not from when the store
// answered again. Each failure counts from when the probe was sent.
func TestProbesGoOnWhileTheStoreStalls(t *testing.T) {
	st := &stallingStore{Store: metatest.Memory(t)}
	_, _, svc := failoverFixtureOn(t, "r2", st)
	ctx, cancel := context.WithCancel(svc.ctx)
	svc.ctx, svc.clock = ctx, clockwork.NewRealClock()
	cfg := DefaultFailoverConfig()
	cfg.Interval = 10 * time.Millisecond
	// The probes succeed until the pass waits on the stalled store, and
	// then time out.
	clock := clockwork.NewFakeClock()
	var (
		mu    sync.Mutex
		first time.Time // when the first failed probe was sent
	)
	cfg.Probe = func(context.Context, global.ClusterData, string, time.Duration) error {
		if st.calls() == 0 {
			return nil
		}
		mu.Lock()
		if first.IsZero() {
			first = clock.Now()
		}
		mu.Unlock()
		clock.Advance(cfg.ProbeTimeout)
		return errors.New("i/o timeout")
	}
	f := newRegionFailover(svc, cfg)
	f.now = clock.Now
	st.stall()
	svc.wg.Add(2)
	go f.loop()
	go f.probeLoop()
	defer func() {
		st.release()
		cancel()
		svc.wg.Wait()
	}()

	o := f.optedInNamespaces()[0]
	for deadline := time.Now().Add(time.Minute); ; {
		if since, down := f.unreachableSince(o); down {
			mu.Lock()
			defer mu.Unlock()
			if !since.Equal(first) {
				t.Fatalf("unreachable since %v, want %v: when the first failed probe was sent", since, first)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no probe failed while the store stalled")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFailoverWaitsOnlyAfterARevocation: r2's broker sees r1's only
// session, then sees it gone, and switches to r2 once the delay has passed
// since the session's last renewal (r1 lost the store then). The new
// region waits out a SessionTTL since the session went only when it may
// have been revoked (r1's broker, cut off, stops by its own timer within
// that); a session that expired had its broker stop before it ended, so
// r2 dispatches at once. A revocation is assumed whenever the region's
// revocation record is newer than the session, and whenever a broker
// that predates the record holds a session (it revokes without one).
func TestFailoverWaitsOnlyAfterARevocation(t *testing.T) {
	cfg := DefaultFailoverConfig()
	conservative := cfg.SessionTTL - 1500*time.Millisecond // a TTL since the session was seen gone
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context, gstore *global.Store, r1 meta.Lease) error
		want time.Duration
	}{
		{"expired", func(ctx context.Context, _ *global.Store, r1 meta.Lease) error { return r1.Revoke(ctx) }, 0},
		{"revoked", func(ctx context.Context, gstore *global.Store, _ meta.Lease) error {
			return gstore.RevokeFailoverSessions(ctx, "r1", time.Now())
		}, conservative},
		{"expired, beside a broker that predates the record", func(ctx context.Context, gstore *global.Store, r1 meta.Lease) error {
			old, err := gstore.GrantLease(ctx, time.Minute)
			if err != nil {
				return err
			}
			if err := gstore.CreateFailoverSession(ctx, "r3", global.FailoverSession{Broker: "old"}, old.ID()); err != nil {
				return err
			}
			return r1.Revoke(ctx)
		}, conservative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			gstore, _, svc := failoverFixture(t, "r2")
			r1, err := gstore.GrantLease(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := gstore.CreateFailoverSession(ctx, "r1", global.FailoverSession{Broker: "b-r1", RecordsRevocations: true}, r1.ID()); err != nil {
				t.Fatal(err)
			}
			f := newRegionFailover(svc, cfg)
			defer f.endSession()
			now := time.Now()
			f.now = func() time.Time { return now }
			f.pass() // sees r1's session
			if err := tc.end(ctx, gstore, r1); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Second)
			f.pass() // sees it gone
			now = now.Add(1500 * time.Millisecond)
			f.pass() // the delay (2 s) has passed since the session's last renewal
			p, err := gstore.Namespace(ctx, "t", "ns")
			if err != nil {
				t.Fatal(err)
			}
			a, _ := p.AutoFailover()
			if p.ActiveRegion != "r2" || a.LastSwitch == nil {
				t.Fatalf("active region %s, switch %+v: want a switch to r2", p.ActiveRegion, a.LastSwitch)
			}
			if got := time.Duration(a.LastSwitch.DispatchWaitMillis) * time.Millisecond; got != tc.want {
				t.Fatalf("the new region waits %v, want %v", got, tc.want)
			}
		})
	}
}
