package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Automatic region failover: a namespace that opts in (its AutoFailover
// policy, global/failover.go) moves its active region to the next fallback
// region when the active one is lost, and never lets two regions dispatch
// one of its replicated subscriptions at once. docs/architecture.md gives
// the argument and its assumptions (bounded clock drift, bounded pauses);
// in short:
//
//   - Sessions. Every broker holds a session: a lease in the global store
//     with a key under failover-sessions/<region>/. (That a broker holds
//     one also shows the admin API it is new enough to gate its dispatch.) It measures the lease's time left on
//     every pass, and counts its validity from the time it sent that
//     request: validUntil = sent + left - Margin. It never waits for an
//     answer that may not come.
//   - Dispatch. A replicated subscription of an opted-in namespace
//     dispatches only in the active region, only while the broker's session
//     is valid, only once a linearizable read of the policy (not the
//     watched cache) has shown this region active while the session was
//     held, and not before the switch's DispatchWaitMillis has passed.
//   - Detection. Every broker probes the active region of each opted-in
//     namespace with a lookup through its broker service URL
//     (Config.Probe), on a goroutine of its own (probeLoop), and its
//     passes write what the probes see under its session
//     (failover-views/...).
//   - The switch. Any broker of another region of the set switches the
//     namespace to its first fallback region that holds sessions, in one
//     compare-and-swap that requires that no session of the active region
//     is left (global.Store.SwitchActiveRegion), when either
//     (a) the active region has held no session for the delay: it cannot
//     dispatch, whatever it is doing; or
//     (b) a majority of the set has seen it unreachable for the delay, in
//     the views of every broker of each such region; its sessions are
//     then revoked first.
//     The new region waits until no session of the old one has been seen
//     for a whole SessionTTL (the rest of it, recorded with the switch):
//     a session may have ended by a revocation, another decider's
//     included, and the old region learns of that only by its own timer
//     when it is cut off.
//
// A region that is active but cannot hold its session sends lookups to the
// first fallback region, which will take over if the switch comes.

// FailoverConfig configures automatic region failover.
type FailoverConfig struct {
	// SessionTTL is the lease of each broker's failover session. A region
	// cut off from the global store stops dispatching the replicated
	// subscriptions of its opted-in namespaces at most SessionTTL - Margin
	// after its last successful check; a revoked region is taken over
	// SessionTTL after the revocation. Default 10s; at least 2s (etcd
	// counts a lease's time in whole seconds).
	SessionTTL time.Duration
	// Margin is taken off a session's time left, for clock drift and
	// process pauses. Default 2s; more than 0 and less than SessionTTL/2.
	Margin time.Duration
	// Interval is how often a broker checks its session, probes the
	// active regions and decides on a switch. Default 1s; at least 10ms,
	// less than SessionTTL/3, and at most Margin: a session that a broker
	// of the old region takes and another decider revokes between two
	// passes goes unseen, and the Margin covers it.
	Interval time.Duration
	// ProbeTimeout bounds one probe. Default 2s; at least 10ms.
	ProbeTimeout time.Duration
	// Probe looks topic up through region's broker service URL (the
	// assembly passes the replicator's remote.Probe). Nil probes nothing:
	// only a region's lost sessions then trigger a switch.
	Probe func(ctx context.Context, region global.ClusterData, topic string, timeout time.Duration) error
}

// DefaultFailoverConfig returns the defaults documented on FailoverConfig.
func DefaultFailoverConfig() FailoverConfig {
	return FailoverConfig{SessionTTL: 10 * time.Second, Margin: 2 * time.Second, Interval: time.Second, ProbeTimeout: 2 * time.Second}
}

func (c FailoverConfig) validate() error {
	switch {
	case c.SessionTTL < 2*time.Second:
		return fmt.Errorf("%w: Failover.SessionTTL %v, want at least 2s", ErrInvalidConfig, c.SessionTTL)
	case c.Margin <= 0 || 2*c.Margin >= c.SessionTTL:
		return fmt.Errorf("%w: Failover.Margin %v, want more than 0 and less than half of SessionTTL %v", ErrInvalidConfig, c.Margin, c.SessionTTL)
	case c.Interval < 10*time.Millisecond || 3*c.Interval >= c.SessionTTL || c.Interval > c.Margin:
		return fmt.Errorf("%w: Failover.Interval %v, want at least 10ms, less than a third of SessionTTL %v and at most Margin %v",
			ErrInvalidConfig, c.Interval, c.SessionTTL, c.Margin)
	case c.ProbeTimeout < 10*time.Millisecond:
		return fmt.Errorf("%w: Failover.ProbeTimeout %v, want at least 10ms", ErrInvalidConfig, c.ProbeTimeout)
	}
	return nil
}

// probeTopic is the topic whose lookup probes a namespace's active region.
const probeTopic = "__meridian_failover_probe"

// regionFailover is one broker's part in automatic failover: its session,
// the dispatch gate of the opted-in namespaces, its probes and its
// decisions. One goroutine (loop) runs the passes; the dispatchers read the
// gate (mayDispatch) and wait on gateOpened.
type regionFailover struct {
	svc *Service
	cfg FailoverConfig
	now func() time.Time

	// Pass state, owned by the loop goroutine.
	lease         meta.Lease         // nil without a session
	stopLease     context.CancelFunc // ends the lease's keep-alive
	written       map[string]global.FailoverView
	writtenLease  meta.LeaseID
	passes        int                  // passes made: which session's lease sawSessions reads
	sessionsGone  map[string]time.Time // by region: since when a pass has found none of its sessions
	renewed       map[string]time.Time // by region: when its sessions were last renewed, as a pass saw them
	oldestSession map[string]int64     // by region: the creation revision of the oldest session a pass saw
	// These and mu.unreachableSince are what this broker has watched
	// without a break: a pass (a probe round, for unreachableSince) drops
	// what it no longer watches (a namespace active here now, or active
	// elsewhere than it was), so that a region made active again is
	// judged afresh, not on a loss seen before.

	mu struct {
		sync.Mutex
		// unreachableSince is written by the probe rounds (probeLoop) and
		// read by the passes: by watchKey, when the first failed probe of
		// the namespace's active region was sent.
		unreachableSince map[string]time.Time
		validUntil       time.Time
		// gates holds every opted-in namespace (tenant/ns) whose set
		// includes this region; a namespace not in it is not gated.
		gates map[string]failoverGate
		// shut is set when a dispatcher found its gate shut; the next
		// pass that finds a gate open wakes them all (opened).
		shut bool
	}
	// opened is closed, and replaced, when a gate opened. Every
	// dispatcher reads it on every round, so it is not behind mu.
	opened atomic.Pointer[chan struct{}]
}

// failoverGate is one opted-in namespace's dispatch permission, apart from
// the session's validity.
type failoverGate struct {
	confirmed bool      // active here, by a linearizable read made while the session was held
	notBefore time.Time // the switch's wait
	// ownActiveRegion holds the namespace's topics (partitioned topics'
	// names) with an active region of their own, which the gate leaves
	// alone: they are switched by hand.
	ownActiveRegion map[string]bool
}

func newRegionFailover(s *Service, cfg FailoverConfig) *regionFailover {
	f := &regionFailover{svc: s, cfg: cfg, now: time.Now, written: map[string]global.FailoverView{},
		sessionsGone: map[string]time.Time{}, renewed: map[string]time.Time{}, oldestSession: map[string]int64{}}
	f.mu.gates, f.mu.unreachableSince = map[string]failoverGate{}, map[string]time.Time{}
	opened := make(chan struct{})
	f.opened.Store(&opened)
	return f
}

// mayDispatchReplicated reports whether t's replicated subscriptions may
// dispatch now. In a namespace with automatic failover, only where and
// while failover.go allows, and only while their changes are being written
// to the global store (replicatedSubs.writtenLately). A namespace without
// automatic failover always may, and so may a topic with an active region
// of its own, which is switched by hand (global.TopicPolicies.ActiveRegion).
func (t *Topic) mayDispatchReplicated() bool {
	gated, allowed := t.svc.failover.gate(t.name)
	return !gated || (allowed && (t.rs == nil || t.rs.writtenLately()))
}

// gate reports whether t's replicated subscriptions are behind a gate (t's
// namespace has automatic failover, and t has no active region of its
// own), and if so whether it lets them dispatch now.
func (f *regionFailover) gate(t topology.TopicName) (gated, allowed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, gated := f.mu.gates[t.Tenant+"/"+t.Namespace]
	if !gated || g.ownActiveRegion[t.Base().String()] {
		return false, true
	}
	if !f.allowedLocked(g, f.now()) {
		f.mu.shut = true
		return true, false
	}
	return true, true
}

func (f *regionFailover) allowedLocked(g failoverGate, now time.Time) bool {
	return g.confirmed && now.Before(f.mu.validUntil) && !now.Before(g.notBefore)
}

// gateOpened returns a channel closed when a gate opens: a dispatcher that
// found its gate shut waits on it.
func (f *regionFailover) gateOpened() <-chan struct{} { return *f.opened.Load() }

// holdsSession reports whether this broker's session is valid now.
func (f *regionFailover) holdsSession() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now().Before(f.mu.validUntil)
}

