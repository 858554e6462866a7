package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
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

// assignedURLs are the assignedBrokerServiceUrl and
// assignedBrokerServiceUrlTls of a CLOSE_PRODUCER or CLOSE_CONSUMER
// sending the client to dest.
func assignedURLs(dest Owner) (plain, tls *string) {
	plain = ptr(dest.ServiceURL)
	if dest.ServiceURLTLS != "" {
		tls = ptr(dest.ServiceURLTLS)
	}
	return plain, tls
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

// sendGate admits a topic's SENDs until a hand-off fences the topic, and
// tells the fence when the last SEND it admitted has been queued for its
// receipt. Its zero value admits.
type sendGate struct {
	mu     sync.Mutex
	shut   bool
	inside int
	idle   chan struct{} // closed once shut with nobody inside
}

// enter admits one SEND, or reports false once the gate is shut.
func (g *sendGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return false
	}
	g.inside++
	return true
}

func (g *sendGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inside--
	if g.shut && g.inside == 0 {
		close(g.idle)
	}
}

// close shuts the gate and waits, within ctx, for the SENDs inside.
func (g *sendGate) close(ctx context.Context) error {
	g.mu.Lock()
	if !g.shut {
		g.shut = true
		g.idle = make(chan struct{})
		if g.inside == 0 {
			close(g.idle)
		}
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("SENDs still being taken: %w", ctx.Err())
	}
}

// awaitReceipts waits, within ctx, until every SEND the producer took has
// been answered (or the producer has ended).
func (p *producer) awaitReceipts(ctx context.Context) error {
	for p.owed.sends.Load() > 0 {
		select {
		case <-p.receipted:
		case <-p.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("producer %s: %d receipts still owed: %w", p.name, p.owed.sends.Load(), ctx.Err())
		}
	}
	return nil
}

// fence readies t to be served by another broker without closing its
// clients' sessions (step 2 of the hand-off, with seal): no SEND is taken
// from now on, the ones taken are receipted, and dispatch stops. Acks
// still reach the cursors until seal.
func (t *Topic) fence(ctx context.Context) error {
	t.mu.Lock()
	t.mu.closing = true // no producer or subscription is added from here on
	producers := slices.Collect(maps.Keys(t.mu.producers))
	t.mu.Unlock()
	if err := t.settleSends(ctx, producers); err != nil {
		return err
	}
	for _, s := range t.subscriptions() {
		s.stop(ctx) // the consumers stay, to be told where to go
	}
	return nil
}

// settleSends shuts the topic's SEND gate and waits, within ctx, until
// every SEND taken before has its receipt. SENDs that arrive later are
// dropped unanswered. Every close does this before it tells the producers
// to go: a client resends whatever it has no receipt for, so a SEND
// stored but not receipted would be stored twice on a topic without
// deduplication.
func (t *Topic) settleSends(ctx context.Context, producers []*producer) error {
	if err := t.sends.close(ctx); err != nil {
		return err
	}
	for _, p := range producers {
		if err := p.awaitReceipts(ctx); err != nil {
			return err
		}
	}
	return nil
}

// seal persists the fenced topic's deduplication state and closes its
// managed ledger, which persists every cursor: the last step before the
// key moves, so that the acks of every message delivered before the fence
// count, but the few that arrive between seal and CLOSE_CONSUMER.
func (t *Topic) seal(ctx context.Context) error {
	t.dd.snapshotRecorded(ctx)
	if err := t.ml.Close(ctx); err != nil {
		return fmt.Errorf("close managed ledger: %w", err)
	}
	return nil
}

// UnloadBundle asks the owner of tenant/ns's bundle b, whichever broker it
// is, to hand the bundle to broker destination (a broker id; empty: the
// one placement chooses), and returns once it has left that owner (see
// requestUnload). A bundle nobody owns is left alone, as Pulsar does.
func (s *Service) UnloadBundle(ctx context.Context, tenant, ns string, b topology.Bundle, destination string) error {
	return s.requestUnload(ctx, tenant, ns, b, destination)
}

