package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/topology"
)

// Moving a bundle to another broker (an admin unload, a shed, a drain).
//
// The request lives in the ownership key itself: whoever asks (an admin
// call on any broker, the leader's shedder) CAS-writes an unloadRequest
// into the key's value, and every broker watches its region's owners/
// prefix and acts on the requests for the bundles it owns under its
// current lease. So a request reaches the owner wherever it was made, and
// a request for a bundle whose owner dies goes with the owner's lease.
//
// The owner's hand-off of bundle b to broker Y, in order:
//
//  1. While the key carries a request, no broker serves a new topic of b:
//     decode answers ServiceNotReady (lookups retry), so no topic of b
//     starts loading here once the owner has seen the request, and the
//     loads that started before are waited for.
//  2. Each topic of b is fenced: SENDs that arrive from now on are dropped
//     unanswered (never stored, so the client's resend after the move
//     stores them once, with or without deduplication), the SENDs taken
//     before are persisted and receipted, the dispatchers stop, the
//     cursors and the deduplication state are persisted, and the managed
//     ledger is closed (its last ledger closed cleanly, so Y opens it
//     without recovery).
//  3. The key moves to Y's session lease with Y's Owner value, in one CAS
//     on the revision that carried the request (meta.Store.MoveToLease):
//     there is no moment with no owner, and a change by anyone else in
//     between refuses the move (the owner then reads the key again).
//  4. Only then are the clients told to go: CLOSE_PRODUCER and
//     CLOSE_CONSUMER carry Y's URLs, and pulsar-client-go connects to Y at
//     once, resending what it has pending; Y serves the topics because its
//     own id is in the key under its current lease.
//
// With no other broker to take b (or when the move fails), the topics are
// closed as an unload always closed them, without a URL, and the key is
// deleted, so the next lookup places the bundle anew.

// unloadRequest asks a bundle's owner to hand it over: to the broker
// Destination, or (empty) to the one placement chooses.
type unloadRequest struct {
	Destination string `json:"destination,omitempty"`
}

// bundleOwner is the value of an ownership key: the owner, and the unload
// request made of it, if any. A value written before requests existed
// decodes with none.
type bundleOwner struct {
	Owner
	Unload *unloadRequest `json:"unload,omitempty"`
}

func decodeBundleOwner(kv meta.KV) (bundleOwner, error) {
	var v bundleOwner
	if _, err := meta.DecodeJSON(kv.Value, 1, &v); err != nil {
		return bundleOwner{}, fmt.Errorf("%w: owner record %s: %v", wire.ErrMetadata, kv.Key, err)
	}
	return v, nil
}

// moving is the error of a lookup or load of a bundle being handed over.
func (v bundleOwner) moving() error {
	if v.Unload == nil {
		return nil
	}
	return fmt.Errorf("%w: the bundle is being unloaded from broker %s", wire.ErrServiceNotReady, v.BrokerID)
}

// liveLeaseID is the session lease this broker holds now, or NoLease.
func (o *ownership) liveLeaseID() meta.LeaseID {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l := o.mu.lease; l != nil && !ended(l) {
		return l.ID()
	}
	return meta.NoLease
}

// ended reports whether lease l is over.
func ended(l meta.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

func (o *ownership) ownersPrefix() string { return meta.Prefix(meta.RegionKey(o.region, "owners")) }

// parseBundleKey splits an ownership key into its namespace and bundle.
func (o *ownership) parseBundleKey(key string) (tenant, ns string, b topology.Bundle, err error) {
	parts := strings.Split(strings.TrimPrefix(key, o.ownersPrefix()), "/")
	if len(parts) != 3 {
		return "", "", b, fmt.Errorf("%w: %s is not an ownership key", wire.ErrMetadata, key)
	}
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil {
			return "", "", b, fmt.Errorf("%w: ownership key %s: %v", wire.ErrMetadata, key, err)
		}
	}
	b, err = topology.ParseBundle(parts[2])
	if err != nil {
		return "", "", b, fmt.Errorf("%w: ownership key %s: %v", wire.ErrMetadata, key, err)
	}
	return parts[0], parts[1], b, nil
}