// sessionLapsed reports whether this broker held a session that is no
// longer valid (and not merely none yet, as at the start).
func (f *regionFailover) sessionLapsed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.mu.validUntil.IsZero() && !f.now().Before(f.mu.validUntil)
}

// loop runs a pass on every change of the global configuration and every
// Interval, and ends the session when the Service closes.
func (f *regionFailover) loop() {
	defer f.svc.wg.Done()
	defer f.endSession()
	f.svc.policyPasses(f.cfg.Interval, f.pass)
}

// probeLoop runs the probe rounds, on the same beat as the passes but on
// a goroutine of its own: a pass waits on the global store, which stalls
// for an election when the region that held its leader is lost, and the
// probes that time that loss must not wait with it. It runs only with a
// FailoverConfig.Probe.
func (f *regionFailover) probeLoop() {
	defer f.svc.wg.Done()
	f.svc.policyPasses(f.cfg.Interval, f.probeRound)
}

// optedIn is one namespace with automatic failover whose set includes
// this region.
type optedIn struct {
	tenant, ns string
	policies   global.Policies
	failover   global.AutoFailover
}

func (o optedIn) name() string { return o.tenant + "/" + o.ns }

// watchKey names what this broker watches of o: its active region.
func (o optedIn) watchKey() string { return o.name() + " " + o.policies.ActiveRegion }

