package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
}

// ownership claims bundles for this broker under one session lease, and
// registers the broker under /meridian/regions/<r>/brokers/<id> with the
// same lease.
//
// Invariant: a bundle is served by the broker whose key holds it, and only
// while that broker's lease lives. Claims are create-if-absent, so of two
// brokers racing for a bundle one wins and the other redirects to it. When
// the lease ends (the broker was cut off from etcd for a TTL, or revoked)
// every key it held is gone and another broker may claim the bundles: so
// the broker unloads everything it served (onLost) before it claims
// anything again under a new lease. Storage fencing (mledger) makes a
// broker that has not noticed yet harmless: its next append or cursor
// write fails.
type ownership struct {
	store  meta.Store
	region string
	self   Owner
	ttl    time.Duration
	log    *slog.Logger
	onLost func()         // unloads every topic; called before a new lease is taken
	wg     sync.WaitGroup // the watch goroutine of each lease

	// metrics counts ownership changes; nil records nothing.
	metrics *brokerMetrics

	mu struct {
		sync.Mutex
		lease meta.Lease // nil until the first claim, and after a loss
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

func newOwnership(store meta.Store, region string, self Owner, ttl time.Duration, log *slog.Logger, onLost func()) *ownership {
	o := &ownership{store: store, region: region, self: self, ttl: ttl, log: log, onLost: onLost}
	o.rec.record = BrokerRecord{Owner: self}
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
// registering the broker under it) when there is none.
func (o *ownership) currentLease(ctx context.Context) (meta.Lease, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l := o.mu.lease; l != nil {
		select {
		case <-l.Done():
		default:
			return l, nil
		}
	}
	l, err := o.store.Grant(context.WithoutCancel(ctx), o.ttl)
	if err != nil {
		return nil, fmt.Errorf("%w: grant ownership lease: %v", wire.ErrMetadata, err)
	}
	if err := o.register(ctx, l); err != nil {
		_ = l.Revoke(context.WithoutCancel(ctx))
		return nil, err
	}
	o.mu.lease = l
	o.wg.Add(1)
	go o.watch(l)
	return l, nil
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
		return fmt.Errorf("%w: register broker %s: %v", wire.ErrMetadata, o.self.BrokerID, err)
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

// watch waits for the lease to end and then unloads everything it held.
func (o *ownership) watch(l meta.Lease) {
	defer o.wg.Done()
	<-l.Done()
	o.mu.Lock()
	lost := o.mu.lease == l // not released on purpose
	if lost {
		o.mu.lease = nil
	}
	o.mu.Unlock()
	if !lost {
		return
	}
	o.log.Warn("ownership lease ended: unloading every topic", "lease", fmt.Sprintf("%x", int64(l.ID())))
	o.metrics.ownershipChanged(ownershipLost)
	o.onLost()
}

// acquire returns the owner of tenant/ns's bundle b, claiming it for this
// broker when nobody holds it. mine reports whether this broker holds it
// under its current lease.
func (o *ownership) acquire(ctx context.Context, tenant, ns string, b topology.Bundle) (owner Owner, mine bool, err error) {
	key := o.bundleKey(tenant, ns, b)
	for range 3 {
		kv, err := o.store.Get(ctx, key)
		if err == nil {
			return o.decode(ctx, kv)
		}
		if !errors.Is(err, meta.ErrNotFound) {
			return Owner{}, false, fmt.Errorf("%w: read owner of %s: %v", wire.ErrMetadata, key, err)
		}
		l, err := o.currentLease(ctx)
		if err != nil {
			return Owner{}, false, err
		}
		v, err := meta.EncodeJSON(1, o.self)
		if err != nil {
			return Owner{}, false, err
		}
		_, err = o.store.Create(ctx, key, v, l.ID())
		if err == nil {
			o.log.Info("claimed bundle", "namespace", tenant+"/"+ns, "bundle", b.String())
			o.metrics.ownershipChanged(ownershipAcquired)
			return o.self, true, nil
		}
		if !errors.Is(err, meta.ErrExists) {
			return Owner{}, false, fmt.Errorf("%w: claim %s: %v", wire.ErrMetadata, key, err)
		}
		// Lost the race: read the winner.
	}
	return Owner{}, false, fmt.Errorf("%w: ownership of %s keeps changing", wire.ErrMetadata, key)
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
// waits for the lease's watcher.
func (o *ownership) release(ctx context.Context) {
	o.mu.Lock()
	l := o.mu.lease
	o.mu.lease = nil
	o.mu.Unlock()
	if l != nil {
		o.metrics.ownershipChanged(ownershipReleased)
		if err := l.Revoke(ctx); err != nil {
			o.log.Warn("revoking ownership lease", "err", err)
		}
	}
	o.wg.Wait()
}