// ownedBy reports whether kv is a claim of this broker under its current
// lease, and its value.
func (o *ownership) ownedBy(kv meta.KV) (bundleOwner, bool) {
	v, err := decodeBundleOwner(kv)
	if err != nil || v.BrokerID != o.self.BrokerID {
		return v, false
	}
	l := o.liveLeaseID()
	return v, l != meta.NoLease && kv.Lease == l
}

// UnloadBundle asks the owner of tenant/ns's bundle b, whichever broker it
// is, to hand the bundle to broker destination (a broker id; empty: the
// one placement chooses), and returns once it has left that owner (see
// requestUnload). A bundle nobody owns is left alone, as Pulsar does.
func (m *Manager) UnloadBundle(ctx context.Context, tenant, ns string, b topology.Bundle, destination string) error {
	return m.requestUnload(ctx, tenant, ns, b, destination)
}

// UnloadNamespace unloads every bundle of tenant/ns that a broker of this
// region owns, all at once, wherever they are served.
func (m *Manager) UnloadNamespace(ctx context.Context, tenant, ns string) error {
	bundles, err := m.NamespaceBundles(tenant, ns)
	if err != nil {
		return err
	}
	errs := make([]error, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		wg.Go(func() { errs[i] = m.requestUnload(ctx, tenant, ns, b, "") })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ResolveBroker returns the id of the live broker of this region that
// name designates: its id, or Pulsar's form of a broker id, the host and
// port of its web service URL (host:webPort).
func (m *Manager) ResolveBroker(ctx context.Context, name string) (string, error) {
	brokers, err := m.Brokers(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range brokers {
		if b.BrokerID == name {
			return b.BrokerID, nil
		}
	}
	for _, b := range brokers {
		if u, err := url.Parse(b.WebURL); err == nil && b.WebURL != "" && strings.EqualFold(u.Host, name) {
			return b.BrokerID, nil
		}
	}
	return "", fmt.Errorf("%w: %q is neither the id nor the host:webPort of a live broker of region %s", ErrUnknownBroker, name, m.cfg.Region)
}

// requestUnload CAS-writes an unload request into the ownership key of
// tenant/ns's bundle b (any broker may), and returns once the bundle has
// left the owner it named (the key names another broker or is gone), or
// ctx ends. A bundle nobody owns is nil at once. A destination that
// already owns the bundle is wire.ErrNotAllowed.
func (m *Manager) requestUnload(ctx context.Context, tenant, ns string, b topology.Bundle, destination string) error {
	key := m.own.bundleKey(tenant, ns, b)
	for range 5 {
		kv, err := m.store.Get(ctx, key)
		if errors.Is(err, meta.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: read owner of %s: %v", wire.ErrMetadata, key, err)
		}
		v, err := decodeBundleOwner(kv)
		if err != nil {
			return err
		}
		if destination != "" && destination == v.BrokerID {
			return fmt.Errorf("%w: bundle %s/%s/%s is already owned by broker %s", wire.ErrNotAllowed, tenant, ns, b, destination)
		}
		rev := kv.ModRevision
		if v.Unload == nil || v.Unload.Destination != destination {
			v.Unload = &unloadRequest{Destination: destination}
			value, err := meta.EncodeJSON(1, v)
			if err != nil {
				return err
			}
			rev, err = m.store.Update(ctx, key, value, kv.ModRevision)
			if errors.Is(err, meta.ErrConflict) {
				continue // the key changed under us: read it again
			}
			if err != nil {
				return fmt.Errorf("%w: request unload of %s: %v", wire.ErrMetadata, key, err)
			}
		}
		m.log.Info("unload requested", "namespace", tenant+"/"+ns, "bundle", b.String(), "owner", v.BrokerID, "destination", destination)
		return m.awaitDeparture(ctx, key, v.BrokerID, rev)
	}
	return fmt.Errorf("%w: ownership of %s keeps changing", wire.ErrMetadata, key)
}

// awaitDeparture waits until the ownership key no longer names owner (it
// names another broker, or is gone), watching it from after revision rev.
func (m *Manager) awaitDeparture(ctx context.Context, key, owner string, rev int64) error {
	for {
		wctx, cancel := context.WithCancel(ctx)
		left, next, err := m.watchDeparture(wctx, key, owner, rev)
		cancel()
		if left || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: bundle %s still owned by %s: %w", wire.ErrServiceNotReady, key, owner, ctx.Err())
		}
		// The watch ended (compaction, a member cut off): read the key
		// afresh and watch again from there.
		kv, err := m.store.Get(ctx, key)
		if errors.Is(err, meta.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: read owner of %s: %v", wire.ErrMetadata, key, err)
		}
		if v, err := decodeBundleOwner(kv); err != nil || v.BrokerID != owner {
			return err
		}
		rev = max(next, kv.ModRevision)
	}
}

// watchDeparture is one watch of awaitDeparture: left once the key names
// another broker or is gone; otherwise the last revision seen when the
// watch ended.
func (m *Manager) watchDeparture(ctx context.Context, key, owner string, rev int64) (left bool, last int64, err error) {
	last = rev
	for resp := range m.store.Watch(ctx, key, rev+1) {
		if resp.Err != nil {
			m.log.Debug("watching a bundle being unloaded", "key", key, "err", resp.Err)
			return false, last, nil
		}
		for _, ev := range resp.Events {
			if ev.KV.Key != key {
				continue
			}
			last = ev.KV.ModRevision
			if ev.Type == meta.EventDelete {
				return true, last, nil
			}
			v, err := decodeBundleOwner(ev.KV)
			if err != nil {
				return false, last, err
			}
			if v.BrokerID != owner {
				return true, last, nil
			}
		}
	}
	return false, last, nil
}

// watchUnloads is the owner's side of unload requests: one watch of the
// region's owners/ prefix, acting on every request for a bundle this
// broker owns. It runs until Close.
func (m *Manager) watchUnloads() {
	watchPuts(m.ctx, m.store, m.own.ownersPrefix(), m.log, m.considerUnload)
}

// watchPuts calls each with every key under prefix as a List finds it,
// then with every key a watch sees written; after a watch error each is
// called with every key once more (meta.ListWatch), so it must take a key
// it has seen before. It returns when ctx ends.
func watchPuts(ctx context.Context, store meta.Store, prefix string, log *slog.Logger, each func(meta.KV)) {
	meta.ListWatch(ctx, store, prefix, time.Second, log,
		func(kvs []meta.KV) {
			for _, kv := range kvs {
				each(kv)
			}
		},
		func(evs []meta.Event) {
			for _, ev := range evs {
				if ev.Type == meta.EventPut {
					each(ev.KV)
				}
			}
		})
}

// considerUnload starts the hand-off of the bundle of kv when it carries
// an unload request and this broker owns it under its current lease.
func (m *Manager) considerUnload(kv meta.KV) {
	v, mine := m.own.ownedBy(kv)
	if !mine || v.Unload == nil {
		return
	}
	tenant, ns, b, err := m.own.parseBundleKey(kv.Key)
	if err != nil {
		m.log.Warn("unload request on a key that is not a bundle's", "key", kv.Key, "err", err)
		return
	}
	if !m.beginHandOff(kv.Key) {
		return // already under way
	}
	m.wg.Go(func() {
		defer m.endHandOff(kv.Key)
		ctx, cancel := context.WithTimeout(m.ctx, m.handOffTimeout())
		defer cancel()
		// A hand-off that could not start (etcd unreachable a moment)
		// leaves the request in the key, and no new event would come for
		// it: try again while it is there.
		retry := m.cfg.Clock.NewTimer(0)
		defer retry.Stop()
		for {
			select {
			case <-retry.Chan():
			case <-ctx.Done():
				return
			}
			if m.handOff(ctx, tenant, ns, b) || !m.unloadPending(ctx, kv.Key) {
				return
			}
			retry.Reset(time.Second)
		}
	})
}

// unloadPending reports whether the bundle key still carries an unload
// request for a bundle this broker owns (or cannot be read).
func (m *Manager) unloadPending(ctx context.Context, key string) bool {
	kv, err := m.store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	v, mine := m.own.ownedBy(kv)
	return mine && v.Unload != nil
}

// handOffTimeout bounds one hand-off started by a request: the fence and
// the close of its topics, each within CloseTimeout, and the writes.
func (m *Manager) handOffTimeout() time.Duration { return 3 * m.cfg.CloseTimeout }

// beginHandOff marks the bundle key as being handed over, reporting false
// when it already is.
func (m *Manager) beginHandOff(key string) bool {
	m.handoffs.Lock()
	defer m.handoffs.Unlock()
	if m.handoffs.keys == nil {
		m.handoffs.keys = make(map[string]struct{})
	}
	if _, ok := m.handoffs.keys[key]; ok {
		return false
	}
	m.handoffs.keys[key] = struct{}{}
	return true
}

func (m *Manager) endHandOff(key string) {
	m.handoffs.Lock()
	defer m.handoffs.Unlock()
	delete(m.handoffs.keys, key)
}

// handOff moves tenant/ns's bundle b, if this broker owns it, to the
// destination its request names (or that placement chooses), by the steps
// of the file's comment, within ctx: the broker's topics do steps 2 and 4
// (Topics.HandOff), and moveKey step 3. It reports whether the bundle went
// to another broker; a bundle it could not hand over is unloaded.
func (m *Manager) handOff(ctx context.Context, tenant, ns string, b topology.Bundle) (handed bool) {
	key := m.own.bundleKey(tenant, ns, b)
	log := m.log.With("namespace", tenant+"/"+ns, "bundle", b.String())
	kv, v, ok := m.markMoving(ctx, key)
	if !ok {
		return false
	}
	began := time.Now()
	var dest *Owner
	n := m.topics.HandOff(ctx, tenant, ns, b, func(ctx context.Context) *Owner {
		dest = m.moveKey(ctx, key, kv, v, log)
		return dest
	})
	if dest != nil {
		m.metrics.ownershipChanged(ownershipHanded)
		log.Info("bundle handed over", "to", dest.BrokerID, "topics", n, "took", time.Since(began).Round(time.Millisecond))
		return true
	}
	m.metrics.ownershipChanged(ownershipUnloaded)
	log.Info("bundle unloaded", "topics", n, "took", time.Since(began).Round(time.Millisecond))
	return false
}

// moveKey is step 3 of a hand-off: it moves the bundle's key, kv as
// markMoving left it with its value v, to the destination's session lease
// and returns the destination. With no destination, or when the move
// fails, it deletes the key, so that the next lookup places the bundle
// anew, and returns nil. The broker's topics of the bundle are fenced,
// sealed and forgotten by then.
func (m *Manager) moveKey(ctx context.Context, key string, kv meta.KV, v bundleOwner, log *slog.Logger) *Owner {
	to, toErr := m.destination(ctx, v.Unload.Destination)
	ok := true
	var dest *Owner
	for range 3 {
		if toErr != nil {
			log.Info("no broker to hand the bundle to: unloading it", "err", toErr)
			break
		}
		value, err := meta.EncodeJSON(1, bundleOwner{Owner: to.Owner})
		if err != nil {
			break
		}
		_, err = m.store.MoveToLease(ctx, key, value, kv.ModRevision, to.Lease)
		if err == nil {
			dest = &to.Owner
			break
		}
		log.Info("moving the bundle's key", "to", to.BrokerID, "err", err)
		if !errors.Is(err, meta.ErrConflict) && !errors.Is(err, meta.ErrLeaseNotFound) {
			break
		}
		// The request changed (another destination), or the destination
		// died: read the key again; it is still ours while it names us.
		if kv, v, ok = m.markMoving(ctx, key); !ok {
			break
		}
		to, toErr = m.destination(ctx, v.Unload.Destination)
	}
	if dest == nil && ok {
		// Even past ctx's end: a key left with its request would keep the
		// bundle unserved until this broker's lease ends.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CloseTimeout)
		err := m.store.Delete(dctx, key, kv.ModRevision)
		cancel()
		if err != nil && !errors.Is(err, meta.ErrConflict) {
			log.Warn("deleting the key of an unloaded bundle", "err", err)
		}
	}
	return dest
}

// markMoving reads the bundle's key and, when this broker owns it under
// its current lease, makes sure it carries an unload request (a drain
// writes one; an admin or the shedder already has), so that no broker
// starts serving a topic of the bundle from here on. ok is false when the
// bundle is not (or no longer) this broker's.
func (m *Manager) markMoving(ctx context.Context, key string) (kv meta.KV, v bundleOwner, ok bool) {
	for range 3 {
		var err error
		if kv, err = m.store.Get(ctx, key); err != nil {
			return kv, v, false
		}
		if v, ok = m.own.ownedBy(kv); !ok {
			return kv, v, false
		}
		if v.Unload != nil {
			return kv, v, true
		}
		v.Unload = &unloadRequest{}
		value, err := meta.EncodeJSON(1, v)
		if err != nil {
			return kv, v, false
		}
		rev, err := m.store.Update(ctx, key, value, kv.ModRevision)
		if err == nil {
			kv.ModRevision, kv.Value = rev, value
			return kv, v, true
		}
		if !errors.Is(err, meta.ErrConflict) {
			return kv, v, false
		}
	}
	return kv, v, false
}

// destination is the live broker to hand a bundle to: want, when it is
// one that takes bundles, else the one placement chooses (never this one).
func (m *Manager) destination(ctx context.Context, want string) (LiveBroker, error) {
	if want != "" && want != m.cfg.Self.BrokerID {
		brokers, err := m.Brokers(ctx)
		if err != nil {
			return LiveBroker{}, err
		}
		for _, b := range brokers {
			if b.BrokerID == want && !b.Draining {
				return b, nil
			}
		}
		m.log.Info("unload destination is not a live broker that takes bundles: choosing another", "destination", want)
	}
	return m.own.choose(ctx, m.cfg.Self.BrokerID)
}

// Drain hands every bundle this broker owns to the other brokers, all at
// once, within ctx, after marking its registration Draining so that
// placement sends it nothing new. With no other broker to take them it
// leaves them be (Close unloads them). It is the first step of a graceful
// shutdown (SIGTERM), taken while the protocol server still runs, so that
// the clients hear where their topics went.
func (m *Manager) Drain(ctx context.Context) {
	if err := m.own.updateRecord(ctx, func(r *BrokerRecord) { r.Draining = true }); err != nil {
		m.log.Warn("marking the broker draining", "err", err)
	}
	if _, err := m.own.choose(ctx, m.cfg.Self.BrokerID); err != nil {
		m.log.Info("draining: no other broker takes bundles; they are unloaded on close", "err", err)
		return
	}
	kvs, _, err := m.store.List(ctx, m.own.ownersPrefix())
	if err != nil {
		m.log.Warn("draining: listing this broker's bundles", "err", err)
		return
	}
	began := time.Now()
	var wg sync.WaitGroup
	var handed atomic.Int64
	for _, kv := range kvs {
		if _, mine := m.own.ownedBy(kv); !mine {
			continue
		}
		tenant, ns, b, err := m.own.parseBundleKey(kv.Key)
		if err != nil || !m.beginHandOff(kv.Key) {
			continue
		}
		wg.Go(func() {
			defer m.endHandOff(kv.Key)
			if m.handOff(ctx, tenant, ns, b) {
				handed.Add(1)
			}
		})
	}
	wg.Wait()
	m.log.Info("drained", "bundles handed over", handed.Load(), "took", time.Since(began).Round(time.Millisecond))
}