// optedInNamespaces lists them from the watched cache.
func (f *regionFailover) optedInNamespaces() []optedIn {
	var out []optedIn
	for _, tenant := range f.svc.policies.Tenants() {
		for _, ns := range f.svc.policies.Namespaces(tenant) {
			p, ok := f.svc.policies.Namespace(tenant, ns)
			if !ok || !slices.Contains(p.ReplicationClusters, f.svc.cfg.Region) {
				continue
			}
			if a, on := p.AutoFailover(); on && p.ActiveRegion != "" {
				out = append(out, optedIn{tenant: tenant, ns: ns, policies: p, failover: a})
			}
		}
	}
	return out
}

// pass keeps the session, recomputes the gates, probes and decides.
func (f *regionFailover) pass() {
	ctx, cancel := context.WithTimeout(f.svc.ctx, f.cfg.SessionTTL)
	defer cancel()
	f.passes++
	namespaces := f.optedInNamespaces()
	f.keepSession(ctx, len(namespaces) > 0)
	f.setGates(f.gates(ctx, namespaces))
	probed, regions := map[string]bool{}, map[string]bool{}
	sessions := sessionReads{f: f, read: map[string][]global.FailoverSession{}}
	for _, o := range namespaces {
		if o.policies.ActiveRegion != f.svc.cfg.Region {
			probed[o.name()], regions[o.policies.ActiveRegion] = true, true
			f.writeView(ctx, o.name(), f.view(o))
			f.decide(ctx, o, &sessions)
		}
	}
	for region := range regions {
		if ss, err := sessions.of(ctx, region); err == nil && len(ss) > 0 {
			f.sawSessions(ctx, region, ss)
		}
	}
	f.unwatch(ctx, probed)
	maps.DeleteFunc(f.sessionsGone, func(r string, _ time.Time) bool { return !regions[r] })
	maps.DeleteFunc(f.renewed, func(r string, _ time.Time) bool { return !regions[r] })
	maps.DeleteFunc(f.oldestSession, func(r string, _ int64) bool { return !regions[r] })
}

