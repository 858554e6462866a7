package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/topology"
)

// Owner is the value of an ownership key,
// /meridian/regions/<r>/owners/<tenant>/<ns>/<bundle>: the broker serving
// the bundle's topics and where clients reach it.
type Owner struct {
	BrokerID      string `json:"brokerId"`
	ServiceURL    string `json:"serviceUrl"`
	ServiceURLTLS string `json:"serviceUrlTls,omitempty"`
	WebURL        string `json:"webServiceUrl,omitempty"`
	WebURLTLS     string `json:"webServiceUrlTls,omitempty"`
	// Listeners are the broker's advertised listeners by name (Pulsar's
	// advertisedListeners, PIP-61), the internal one included: ServiceURL
	// and ServiceURLTLS are the internal listener's. Empty when the broker
	// has none; a record written before listeners existed decodes so.
	Listeners map[string]Listener `json:"advertisedListeners,omitempty"`
}

// Listener is one of a broker's advertised listeners, in the JSON of
// Pulsar's AdvertisedListener: where a client that names it reaches the
// broker.
type Listener struct {
	ServiceURL    string `json:"brokerServiceUrl"`
	ServiceURLTLS string `json:"brokerServiceUrlTls,omitempty"`
}

// Listener returns where a client that names listener in its lookup
// reaches o: its ServiceURL and ServiceURLTLS for "" (no name given),
// else that listener's URLs. A name o does not have is ServiceNotReady, as
// Pulsar answers it (the client retries, then reports the message).
func (o Owner) Listener(name string) (Listener, error) {
	if name == "" {
		return Listener{ServiceURL: o.ServiceURL, ServiceURLTLS: o.ServiceURLTLS}, nil
	}
	l, ok := o.Listeners[name]
	if !ok {
		return Listener{}, fmt.Errorf("%w: the broker %s does not have %s listener", wire.ErrServiceNotReady, o.BrokerID, name)
	}
	return l, nil
}