// UnloadNamespace unloads every bundle of tenant/ns that a broker of this
// region owns, all at once, wherever they are served.
func (s *Service) UnloadNamespace(ctx context.Context, tenant, ns string) error {
	bundles, err := s.NamespaceBundles(tenant, ns)
	if err != nil {
		return err
	}
	errs := make([]error, len(bundles))
	var wg sync.WaitGroup
	for i, b := range bundles {
		wg.Go(func() { errs[i] = s.requestUnload(ctx, tenant, ns, b, "") })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// NamespaceBundles returns the bundles of tenant/ns, or wire.ErrTopicNotFound
// when the namespace does not exist.
func (s *Service) NamespaceBundles(tenant, ns string) ([]topology.Bundle, error) {
	p, ok := s.policies.Namespace(tenant, ns)
	if !ok {
		return nil, fmt.Errorf("%w: namespace %s/%s does not exist", wire.ErrTopicNotFound, tenant, ns)
	}
	return namespaceBundles(p)
}

// ResolveBroker returns the id of the live broker of this region that
// name designates: its id, or Pulsar's form of a broker id, the host and
// port of its web service URL (host:webPort).
func (s *Service) ResolveBroker(ctx context.Context, name string) (string, error) {
	brokers, err := s.Brokers(ctx)
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
	return "", fmt.Errorf("%w: %q is neither the id nor the host:webPort of a live broker of region %s", ErrUnknownBroker, name, s.cfg.Region)
}

// requestUnload CAS-writes an unload request into the ownership key of
// tenant/ns's bundle b (any broker may), and returns once the bundle has
// left the owner it named (the key names another broker or is gone), or
// ctx ends. A bundle nobody owns is nil at once. A destination that
// already owns the bundle is wire.ErrNotAllowed.
func (s *Service) requestUnload(ctx context.Context, tenant, ns string, b topology.Bundle, destination string) error {
	key := s.own.bundleKey(tenant, ns, b)
	for range 5 {
		kv, err := s.store.Get(ctx, key)
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
			rev, err = s.store.Update(ctx, key, value, kv.ModRevision)
			if errors.Is(err, meta.ErrConflict) {
				continue // the key changed under us: read it again
			}
			if err != nil {
				return fmt.Errorf("%w: request unload of %s: %v", wire.ErrMetadata, key, err)
			}
		}
		s.log.Info("unload requested", "namespace", tenant+"/"+ns, "bundle", b.String(), "owner", v.BrokerID, "destination", destination)
		return s.awaitDeparture(ctx, key, v.BrokerID, rev)
	}
	return fmt.Errorf("%w: ownership of %s keeps changing", wire.ErrMetadata, key)
}

// awaitDeparture waits until the ownership key no longer names owner (it
// names another broker, or is gone), watching it from after revision rev.
func (s *Service) awaitDeparture(ctx context.Context, key, owner string, rev int64) error {
	for {
		wctx, cancel := context.WithCancel(ctx)
		left, next, err := s.watchDeparture(wctx, key, owner, rev)
		cancel()
		if left || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: bundle %s still owned by %s: %w", wire.ErrServiceNotReady, key, owner, ctx.Err())
		}
		// The watch ended (compaction, a member cut off): read the key
		// afresh and watch again from there.
		kv, err := s.store.Get(ctx, key)
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
func (s *Service) watchDeparture(ctx context.Context, key, owner string, rev int64) (left bool, last int64, err error) {
	last = rev
	for resp := range s.store.Watch(ctx, key, rev+1) {
		if resp.Err != nil {
			s.log.Debug("watching a bundle being unloaded", "key", key, "err", resp.Err)
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
// broker owns. It runs until the Service's ctx ends.
func (s *Service) watchUnloads() {
	watchPuts(s.ctx, s.store, s.own.ownersPrefix(), s.log, s.considerUnload)
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
func (s *Service) considerUnload(kv meta.KV) {
	v, mine := s.own.ownedBy(kv)
	if !mine || v.Unload == nil {
		return
	}
	tenant, ns, b, err := s.own.parseBundleKey(kv.Key)
	if err != nil {
		s.log.Warn("unload request on a key that is not a bundle's", "key", kv.Key, "err", err)
		return
	}
	if !s.beginHandOff(kv.Key) {
		return // already under way
	}
	s.wg.Go(func() {
		defer s.endHandOff(kv.Key)
		ctx, cancel := context.WithTimeout(s.ctx, s.handOffTimeout())
		defer cancel()
		// A hand-off that could not start (etcd unreachable a moment)
		// leaves the request in the key, and no new event would come for
		// it: try again while it is there.
		retry := time.NewTimer(0)
		defer retry.Stop()
		for {
			select {
			case <-retry.C:
			case <-ctx.Done():
				return
			}
			if s.handOff(ctx, tenant, ns, b) || !s.unloadPending(ctx, kv.Key) {
				return
			}
			retry.Reset(time.Second)
		}
	})
}

// unloadPending reports whether the bundle key still carries an unload
// request for a bundle this broker owns (or cannot be read).
func (s *Service) unloadPending(ctx context.Context, key string) bool {
	kv, err := s.store.Get(ctx, key)
	if errors.Is(err, meta.ErrNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	v, mine := s.own.ownedBy(kv)
	return mine && v.Unload != nil
}

// handOffTimeout bounds one hand-off started by a request: the fence and
// the close of its topics, each within CloseTimeout, and the writes.
func (s *Service) handOffTimeout() time.Duration { return 3 * s.cfg.CloseTimeout }

// beginHandOff marks the bundle key as being handed over, reporting false
// when it already is.
func (s *Service) beginHandOff(key string) bool {
	s.handoffs.Lock()
	defer s.handoffs.Unlock()
	if s.handoffs.keys == nil {
		s.handoffs.keys = make(map[string]struct{})
	}
	if _, ok := s.handoffs.keys[key]; ok {
		return false
	}
	s.handoffs.keys[key] = struct{}{}
	return true
}

func (s *Service) endHandOff(key string) {
	s.handoffs.Lock()
	defer s.handoffs.Unlock()
	delete(s.handoffs.keys, key)
}

// handOff moves tenant/ns's bundle b, if this broker owns it, to the
// destination its request names (or that placement chooses), by the steps
// of the file's comment, within ctx. It reports whether the bundle went to
// another broker; a bundle it could not hand over is unloaded.
func (s *Service) handOff(ctx context.Context, tenant, ns string, b topology.Bundle) (handed bool) {
	key := s.own.bundleKey(tenant, ns, b)
	log := s.log.With("namespace", tenant+"/"+ns, "bundle", b.String())
	kv, v, ok := s.markMoving(ctx, key)
	if !ok {
		return false
	}
	began := time.Now()
	topics := s.bundleTopics(ctx, tenant, ns, b)
	s.eachTopic(ctx, topics, (*Topic).fence, log, "fencing a topic for its hand-off")
	to, toErr := s.destination(ctx, v.Unload.Destination)
	s.eachTopic(ctx, topics, (*Topic).seal, log, "sealing a topic for its hand-off")
	// Forgotten before the key changes, so that once an unload has
	// answered (the key no longer names us) no topic of the bundle is
	// listed here; a load of one meanwhile waits on the key's request.
	s.forgetTopics(topics)

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
		_, err = s.store.MoveToLease(ctx, key, value, kv.ModRevision, to.Lease)
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
		if kv, v, ok = s.markMoving(ctx, key); !ok {
			break
		}
		to, toErr = s.destination(ctx, v.Unload.Destination)
	}
	if dest == nil && ok {
		// Even past ctx's end: a key left with its request would keep the
		// bundle unserved until this broker's lease ends.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CloseTimeout)
		err := s.store.Delete(dctx, key, kv.ModRevision)
		cancel()
		if err != nil && !errors.Is(err, meta.ErrConflict) {
			log.Warn("deleting the key of an unloaded bundle", "err", err)
		}
	}
	s.releaseTopics(ctx, topics, dest)
	if dest != nil {
		s.metrics.ownershipChanged(ownershipHanded)
		log.Info("bundle handed over", "to", dest.BrokerID, "topics", len(topics), "took", time.Since(began).Round(time.Millisecond))
		return true
	}
	s.metrics.ownershipChanged(ownershipUnloaded)
	log.Info("bundle unloaded", "topics", len(topics), "took", time.Since(began).Round(time.Millisecond))
	return false
}

// eachTopic runs step on every topic at once, each within CloseTimeout,
// logging what fails: a topic that did not fence or seal in time is
// handed over all the same (the new owner fences its storage on open).
func (s *Service) eachTopic(ctx context.Context, loads []*topicLoad, step func(*Topic, context.Context) error, log *slog.Logger, what string) {
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, s.cfg.CloseTimeout)
			defer cancel()
			if err := step(l.topic, sctx); err != nil {
				log.Warn(what, "topic", l.topic.Name(), "err", err)
			}
		})
	}
	wg.Wait()
}

// markMoving reads the bundle's key and, when this broker owns it under
// its current lease, makes sure it carries an unload request (a drain
// writes one; an admin or the shedder already has), so that no broker
// starts serving a topic of the bundle from here on. ok is false when the
// bundle is not (or no longer) this broker's.
func (s *Service) markMoving(ctx context.Context, key string) (kv meta.KV, v bundleOwner, ok bool) {
	for range 3 {
		var err error
		if kv, err = s.store.Get(ctx, key); err != nil {
			return kv, v, false
		}
		if v, ok = s.own.ownedBy(kv); !ok {
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
		rev, err := s.store.Update(ctx, key, value, kv.ModRevision)
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
func (s *Service) destination(ctx context.Context, want string) (LiveBroker, error) {
	if want != "" && want != s.cfg.BrokerID {
		brokers, err := s.Brokers(ctx)
		if err != nil {
			return LiveBroker{}, err
		}
		for _, b := range brokers {
			if b.BrokerID == want && !b.Draining {
				return b, nil
			}
		}
		s.log.Info("unload destination is not a live broker that takes bundles: choosing another", "destination", want)
	}
	return s.own.choose(ctx, s.cfg.BrokerID)
}

// bundleTopics returns the topics of tenant/ns's bundle b loaded here,
// waiting (within ctx) for the loads of its topics under way.
func (s *Service) bundleTopics(ctx context.Context, tenant, ns string, b topology.Bundle) []*topicLoad {
	s.mu.Lock()
	all := maps.Clone(s.mu.topics) // Service.mu is a leaf: resolve outside it
	s.mu.Unlock()
	var loads []*topicLoad
	for name, l := range all {
		t, err := topology.ParseTopicName(name)
		if err != nil || t.Tenant != tenant || t.Namespace != ns {
			continue
		}
		if eff, err := s.resolve(t); err == nil {
			if tb, err := bundleOf(t, eff); err == nil && tb == b {
				loads = append(loads, l)
			}
		}
	}
	out := loads[:0]
	for _, l := range loads {
		select {
		case <-l.done:
		case <-ctx.Done():
			continue // a load still under way fails: the key no longer names it
		}
		if l.topic != nil {
			out = append(out, l)
		}
	}
	return out
}

// forgetTopics removes the handed-over topics from the loaded ones.
func (s *Service) forgetTopics(loads []*topicLoad) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range loads {
		if name := l.topic.Name(); s.mu.topics[name] == l {
			delete(s.mu.topics, name)
		}
	}
}

// releaseTopics closes the handed-over topics (forgotten already), telling
// their clients to go to dest (nil: look the topic up again), and waits
// (within CloseTimeout) until those words are written to every client's
// connection: a drain closes the connections next, and a client that saw
// its connection drop before its CLOSE frames would look the topic up
// instead of going straight to dest.
func (s *Service) releaseTopics(ctx context.Context, loads []*topicLoad, dest *Owner) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CloseTimeout)
	defer cancel()
	conns := make(map[*conn]struct{})
	for _, l := range loads {
		for _, c := range l.topic.clientConns() {
			conns[c] = struct{}{}
		}
	}
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Go(func() { l.topic.closeTo(cctx, dest) })
	}
	wg.Wait()
	for c := range conns {
		wg.Go(func() { c.awaitFlushed(cctx) })
	}
	wg.Wait()
}

// clientConns returns the connections of t's producers and consumers.
func (t *Topic) clientConns() []*conn {
	var out []*conn
	t.mu.Lock()
	for p := range t.mu.producers {
		out = append(out, p.c)
	}
	for _, p := range t.mu.waiting {
		out = append(out, p.c)
	}
	t.mu.Unlock()
	for _, sub := range t.subscriptions() {
		for _, c := range sub.consumerList() {
			out = append(out, c.c)
		}
	}
	return out
}

// awaitFlushed waits, within ctx, until everything queued on the
// connection so far is written (or the connection has ended).
func (c *conn) awaitFlushed(ctx context.Context) {
	flushed := make(chan struct{})
	select {
	case c.out <- outbound{flushed: flushed}:
	case <-c.ctx.Done():
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-flushed:
	case <-c.ctx.Done():
	case <-ctx.Done():
	}
}

// Drain hands every bundle this broker owns to the other brokers, all at
// once, within ctx, after marking its registration Draining so that
// placement sends it nothing new. With no other broker to take them it
// leaves them be (Close unloads them). It is the first step of a graceful
// shutdown (SIGTERM), taken while the protocol server still runs, so that
// the clients hear where their topics went.
func (s *Service) Drain(ctx context.Context) {
	if err := s.own.updateRecord(ctx, func(r *BrokerRecord) { r.Draining = true }); err != nil {
		s.log.Warn("marking the broker draining", "err", err)
	}
	if _, err := s.own.choose(ctx, s.cfg.BrokerID); err != nil {
		s.log.Info("draining: no other broker takes bundles; they are unloaded on close", "err", err)
		return
	}
	kvs, _, err := s.store.List(ctx, s.own.ownersPrefix())
	if err != nil {
		s.log.Warn("draining: listing this broker's bundles", "err", err)
		return
	}
	began := time.Now()
	var wg sync.WaitGroup
	var handed atomic.Int64
	for _, kv := range kvs {
		if _, mine := s.own.ownedBy(kv); !mine {
			continue
		}
		tenant, ns, b, err := s.own.parseBundleKey(kv.Key)
		if err != nil || !s.beginHandOff(kv.Key) {
			continue
		}
		wg.Go(func() {
			defer s.endHandOff(kv.Key)
			if s.handOff(ctx, tenant, ns, b) {
				handed.Add(1)
			}
		})
	}
	wg.Wait()
	s.log.Info("drained", "bundles handed over", handed.Load(), "took", time.Since(began).Round(time.Millisecond))
}