// keepSession grants the session when there is none and measures its time
// left; validUntil counts from when the measuring request was sent. The
// session is held whether or not a namespace has opted in (see
// global.FailoverSession); its troubles are warnings only when one has
// (needed), since only then does dispatch depend on it.
func (f *regionFailover) keepSession(ctx context.Context, needed bool) {
	warn := f.svc.log.Info
	if needed {
		warn = f.svc.log.Warn
	}
	if f.lease != nil {
		select {
		case <-f.lease.Done():
			f.dropSession(warn, "the session's lease ended")
		default:
		}
	}
	if f.lease == nil {
		l, stop, err := f.grant()
		if err != nil {
			warn("failover session: cannot grant a lease", "err", err)
			return
		}
		ss := global.FailoverSession{Broker: f.svc.cfg.BrokerID, ServiceURL: f.svc.cfg.ServiceURL, RecordsRevocations: true}
		if err := f.svc.gstore.CreateFailoverSession(ctx, f.svc.cfg.Region, ss, l.ID()); err != nil {
			warn("failover session: cannot create its key", "err", err)
			f.revoke(l)
			stop()
			return
		}
		f.lease, f.stopLease = l, stop
		f.svc.log.Info("failover session started", "lease", fmt.Sprintf("%x", int64(l.ID())))
	}
	sent := f.now()
	left, _, err := f.svc.gstore.LeaseTimeLeft(ctx, f.lease.ID())
	switch {
	case errors.Is(err, meta.ErrLeaseNotFound):
		f.dropSession(warn, "the session's lease was revoked or expired")
	case err != nil:
		f.svc.log.Info("failover session: lease not checked; it lapses on its own timer", "err", err)
	default:
		// What the lease has left at least, so that this broker stops
		// before its lease can expire (a decider lets another region
		// dispatch as soon as it sees the session expired: decide); and
		// never more than the TTL, although a new leader extends every
		// lease by an election timeout (etcd's lessor.Promote), since a
		// decider that revokes the session waits only one TTL.
		left = min(left-global.LeaseTimeLeftSlack, f.cfg.SessionTTL)
		f.mu.Lock()
		f.mu.validUntil = sent.Add(left - f.cfg.Margin) // never zero: zero is "no session held yet"
		f.mu.Unlock()
	}
	f.svc.metrics.failoverSession(f.holdsSession())
}

// grant grants a session lease, kept alive until stop is called or the
// Service closes. The grant itself is bounded by SessionTTL: the store's
// Grant ties the keep-alive to the context it is given, so that context
// cannot carry a deadline, and without one a grant could wait for a store
// that does not answer for as long as it does not, holding up the passes.
// The bound is a request deadline, on the wall clock as the store's are.
func (f *regionFailover) grant() (l meta.Lease, stop context.CancelFunc, err error) {
	ctx, stop := context.WithCancel(f.svc.ctx)
	bound := time.AfterFunc(f.cfg.SessionTTL, stop)
	l, err = f.svc.gstore.GrantLease(ctx, f.cfg.SessionTTL)
	if !bound.Stop() && err == nil {
		// Granted as the bound passed, which ended its keep-alive.
		f.revoke(l)
		err = fmt.Errorf("granted only after %v", f.cfg.SessionTTL)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return l, stop, nil
}

// dropSession forgets a session that has ended: dispatch stops at once,
// and the next pass grants a new one.
func (f *regionFailover) dropSession(warn func(string, ...any), why string) {
	warn("failover session lost; replicated subscriptions of namespaces with automatic failover stop", "why", why)
	f.stopLease()
	f.lease, f.stopLease = nil, nil
	f.mu.Lock()
	// Lapsed, not zero: lookups go elsewhere (lookupElsewhere).
	if now := f.now(); f.mu.validUntil.After(now) {
		f.mu.validUntil = now
	}
	f.mu.Unlock()
	f.svc.metrics.failoverSession(false)
}

// endSession revokes the session, if any, as the Service closes. The
// gate shuts first: no broker dispatches under a session that is gone.
func (f *regionFailover) endSession() {
	if f.lease == nil {
		return
	}
	f.mu.Lock()
	f.mu.validUntil = time.Time{}
	f.mu.Unlock()
	f.revoke(f.lease)
	f.stopLease()
	f.lease, f.stopLease = nil, nil
	f.svc.metrics.failoverSession(false)
}

func (f *regionFailover) revoke(l meta.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.svc.ctx), f.svc.cfg.CloseTimeout)
	defer cancel()
	if err := l.Revoke(ctx); err != nil {
		f.svc.log.Info("failover session: revoking its lease", "err", err)
	}
}