// ownership places bundles on the region's brokers and claims bundles for
// this broker, under one session lease that also carries the broker's
// registration, /meridian/regions/<r>/brokers/<id>.
//
// # Claims
//
// A bundle is served by the broker whose id its key,
// /meridian/regions/<r>/owners/<tenant>/<ns>/<bundle>, holds, and only while
// the key hangs on that broker's current session lease (decode). Keys are
// created only when absent, so of two lookups racing for a bundle one
// creates it and the other reads the winner: one owner. The broker that
// gets a lookup of an unowned bundle places it (placement.go): it creates
// the key with the least-loaded live broker's id, under that broker's lease
// (etcd lets a key hang on any live lease), and the chosen broker serves
// the bundle when a client arrives, because it finds its own id under its
// own lease. A topic load (a client that reached this broker) claims a
// free bundle for this broker instead (ClaimBundle).
//
// # The lost lease
//
// When the session lease ends (the broker was cut off from etcd for a TTL,
// or another broker revoked it) every key under it is gone, and other
// brokers may place its bundles elsewhere at once. Invariant: this broker
// claims nothing, and answers no lookup, between the end of a lease and the
// moment every topic it loaded under that lease has unloaded (onLost has
// returned). Meanwhile currentLease fails with ServiceNotReady, so lookups
// and topic loads do too and clients retry. Only then is a new lease
// granted, and the old one is revoked first in case only this side had
// given up on it (a keep-alive that failed while the server kept it). A
// topic of the old lease therefore never serves beside the same topic
// loaded under the new one, on this broker or by an owner that took it.
//
// # Fast failover, and why it is safe
//
// A lookup that finds the bundle owned by another broker X probes X
// (probe.go): it dials X's advertised service URL and sends CONNECT,
// within LookupConfig.ProbeTimeout. Any reply means X is alive, and the
// lookup answers X. A refused connection means X's process is gone: the lookup revokes X's lease, which deletes
// X's registration and every claim it held, and places the bundle afresh,
// well within the TTL. A timeout proves nothing (X may be paused, or its
// host slow), nor does a connection closed or reset without a word (a live
// broker closes so at its connection bounds, and a proxy in front of a
// dead one may too): the lookup lets X's lease decide. If X has renewed its
// lease lately, X is alive and only slow, and the lookup answers X. If X
// has missed renewals (less than half its TTL left), X is frozen or cut
// off, and the lookup waits until the lease ends and the bundle is placed
// afresh (awaitSilentOwner): sent to X, the client would wait out a
// connection timeout and then a backoff step past the lease's end.
//
// A probe can be wrong: X may have been alive after all (a listener
// restarting, a proxy in front of it that lost its backend for a moment).
// Storage makes that harmless:
//   - The new owner loads each topic by opening its managed ledger, which
//     recovers and fences the ledger X was writing (DESIGN §4). X's next
//     append fails on every bookie that fenced, so no entry of X's is
//     acknowledged after the new owner's load.
//   - X's writes to its topics' ledger lists and cursors are compare-and-swap
//     on the ModRevision X last read. The new owner's load changed them, so
//     X's writes fail, and a failed CAS makes X let go of the topic (DESIGN
//     §3), never retry over the winner.
//   - X's lease is gone, so X sees it end (its keep-alive is refused) and
//     unloads everything it served before it claims anything again: the
//     invariant above.
//
// A broker alive but cut off from etcd cannot be revoked by a probe (it
// answers), and needs not be: its lease runs out after the TTL, its claims
// vanish, and it unloads when it sees its lease end.
//
// # Locking
//
// mu guards the session state only and is never held across a store call:
// one grant is in flight at a time (mu.granting) and other callers wait on
// it. place serialises the choose-and-create of this broker's placements,
// so that a burst of lookups through one broker sees its own earlier
// placements. rec serialises writes of the registration.
type ownership struct {
	store  meta.Store
	region string
	self   Owner
	ttl    time.Duration
	cfg    LookupConfig
	clock  clockwork.Clock // times the probe's "alive" memory
	log    *slog.Logger
	onLost func()         // unloads every topic; called before a new lease is taken
	wg     sync.WaitGroup // the watch goroutine of each lease

	// metrics counts ownership changes; nil records nothing.
	metrics *metrics

	mu struct {
		sync.Mutex
		lease     meta.Lease         // nil until the first claim, and after a loss
		stopLease context.CancelFunc // ends lease's keep-alive
		prevLease meta.LeaseID       // the last lease this broker held, once it ended
		// granting is non-nil while a grant is in flight, and closed when
		// it ends.
		granting chan struct{}
		// unloading is non-nil from the end of a lease until onLost has
		// returned: no claim meanwhile (the invariant above).
		unloading chan struct{}
		released  bool // release was called: no lease any more
	}

	// place is a one-slot semaphore held across one placement's choose and
	// create.
	place chan struct{}

	// probes remembers which brokers answered a probe lately, and shares a
	// probe under way between the lookups that need it (probe.go).
	probes probeState

	// rand breaks placement ties.
	rand struct {
		sync.Mutex
		r *rand.Rand
	}

	// rec is this broker's registration as last written. Its writes are
	// serialised here, apart from mu, so that a slow etcd holds up no
	// claim; see updateRecord.
	rec struct {
		sync.Mutex
		record BrokerRecord
		lease  meta.LeaseID // the lease the key was written under; NoLease before
		modRev int64        // the key's ModRevision after our last write
	}
}

func newOwnership(store meta.Store, region string, self Owner, ttl time.Duration, cfg LookupConfig, clock clockwork.Clock,
	rnd *rand.Rand, log *slog.Logger, onLost func()) *ownership {
	o := &ownership{store: store, region: region, self: self, ttl: ttl, cfg: cfg, clock: clock, log: log, onLost: onLost,
		place: make(chan struct{}, 1)}
	o.rec.record = BrokerRecord{Owner: self}
	o.rand.r = rnd
	o.probes.init()
	return o
}

func (o *ownership) brokerKey() string { return meta.RegionKey(o.region, "brokers", o.self.BrokerID) }

func (o *ownership) bundleKey(tenant, ns string, b topology.Bundle) string {
	return meta.RegionKey(o.region, "owners", tenant, ns, b.String())
}

// start revokes the lease of this broker's previous run (DESIGN §3: etcd
// renews surviving leases to a full TTL on restart, which would keep this
// broker's old claims alive) and registers the broker.
func (o *ownership) start(ctx context.Context) error {
	if _, err := meta.RevokeStale(ctx, o.store, o.brokerKey()); err != nil {
		return err
	}
	_, err := o.currentLease(ctx)
	return err
}