// gates computes each opted-in namespace's gate. A namespace that became
// active here is confirmed by a linearizable read of its policy, made
// while the session is held; one already confirmed stays so while the
// cache shows it active here.
func (f *regionFailover) gates(ctx context.Context, namespaces []optedIn) map[string]failoverGate {
	f.mu.Lock()
	was := f.mu.gates
	f.mu.Unlock()
	out := make(map[string]failoverGate, len(namespaces))
	for _, o := range namespaces {
		g := failoverGate{}
		for _, name := range f.svc.policies.Topics(o.tenant, o.ns) {
			t, err := topology.ParseTopicName(name)
			if tp, ok := f.svc.policies.Topic(t); err == nil && ok && tp.ActiveRegion() != "" {
				if g.ownActiveRegion == nil {
					g.ownActiveRegion = map[string]bool{}
				}
				g.ownActiveRegion[name] = true
			}
		}
		if o.policies.ActiveRegion == f.svc.cfg.Region {
			if sw := o.failover.LastSwitch; sw != nil && sw.To == f.svc.cfg.Region {
				g.notBefore = sw.NotBefore()
			}
			g.confirmed = was[o.name()].confirmed || f.confirmActive(ctx, o)
		}
		out[o.name()] = g
	}
	return out
}

// confirmActive reads o's policy from the store itself, not the cache.
func (f *regionFailover) confirmActive(ctx context.Context, o optedIn) bool {
	if !f.holdsSession() {
		return false
	}
	p, err := f.svc.gstore.Namespace(ctx, o.tenant, o.ns)
	if err != nil {
		f.svc.log.Info("automatic failover: active region not confirmed", "namespace", o.name(), "err", err)
		return false
	}
	return p.ActiveRegion == f.svc.cfg.Region
}

// setGates installs the gates, and wakes the dispatchers that found theirs
// shut when one is open now (a confirmation, a session checked again, a
// wait passed). A dispatcher that found its gate shut just after this
// pass waits for the next one: at most Interval.
func (f *regionFailover) setGates(gates map[string]failoverGate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.gates = gates
	now, open := f.now(), false
	for _, g := range gates {
		open = open || f.allowedLocked(g, now)
	}
	if f.mu.shut && (open || len(gates) == 0) {
		f.mu.shut = false
		next := make(chan struct{})
		close(*f.opened.Swap(&next))
	}
}