// currentLease returns the live session lease, granting one (and
// registering the broker under it) when there is none. It fails with
// ServiceNotReady while the topics of a lost lease unload, and after
// release.
func (o *ownership) currentLease(ctx context.Context) (meta.Lease, error) {
	for {
		o.mu.Lock()
		switch {
		case o.mu.released:
			o.mu.Unlock()
			return nil, fmt.Errorf("%w: broker is shutting down", wire.ErrServiceNotReady)
		case o.mu.unloading != nil:
			o.mu.Unlock()
			return nil, fmt.Errorf("%w: broker lost its session and is unloading its topics", wire.ErrServiceNotReady)
		case o.mu.lease != nil:
			l := o.mu.lease
			o.mu.Unlock()
			select {
			case <-l.Done():
				// watch has not taken the loss in hand yet; it will.
				return nil, fmt.Errorf("%w: broker lost its session and is unloading its topics", wire.ErrServiceNotReady)
			default:
				return l, nil
			}
		case o.mu.granting != nil:
			g := o.mu.granting
			o.mu.Unlock()
			select {
			case <-g:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: waiting for a session lease: %v", wire.ErrServiceNotReady, ctx.Err())
			}
		}
		g := make(chan struct{})
		o.mu.granting = g
		prev := o.mu.prevLease
		o.mu.Unlock()

		l, stop, err := o.grant(ctx, prev)

		o.mu.Lock()
		o.mu.granting = nil
		close(g)
		if err == nil && o.mu.released {
			err = fmt.Errorf("%w: broker is shutting down", wire.ErrServiceNotReady)
		}
		if err != nil {
			o.mu.Unlock()
			if l != nil {
				_ = l.Revoke(context.WithoutCancel(ctx))
				stop()
			}
			return nil, err
		}
		o.mu.lease, o.mu.stopLease, o.mu.prevLease = l, stop, meta.NoLease
		o.wg.Add(1)
		o.mu.Unlock()
		go o.watch(l)
		return l, nil
	}
}

// grant revokes prev, this broker's last lease (its topics have unloaded:
// currentLease's invariant), then grants a new lease and registers the
// broker under it. The grant is bounded by ctx, but the lease outlives it:
// it lives until stop is called or the lease ends. On error, l, when not
// nil, is the granted lease, for the caller to revoke and stop.
func (o *ownership) grant(ctx context.Context, prev meta.LeaseID) (l meta.Lease, stop context.CancelFunc, err error) {
	if prev != meta.NoLease {
		if err := o.store.Revoke(ctx, prev); err != nil {
			return nil, nil, fmt.Errorf("%w: revoke this broker's previous session: %v", wire.ErrServiceNotReady, err)
		}
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	// The grant call gives up with ctx; a lease granted after that would
	// have lost its keep-alive with life, so it is refused below.
	abandon := context.AfterFunc(ctx, stop)
	l, err = o.store.Grant(life, o.ttl)
	if !abandon() {
		err = fmt.Errorf("grant abandoned: %w", ctx.Err())
	}
	if err != nil {
		stop()
		if l != nil {
			_ = o.store.Revoke(context.WithoutCancel(ctx), l.ID())
		}
		return nil, nil, fmt.Errorf("%w: grant ownership lease: %v", wire.ErrServiceNotReady, err)
	}
	if err := o.register(ctx, l); err != nil {
		return l, stop, err
	}
	return l, stop, nil
}

// register writes this broker's registration under lease l.
func (o *ownership) register(ctx context.Context, l meta.Lease) error {
	o.rec.Lock()
	defer o.rec.Unlock()
	v, err := meta.EncodeJSON(1, o.rec.record)
	if err != nil {
		return err
	}
	rev, err := o.store.Create(ctx, o.brokerKey(), v, l.ID())
	if err != nil {
		return fmt.Errorf("%w: register broker %s: %v", wire.ErrServiceNotReady, o.self.BrokerID, err)
	}
	o.rec.lease, o.rec.modRev = l.ID(), rev
	return nil
}

// updateRecord applies change to this broker's registration (its load
// report, its draining flag) and writes it, compare-and-swap on the
// ModRevision of our last write. Only this broker writes the key, so a
// conflict means the lease, and the key with it, is gone (the changed
// record is then written by the next lease's registration), or that a
// write of ours landed after its caller gave up on it (then the key is
// still under our lease, and the write is made again on its revision).
func (o *ownership) updateRecord(ctx context.Context, change func(*BrokerRecord)) error {
	o.rec.Lock()
	defer o.rec.Unlock()
	change(&o.rec.record)
	if o.rec.lease == meta.NoLease {
		return nil // not registered yet: register writes it
	}
	v, err := meta.EncodeJSON(1, o.rec.record)
	if err != nil {
		return err
	}
	rev, err := o.store.Update(ctx, o.brokerKey(), v, o.rec.modRev)
	if errors.Is(err, meta.ErrConflict) {
		// Only this broker writes the key, so a conflict while the key is
		// still under our lease is an earlier write of ours that landed
		// though its answer was lost (its ctx ended first): take the key's
		// revision and write again.
		if kv, gerr := o.store.Get(ctx, o.brokerKey()); gerr == nil && kv.Lease == o.rec.lease {
			rev, err = o.store.Update(ctx, o.brokerKey(), v, kv.ModRevision)
		}
	}
	switch {
	case errors.Is(err, meta.ErrConflict):
		o.rec.lease, o.rec.modRev = meta.NoLease, 0
		return nil
	case err != nil:
		return fmt.Errorf("%w: update registration of broker %s: %v", wire.ErrMetadata, o.self.BrokerID, err)
	}
	o.rec.modRev = rev
	return nil
}

// watch waits for the lease to end and then unloads everything it held,
// claiming nothing until that is done (see the type's comment).
func (o *ownership) watch(l meta.Lease) {
	defer o.wg.Done()
	<-l.Done()
	o.mu.Lock()
	lost := o.mu.lease == l // not released on purpose
	var unloaded chan struct{}
	if lost {
		o.mu.stopLease()
		o.mu.lease, o.mu.stopLease, o.mu.prevLease = nil, nil, l.ID()
		unloaded = make(chan struct{})
		o.mu.unloading = unloaded
	}
	o.mu.Unlock()
	if !lost {
		return
	}
	o.log.Warn("ownership lease ended: unloading every topic", "lease", fmt.Sprintf("%x", int64(l.ID())))
	o.metrics.ownershipChanged(ownershipLost)
	o.onLost()
	o.mu.Lock()
	o.mu.unloading = nil
	close(unloaded)
	o.mu.Unlock()
}

// placing says where acquire puts a bundle that nobody holds.
type placing int

const (
	// placeLeastLoaded places it on the least-loaded live broker: a lookup.
	placeLeastLoaded placing = iota
	// placeHere claims it for this broker: a topic load on the broker a
	// client reached.
	placeHere
)

// maxAcquireRounds bounds acquire's reads of a bundle key that keeps
// changing under it (placed, revoked, placed again).
const maxAcquireRounds = 5

// acquire returns the owner of tenant/ns's bundle b. A bundle that nobody
// holds is placed as where says; one held by a broker that a probe finds
// dead is taken from it (its lease revoked) and placed afresh. mine reports
// whether this broker holds it under its current lease. Every failure to
// reach the metadata store is ServiceNotReady, the lookup error on which
// clients retry: never a guess at the owner.
func (o *ownership) acquire(ctx context.Context, tenant, ns string, b topology.Bundle, where placing) (owner Owner, mine bool, err error) {
	key := o.bundleKey(tenant, ns, b)
	for range maxAcquireRounds {
		kv, err := o.store.Get(ctx, key)
		if err == nil {
			v, err := decodeBundleOwner(kv)
			if err != nil {
				return Owner{}, false, err
			}
			// Another broker's bundle, even one it is handing over, is
			// taken from it when it is dead, and waited for when it is
			// silent (see "Fast failover" above).
			if v.BrokerID != o.self.BrokerID && kv.Lease != meta.NoLease {
				switch o.probe(ctx, v.Owner) {
				case brokerDead:
					if err := o.revokeDead(ctx, v.Owner, kv.Lease); err != nil {
						return Owner{}, false, err
					}
					continue // place it afresh
				case brokerUnknown:
					if o.awaitSilentOwner(ctx, kv) {
						continue // read it again
					}
				}
			}
			return o.decode(ctx, kv)
		}
		if !errors.Is(err, meta.ErrNotFound) {
			return Owner{}, false, fmt.Errorf("%w: read owner of %s: %v", wire.ErrServiceNotReady, key, err)
		}
		l, err := o.currentLease(ctx)
		if err != nil {
			return Owner{}, false, err
		}
		if where == placeHere {
			owner, err = o.createOwner(ctx, key, o.self, l.ID())
		} else {
			owner, err = o.placeLeastLoaded(ctx, key, l)
		}
		switch {
		case errors.Is(err, meta.ErrExists):
			continue // lost the race: read the winner
		case err != nil:
			return Owner{}, false, err
		}
		mine := owner.BrokerID == o.self.BrokerID
		if mine {
			o.log.Info("claimed bundle", "namespace", tenant+"/"+ns, "bundle", b.String())
			o.metrics.ownershipChanged(ownershipAcquired)
		} else {
			o.log.Info("placed bundle", "namespace", tenant+"/"+ns, "bundle", b.String(), "owner", owner.BrokerID)
			o.metrics.ownershipChanged(ownershipPlaced)
		}
		return owner, mine, nil
	}
	return Owner{}, false, fmt.Errorf("%w: ownership of %s keeps changing", wire.ErrServiceNotReady, key)
}

// awaitSilentOwner is acquire's wait for the end of a silent owner's
// lease: kv is a bundle key whose owner did not answer a probe. If the
// owner's lease has less than half its TTL left (it has missed renewals),
// it waits until the key changes (the lease's end deletes it) or until
// the lease should have ended, and reports true: read the key again. It
// reports false, at once, for an owner that renews its lease (alive, only
// slow), and when the store cannot tell: answer the owner as it stands.
func (o *ownership) awaitSilentOwner(ctx context.Context, kv meta.KV) bool {
	remaining, granted, err := o.store.TimeToLive(ctx, kv.Lease)
	switch {
	case errors.Is(err, meta.ErrLeaseNotFound):
		return true // it has just ended
	case err != nil, remaining > granted/2:
		return false
	}
	// The expiry deletes the key a moment after the lease's end: allow a
	// second for the server's expiry sweep. The lease runs on the store's
	// clock, which is the region's: so does this wait.
	wctx, cancel := clockwork.WithTimeout(ctx, o.clock, remaining+time.Second)
	defer cancel()
	for resp := range o.store.Watch(wctx, kv.Key, kv.ModRevision+1) {
		if resp.Err != nil || len(resp.Events) > 0 {
			break
		}
	}
	return ctx.Err() == nil
}

// createOwner creates key, the ownership key of an unowned bundle, holding
// owner, under lease: the owner's session. It returns meta.ErrExists (the
// race lost) and meta.ErrLeaseNotFound (the owner's session has ended)
// unwrapped by the metadata error, for the caller to act on.
func (o *ownership) createOwner(ctx context.Context, key string, owner Owner, lease meta.LeaseID) (Owner, error) {
	v, err := meta.EncodeJSON(1, owner)
	if err != nil {
		return Owner{}, err
	}
	_, err = o.store.Create(ctx, key, v, lease)
	switch {
	case err == nil:
		return owner, nil
	case errors.Is(err, meta.ErrExists), errors.Is(err, meta.ErrLeaseNotFound):
		return Owner{}, err
	}
	return Owner{}, fmt.Errorf("%w: claim %s: %v", wire.ErrServiceNotReady, key, err)
}

// revokeDead revokes lease, the session of owner, which a probe found dead:
// its registration and every bundle it held go at once.
func (o *ownership) revokeDead(ctx context.Context, owner Owner, lease meta.LeaseID) error {
	if err := o.store.Revoke(ctx, lease); err != nil {
		return fmt.Errorf("%w: revoke the session of dead broker %s: %v", wire.ErrServiceNotReady, owner.BrokerID, err)
	}
	o.log.Warn("owner refused a probe: revoked its session to take its bundles", "owner", owner.BrokerID,
		"lease", fmt.Sprintf("%x", int64(lease)))
	o.metrics.ownershipChanged(ownershipRevoked)
	return nil
}

func (o *ownership) decode(ctx context.Context, kv meta.KV) (Owner, bool, error) {
	v, err := decodeBundleOwner(kv)
	if err != nil {
		return Owner{}, false, err
	}
	if err := v.moving(); err != nil {
		return Owner{}, false, err // handoff.go: served nowhere until it has moved
	}
	w := v.Owner
	if w.BrokerID != o.self.BrokerID {
		return w, false, nil
	}
	l, err := o.currentLease(ctx)
	if err != nil {
		return Owner{}, false, err
	}
	if kv.Lease != l.ID() {
		// Our own id under a lease we no longer hold: a claim of a previous
		// lease that has not expired yet. Not ours to serve until it goes.
		return Owner{}, false, fmt.Errorf("%w: bundle still held by this broker's previous session", wire.ErrServiceNotReady)
	}
	return w, true, nil
}

// release gives up every claim by revoking the lease (clean shutdown), and
// waits for the lease's watcher. No lease is granted after it.
func (o *ownership) release(ctx context.Context) {
	o.mu.Lock()
	o.mu.released = true
	l, stop := o.mu.lease, o.mu.stopLease
	o.mu.lease, o.mu.stopLease = nil, nil
	o.mu.Unlock()
	if l != nil {
		o.metrics.ownershipChanged(ownershipReleased)
		if err := l.Revoke(ctx); err != nil {
			o.log.Warn("revoking ownership lease", "err", err)
		}
		stop()
	}
	o.wg.Wait()
}