// probeRound probes the active region of every opted-in namespace that is
// active elsewhere, all at once, and forgets what it no longer watches.
func (f *regionFailover) probeRound() {
	watched := map[string]bool{}
	var wg sync.WaitGroup
	for _, o := range f.optedInNamespaces() {
		if o.policies.ActiveRegion != f.svc.cfg.Region {
			watched[o.watchKey()] = true
			wg.Go(func() { f.probe(f.svc.ctx, o) })
		}
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	maps.DeleteFunc(f.mu.unreachableSince, func(k string, _ time.Time) bool { return !watched[k] })
}

// probe looks the namespace's probe topic up in its active region. A
// failure counts from when the probe was sent: a region that died does
// not answer, and the probe's timeout is no part of the delay.
func (f *regionFailover) probe(ctx context.Context, o optedIn) {
	active, sent := o.policies.ActiveRegion, f.now()
	err := fmt.Errorf("no cluster record")
	if c, ok := f.svc.policies.Cluster(active); ok {
		topic := topology.TopicName{Domain: topology.Persistent, Tenant: o.tenant, Namespace: o.ns, Local: probeTopic}
		err = f.cfg.Probe(ctx, c, topic.String(), f.cfg.ProbeTimeout)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, down := f.mu.unreachableSince[o.watchKey()]
	switch {
	case err == nil:
		delete(f.mu.unreachableSince, o.watchKey())
	case !down:
		f.mu.unreachableSince[o.watchKey()] = sent
		f.svc.log.Warn("automatic failover: active region unreachable", "namespace", o.name(), "active_region", active, "err", err)
	}
}

// unreachableSince is when the probes of o's active region began to fail,
// ok false while they succeed.
func (f *regionFailover) unreachableSince(o optedIn) (since time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	since, ok = f.mu.unreachableSince[o.watchKey()]
	return since, ok
}

// view is this broker's view of o's active region, as its probes see it.
func (f *regionFailover) view(o optedIn) global.FailoverView {
	v := global.FailoverView{Region: f.svc.cfg.Region, Broker: f.svc.cfg.BrokerID, Active: o.policies.ActiveRegion}
	if since, down := f.unreachableSince(o); down {
		v.UnreachableSinceMillis = since.UnixMilli()
	}
	return v
}

// writeView stores v as this broker's view of namespace (tenant/ns), under
// its session, unless that is what it wrote last under it.
func (f *regionFailover) writeView(ctx context.Context, namespace string, v global.FailoverView) {
	if f.lease == nil || (f.written[namespace] == v && f.writtenLease == f.lease.ID()) {
		return
	}
	tenant, ns, _ := strings.Cut(namespace, "/")
	if err := f.svc.gstore.WriteFailoverView(ctx, tenant, ns, v, f.lease.ID()); err != nil {
		f.svc.log.Info("automatic failover: view not written", "namespace", namespace, "err", err)
		return
	}
	if f.writtenLease != f.lease.ID() {
		clear(f.written)
		f.writtenLease = f.lease.ID()
	}
	f.written[namespace] = v
}

// unwatch replaces this broker's views of the namespaces it no longer
// probes (active here now, or no longer opted in) with ones that watch
// nothing: a view of an old active region must not vote when that region
// is made active again.
func (f *regionFailover) unwatch(ctx context.Context, probed map[string]bool) {
	for namespace, v := range f.written {
		if !probed[namespace] && v.Active != "" {
			f.writeView(ctx, namespace, global.FailoverView{Region: v.Region, Broker: v.Broker})
		}
	}
}

// decide switches o to its next region when the active one is lost (see
// the file's comment).
func (f *regionFailover) decide(ctx context.Context, o optedIn, reads *sessionReads) {
	active, delay, now := o.policies.ActiveRegion, o.failover.Delay(), f.now()
	sessions, err := reads.of(ctx, active)
	if err != nil {
		return
	}
	gone := false
	if len(sessions) == 0 {
		absent, seen := f.sessionsGone[active]
		if !seen {
			absent = now
			f.sessionsGone[active] = absent
		}
		// The delay counts from when the region was lost, as first seen:
		// its probes' failure, or the last renewal of its sessions, if
		// before its sessions were seen gone. A region that dies is
		// unreachable at once, while its leases take up to a SessionTTL
		// to expire (more if a new leader of the store extended them);
		// one cut off from the store only still answers probes, but
		// renews nothing. The delay is not what makes the switch safe,
		// only what keeps a blip from causing one.
		since := absent
		if u, down := f.unreachableSince(o); down && u.Before(since) {
			since = u
		}
		if r, ok := f.renewed[active]; ok && r.Before(since) {
			since = r
		}
		gone = now.Sub(since) >= delay
	} else {
		delete(f.sessionsGone, active)
	}
	views, err := f.svc.gstore.FailoverViews(ctx, o.tenant, o.ns)
	if err != nil {
		return
	}
	votes := unreachableVotes(views, active, now.Add(-delay))
	majority := len(o.policies.ReplicationClusters)/2 + 1
	if !gone && votes < majority {
		return
	}
	to := nextRegion(ctx, o, reads)
	if to == "" {
		f.svc.log.Warn("automatic failover: no fallback region holds a session", "namespace", o.name(), "active_region", active)
		return
	}
	if len(sessions) > 0 {
		reads.forget(active)
		if err := f.svc.gstore.RevokeFailoverSessions(ctx, active, now); err != nil {
			f.svc.log.Warn("automatic failover: revoking the active region's sessions", "namespace", o.name(), "err", err)
			return
		}
	}
	// What makes the switch safe: the new region dispatches only once no
	// session of the old one has been seen for a whole SessionTTL, since
	// whatever ended the last one, its expiry or a revocation (this
	// broker's, just now, or another decider's), its broker stops by its
	// own timer within that; or at once, when the sessions expired, since
	// their brokers stopped before their leases could end. at is read
	// after the revocation.
	at, wait := f.now(), f.cfg.SessionTTL
	if absent, seen := f.sessionsGone[active]; seen && len(sessions) == 0 {
		wait = max(0, wait-at.Sub(absent))
		if wait > 0 && f.expired(ctx, active) {
			wait = 0
		}
	}
	_, err = f.svc.gstore.SwitchActiveRegion(ctx, o.tenant, o.ns, active, to, at, wait)
	if err != nil {
		f.svc.log.Info("automatic failover: switch not written", "namespace", o.name(), "from", active, "to", to, "err", err)
		return
	}
	f.svc.log.Warn("automatic failover: switched the active region", "namespace", o.name(), "from", active, "to", to,
		"majority_saw_unreachable", votes >= majority, "sessions_gone", gone, "dispatch_wait", wait)
	f.svc.metrics.failedOver(o.name(), active, to)
}

// sawSessions notes what a pass saw of region's sessions: the oldest of
// them (by the store revision that created its key), and the latest
// renewal seen of one of them, as far as its lease's time left tells
// (later than it was, if anything: the store rounds the time left up, and
// a new leader extends every lease). One lease a pass, in turn, keeps the
// cost to one read per region: a region that loses the store stops
// renewing every session at once.
func (f *regionFailover) sawSessions(ctx context.Context, region string, sessions []global.FailoverSession) {
	for _, ss := range sessions {
		if oldest, ok := f.oldestSession[region]; !ok || ss.CreateRevision < oldest {
			f.oldestSession[region] = ss.CreateRevision
		}
	}
	ss := sessions[f.passes%len(sessions)]
	left, granted, err := f.svc.gstore.LeaseTimeLeft(ctx, ss.Lease)
	if err != nil {
		return
	}
	if at := f.now().Add(left - granted); at.After(f.renewed[region]) {
		f.renewed[region] = at
	}
}

// expired reports whether region's sessions, gone now, ended by expiry
// (or by their own brokers) rather than by a revocation: no revocation
// record of region was written since the oldest of them that this broker
// saw was created, and every broker that could have revoked them writes
// one before it does. A broker stops dispatching before its lease can
// expire (keepSession counts the least time left), so the new region
// need not wait. Any doubt, an error included, is a revocation.
func (f *regionFailover) expired(ctx context.Context, region string) bool {
	oldest, seen := f.oldestSession[region]
	if !seen {
		return false
	}
	rev, err := f.svc.gstore.FailoverRevocation(ctx, region)
	if err != nil || rev > oldest {
		return false
	}
	all, err := f.svc.gstore.EverySessionRecordsRevocations(ctx)
	return err == nil && all
}

// unreachableVotes counts the regions all of whose brokers' views have
// seen active unreachable since at least by.
func unreachableVotes(views []global.FailoverView, active string, by time.Time) int {
	seen := map[string]bool{}
	for _, v := range views {
		down := v.Active == active && v.UnreachableSinceMillis > 0 && !time.UnixMilli(v.UnreachableSinceMillis).After(by)
		if was, ok := seen[v.Region]; ok {
			down = down && was
		}
		seen[v.Region] = down
	}
	n := 0
	for r, down := range seen {
		if down && r != active {
			n++
		}
	}
	return n
}

// nextRegion is o's first fallback region whose brokers hold sessions, or
// "" when none does.
func nextRegion(ctx context.Context, o optedIn, reads *sessionReads) string {
	for _, r := range o.policies.FallbackRegions() {
		if ss, err := reads.of(ctx, r); err == nil && len(ss) > 0 {
			return r
		}
	}
	return ""
}

// sessionReads reads each region's sessions once per pass, however many
// namespaces ask.
type sessionReads struct {
	f    *regionFailover
	read map[string][]global.FailoverSession
}

func (r *sessionReads) of(ctx context.Context, region string) ([]global.FailoverSession, error) {
	if ss, ok := r.read[region]; ok {
		return ss, nil
	}
	ss, err := r.f.svc.gstore.FailoverSessions(ctx, region)
	if err == nil {
		r.read[region] = ss
	}
	return ss, err
}

// forget drops what was read of region, whose sessions are being revoked.
func (r *sessionReads) forget(region string) { delete(r.read, region) }

// lookupElsewhere is where a lookup of t goes instead of this region while
// this region is t's active region but has lost the session it needs to
// dispatch: its first fallback region, which takes over if the switch
// comes. "" when t is not in that state (a broker that has not held a
// session yet, just started or just opted in, answers for itself: its
// first pass grants one).
func (f *regionFailover) lookupElsewhere(t topology.TopicName, eff global.Effective) string {
	if eff.AutoFailover == nil || eff.ActiveRegion != f.svc.cfg.Region || !f.sessionLapsed() {
		return ""
	}
	p, ok := f.svc.policies.Namespace(t.Tenant, t.Namespace)
	if !ok {
		return ""
	}
	if fb := p.FallbackRegions(); len(fb) > 0 {
		return fb[0]
	}
	return ""
}
