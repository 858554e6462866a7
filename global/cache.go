package global

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// RetryMin and RetryMax bound the backoff between attempts to re-list
	// after the global store failed (unreachable, closed, a watch that
	// ended). The delay doubles from RetryMin up to RetryMax, each wait
	// drawn at random within ±50% of it, so that the brokers of a region
	// do not all re-list at the same instant when the store comes back;
	// each attempt is one List of the whole global prefix. Defaults 100ms
	// and 5s; RetryMin at least 10ms, RetryMax at least RetryMin.
	RetryMin, RetryMax time.Duration
	// ListTimeout bounds one List, and one probe. Default 10s; at least
	// 100ms.
	ListTimeout time.Duration
	// ProbeInterval is how often the cache, while following the watch,
	// reads one key (a quorum read on etcd) to learn whether the store
	// still answers. An etcd watch whose server is merely unreachable does
	// not end, it goes quiet; without the probe Err could not tell "nothing
	// changed" from "cannot hear changes". Each probe is one small read.
	// Default 5s; at least 10ms.
	ProbeInterval time.Duration
	// SubscriberLimit is how many distinct changed records a subscriber may
	// have pending. Changes to one record coalesce into one; past the limit
	// the pending changes are dropped and the subscriber's next Batch says
	// Resync (re-read what you need from the cache). It bounds the memory a
	// slow subscriber costs. Default 1024; between 1 and 1,000,000.
	SubscriberLimit int
	// Logger receives the cache's records. Nil discards them; the
	// assembly hands its region's logger.
	Logger *slog.Logger
	// Clock drives the pause between re-lists and the probe's ticker.
	// ListTimeout bounds a real request to the store and stays on the
	// wall clock. The region's assembly (cluster/node) sets its one clock
	// here. Required; DefaultCacheConfig sets the wall clock.
	Clock clockwork.Clock
}

// DefaultCacheConfig returns the defaults documented on CacheConfig, on
// the wall clock and without a logger.
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{
		RetryMin:        100 * time.Millisecond,
		RetryMax:        5 * time.Second,
		ListTimeout:     10 * time.Second,
		ProbeInterval:   5 * time.Second,
		SubscriberLimit: 1024,
		Clock:           clockwork.NewRealClock(),
	}
}

// Validate reports a field out of bounds.
func (c CacheConfig) Validate() error {
	switch {
	case c.RetryMin < 10*time.Millisecond:
		return fmt.Errorf("global: CacheConfig.RetryMin must be at least 10ms, got %v", c.RetryMin)
	case c.RetryMax < c.RetryMin:
		return fmt.Errorf("global: CacheConfig.RetryMax (%v) must be at least RetryMin (%v)", c.RetryMax, c.RetryMin)
	case c.ListTimeout < 100*time.Millisecond:
		return fmt.Errorf("global: CacheConfig.ListTimeout must be at least 100ms, got %v", c.ListTimeout)
	case c.ProbeInterval < 10*time.Millisecond:
		return fmt.Errorf("global: CacheConfig.ProbeInterval must be at least 10ms, got %v", c.ProbeInterval)
	case c.SubscriberLimit < 1 || c.SubscriberLimit > 1_000_000:
		return fmt.Errorf("global: CacheConfig.SubscriberLimit must be in [1, 1000000], got %d", c.SubscriberLimit)
	case c.Clock == nil:
		return errors.New("global: CacheConfig.Clock is required (DefaultCacheConfig sets the wall clock)")
	}
	return nil
}

// Kind is what a record describes.
type Kind string

// The record kinds, named as their key segment.
const (
	KindCluster   Kind = kindClusters
	KindTenant    Kind = kindTenants
	KindNamespace Kind = kindNamespaces
	KindTopic     Kind = kindTopics
)

// Change is one record that changed.
type Change struct {
	Kind Kind
	// Name is the cluster or tenant name, "tenant/namespace", or the full
	// topic name (persistent://tenant/ns/topic).
	Name string
	// Deleted is set when the record is gone.
	Deleted bool
	// Revision is the store revision of the change.
	Revision int64
}

// Batch is what Subscription.Next returns.
type Batch struct {
	// Changes are the records changed since the last batch, one per record
	// (the latest change wins), in no particular order.
	Changes []Change
	// Resync says that the subscriber missed changes (it fell behind, or
	// the cache re-listed the store): anything may have changed, so re-read
	// what you depend on. Changes may be empty then.
	Resync bool
	// Revision is the cache's revision when the batch was taken.
	Revision int64
}

// entry is one cached record, already decoded and normalised.
type entry struct {
	kind   Kind
	name   string
	modRev int64
	value  any // ClusterData, TenantInfo, Policies or TopicPolicies
}

// Cache is a local, watched copy of the whole global configuration. It is
// what the data path reads (DESIGN §3: the data path never waits on the
// global etcd): every read is a map lookup under a read lock and never
// touches the store, so reads keep answering, with the last known state,
// while the global store is unreachable.
//
// Ownership. One goroutine, started by StartCache and stopped and waited
// for by Close, owns the state: it lists the prefix, watches it from the
// List revision + 1, applies each revision's events under mu, and on any
// failure re-lists (at once after ErrCompacted, with backoff otherwise).
// Everyone else only reads under mu's read lock.
//
// Lock order: docs/lock-order.md. The owner never blocks on a subscriber:
// it records the change under the subscriber's mutex (held only to swap a
// map) and pokes a one-slot channel without waiting.
type Cache struct {
	st     meta.Store
	prefix string // the store's prefix plus "/"
	cfg    CacheConfig
	log    *slog.Logger

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// done is closed by Close once the owner has stopped.
	done      chan struct{}
	closeOnce sync.Once
	// ready is closed after the first successful List.
	ready chan struct{}

	mu struct {
		sync.RWMutex
		// rev is the store revision the state reflects: every change to the
		// prefix at or below rev has been applied.
		rev     int64
		entries map[string]entry
		// loaded is set by the first successful List.
		loaded bool
		// err is the last failure to read or watch the store, nil while
		// the watch is healthy.
		err error
		// changed is closed and replaced at every change of rev, waking
		// Await.
		changed chan struct{}
		subs    map[*Subscription]struct{}
	}
}

// StartCache starts a cache of s's records. It returns at once; Ready and
// Await tell when data is there. Close stops it.
func StartCache(s *Store, cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{
		st: s.st, prefix: s.cfg.Prefix + "/", cfg: cfg, log: log,
		done: make(chan struct{}), ready: make(chan struct{}),
	}
	c.mu.entries = map[string]entry{}
	c.mu.changed = make(chan struct{})
	c.mu.subs = map[*Subscription]struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go c.run(ctx)
	return c, nil
}

// Close stops the owner goroutine and waits for it. Reads keep answering
// with the last state; Await and Subscription.Next return ErrCacheClosed.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		close(c.done)
	})
	return nil
}

// Ready is closed once the cache has loaded the store at least once.
func (c *Cache) Ready() <-chan struct{} { return c.ready }

// Revision is the store revision the cache reflects.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.rev
}

// Err is the last failure to read or watch the global store, or nil while
// the cache is following it. A non-nil Err means reads may be stale.
func (c *Cache) Err() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.err
}

func (c *Cache) run(ctx context.Context) {
	defer c.wg.Done()
	retry := backoff.NewExponentialBackOff(backoff.WithInitialInterval(c.cfg.RetryMin), backoff.WithMaxInterval(c.cfg.RetryMax),
		backoff.WithMaxElapsedTime(0), backoff.WithClockProvider(c.cfg.Clock))
	for {
		rev, err := c.load(ctx)
		if err == nil {
			retry.Reset()
			err = c.follow(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.mu.err = err
		c.mu.Unlock()
		if errors.Is(err, meta.ErrCompacted) {
			c.log.Info("global config watch fell behind compaction; re-listing", "err", err)
			continue
		}
		delay := retry.NextBackOff()
		c.log.Warn("global config store unavailable; serving the last known state", "err", err, "retry_in", delay)
		t := c.cfg.Clock.NewTimer(delay)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// load replaces the state with a fresh List and returns its revision.
// A record that does not decode keeps its previous value (if any): a newer
// binary may have written it, and serving the last value we understood is
// safer for the data path than forgetting the namespace.
func (c *Cache) load(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ListTimeout)
	kvs, rev, err := c.st.List(lctx, c.prefix)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("%w: list %s: %w", ErrUnavailable, c.prefix, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := make(map[string]entry, len(kvs))
	for _, kv := range kvs {
		e, ok := c.decode(kv)
		if !ok {
			if old, had := c.mu.entries[kv.Key]; had {
				entries[kv.Key] = old
			}
			continue
		}
		entries[kv.Key] = e
	}
	c.mu.entries = entries
	c.mu.loaded = true
	c.mu.rev = max(c.mu.rev, rev)
	c.mu.err = nil
	c.signalLocked()
	for sub := range c.mu.subs {
		sub.resync(c.mu.rev)
	}
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	c.log.Info("global config loaded", "records", len(entries), "revision", rev)
	return rev, nil
}

// follow applies the watch from rev+1 until it ends, and says why. Between
// events it probes the store (see CacheConfig.ProbeInterval). A failed probe
// only sets Err: the watch itself resumes where it was once the store is
// back (or ends with ErrCompacted, and the cache re-lists), so there is
// nothing to restart.
func (c *Cache) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	probe := c.cfg.Clock.NewTicker(c.cfg.ProbeInterval)
	defer probe.Stop()
	watch := c.st.Watch(wctx, c.prefix, rev+1)
	for {
		select {
		case resp, ok := <-watch:
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				return fmt.Errorf("%w: watch %s ended", ErrUnavailable, c.prefix)
			}
			if resp.Err != nil {
				return resp.Err
			}
			c.apply(resp)
		case <-probe.Chan():
			c.probe(ctx)
		}
	}
}

// probe reads one key and records whether the store answered.
func (c *Cache) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, c.cfg.ListTimeout)
	_, err := c.st.Get(pctx, c.prefix+kindClusters)
	cancel()
	if errors.Is(err, meta.ErrNotFound) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("%w: probe: %w", ErrUnavailable, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if (c.mu.err == nil) != (err == nil) {
		if err != nil {
			c.log.Warn("global config store unreachable; serving the last known state", "err", err)
		} else {
			c.log.Info("global config store reachable again")
		}
	}
	c.mu.err = err
}

func (c *Cache) apply(resp meta.WatchResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range resp.Events {
		kind, name, ok := c.parseKey(ev.KV.Key)
		if !ok {
			continue
		}
		ch := Change{Kind: kind, Name: name, Revision: resp.Revision}
		if ev.Type == meta.EventDelete {
			delete(c.mu.entries, ev.KV.Key)
			ch.Deleted = true
		} else {
			e, ok := c.decode(ev.KV)
			if !ok {
				continue
			}
			c.mu.entries[ev.KV.Key] = e
		}
		for sub := range c.mu.subs {
			sub.add(ev.KV.Key, ch)
		}
	}
	c.mu.rev = max(c.mu.rev, resp.Revision)
	c.signalLocked()
}

func (c *Cache) signalLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
}

// decode turns a KV into an entry, logging what it cannot read.
func (c *Cache) decode(kv meta.KV) (entry, bool) {
	kind, name, ok := c.parseKey(kv.Key)
	if !ok {
		return entry{}, false
	}
	e := entry{kind: kind, name: name, modRev: kv.ModRevision}
	var err error
	switch kind {
	case KindCluster:
		var v ClusterData
		err = decodeRecord(kv.Value, &v)
		e.value = v
	case KindTenant:
		var v TenantInfo
		err = decodeRecord(kv.Value, &v)
		v.normalize()
		e.value = v
	case KindNamespace:
		var v Policies
		err = decodeRecord(kv.Value, &v)
		v.normalize()
		e.value = v
	case KindTopic:
		var v TopicPolicies
		err = decodeRecord(kv.Value, &v)
		v.normalize()
		e.value = v
	}
	if err != nil {
		c.log.Error("global config record not readable; keeping its last known value", "key", kv.Key, "err", err)
		return entry{}, false
	}
	return e, true
}

// parseKey recognises the keys of the four record kinds and names them;
// anything else under the prefix (a future kind) is ignored.
func (c *Cache) parseKey(key string) (Kind, string, bool) {
	if !strings.HasPrefix(key, c.prefix) {
		return "", "", false
	}
	segs, ok := unescapeSegments(key[len(c.prefix):])
	if !ok || len(segs) < 2 {
		return "", "", false
	}
	switch Kind(segs[0]) {
	case KindCluster, KindTenant:
		if len(segs) == 2 {
			return Kind(segs[0]), segs[1], true
		}
	case KindNamespace:
		if len(segs) == 3 {
			return KindNamespace, segs[1] + "/" + segs[2], true
		}
	case KindTopic:
		if len(segs) == 5 {
			t, err := topology.ParseTopicName(segs[3] + "://" + segs[1] + "/" + segs[2] + "/" + segs[4])
			if err == nil {
				return KindTopic, t.String(), true
			}
		}
	}
	return "", "", false
}

// unescapeSegments splits an escaped key tail into its names.
func unescapeSegments(rest string) ([]string, bool) {
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil || u == "" {
			return nil, false
		}
		segs[i] = u
	}
	return segs, true
}

func (c *Cache) key(parts ...string) string { return c.prefix[:len(c.prefix)-1] + meta.Key(parts...) }

// ---- waiting ----

// Await blocks until the cache reflects the write r names: for a create or
// update, until it has applied the store revision r.Revision; for a delete,
// until it no longer holds the deleted version. An admin write followed by
// Await and a cache read therefore reads its own write.
func (c *Cache) Await(ctx context.Context, r Receipt) error {
	return c.waitFor(ctx, func() bool {
		if !r.Deleted {
			return c.mu.rev >= r.Revision
		}
		// Before the first List an absent key proves nothing.
		if !c.mu.loaded {
			return false
		}
		e, ok := c.mu.entries[r.Key]
		return !ok || e.modRev != r.Revision
	})
}

// AwaitRevision blocks until the cache has applied every change to the
// global prefix up to rev. Only revisions of changes under the prefix are
// certain to be reached.
func (c *Cache) AwaitRevision(ctx context.Context, rev int64) error {
	return c.waitFor(ctx, func() bool { return c.mu.rev >= rev })
}

func (c *Cache) waitFor(ctx context.Context, cond func() bool) error {
	for {
		c.mu.RLock()
		ok, ch := cond(), c.mu.changed
		c.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrCacheClosed
		}
	}
}

// ---- reads ----

func cacheGet[T any](c *Cache, key string) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.mu.entries[key]
	if !ok {
		var zero T
		return zero, false
	}
	return e.value.(T), true
}

// cacheNames returns the sorted names of kind whose key lies under prefix
// (a key ending in '/').
func (c *Cache) cacheNames(kind Kind, prefix string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []string{}
	for k, e := range c.mu.entries {
		if e.kind == kind && strings.HasPrefix(k, prefix) {
			out = append(out, e.name)
		}
	}
	sort.Strings(out)
	return out
}

// Cluster returns a region's entry.
func (c *Cache) Cluster(name string) (ClusterData, bool) {
	return cacheGet[ClusterData](c, c.key(clusterParts(name)...))
}

// Clusters lists the regions, sorted.
func (c *Cache) Clusters() []string {
	return c.cacheNames(KindCluster, meta.Prefix(c.key(kindClusters)))
}

// Tenant returns a tenant (a copy: the caller may change it).
func (c *Cache) Tenant(name string) (TenantInfo, bool) {
	t, ok := cacheGet[TenantInfo](c, c.key(tenantParts(name)...))
	return t.Clone(), ok
}

// Tenants lists the tenants, sorted.
func (c *Cache) Tenants() []string {
	return c.cacheNames(KindTenant, meta.Prefix(c.key(kindTenants)))
}

// Namespace returns tenant/ns's policies (a copy).
func (c *Cache) Namespace(tenant, ns string) (Policies, bool) {
	p, ok := cacheGet[Policies](c, c.key(namespaceParts(tenant, ns)...))
	return p.Clone(), ok
}

// Namespaces lists a tenant's namespaces (their own segment, as
// Store.Namespaces does), sorted.
func (c *Cache) Namespaces(tenant string) []string {
	names := c.cacheNames(KindNamespace, meta.Prefix(c.key(kindNamespaces, tenant)))
	for i, n := range names {
		names[i] = strings.TrimPrefix(n, tenant+"/")
	}
	return names
}

// Topic returns the record of topic's partitioned topic (a copy).
func (c *Cache) Topic(topic topology.TopicName) (TopicPolicies, bool) {
	topic, err := checkTopic(topic)
	if err != nil {
		return TopicPolicies{}, false
	}
	p, ok := cacheGet[TopicPolicies](c, c.key(topicParts(topic)...))
	return p.Clone(), ok
}

// Topics lists the full names of tenant/ns's topics that have a record,
// sorted.
func (c *Cache) Topics(tenant, ns string) []string {
	return c.cacheNames(KindTopic, meta.Prefix(c.key(kindTopics, tenant, ns)))
}

// Resolve returns topic's effective policies (see the package function
// Resolve) from one consistent view of its tenant, namespace and topic
// record. A missing namespace or tenant is ErrNotFound: the topic cannot be
// served.
func (c *Cache) Resolve(topic topology.TopicName, d BrokerDefaults) (Effective, error) {
	topic, err := checkTopic(topic)
	if err != nil {
		return Effective{}, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	ns, ok := c.mu.entries[c.key(namespaceParts(topic.Tenant, topic.Namespace)...)]
	if !ok {
		return Effective{}, fmt.Errorf("%w: namespace %s", ErrNotFound, topic.NamespaceName())
	}
	tn, ok := c.mu.entries[c.key(tenantParts(topic.Tenant)...)]
	if !ok {
		return Effective{}, fmt.Errorf("%w: tenant %s", ErrNotFound, topic.Tenant)
	}
	var tp *TopicPolicies
	if e, ok := c.mu.entries[c.key(topicParts(topic)...)]; ok {
		v := e.value.(TopicPolicies)
		tp = &v
	}
	return Resolve(d, tn.value.(TenantInfo), ns.value.(Policies), tp), nil
}

// ---- subscriptions ----

// Subscription delivers the cache's changes to one reader, coalesced and
// bounded (CacheConfig.SubscriberLimit): a slow reader loses detail
// (Batch.Resync), never blocks the cache.
type Subscription struct {
	c      *Cache
	limit  int
	notify chan struct{} // one slot: "something is pending"

	mu struct {
		sync.Mutex
		pending map[string]Change
		resync  bool
		rev     int64
	}
}

// Subscribe registers a subscription. Its first batch says Resync once the
// cache has loaded (or at once, if it has): read the initial state from the
// cache, then apply changes.
func (c *Cache) Subscribe() *Subscription {
	s := &Subscription{c: c, limit: c.cfg.SubscriberLimit, notify: make(chan struct{}, 1)}
	s.mu.pending = map[string]Change{}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.subs[s] = struct{}{}
	select {
	case <-c.ready:
		s.resync(c.mu.rev)
	default:
	}
	return s
}

// Close unregisters the subscription.
func (s *Subscription) Close() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	delete(s.c.mu.subs, s)
}

// add records a change; called by the owner under Cache.mu.
func (s *Subscription) add(key string, ch Change) {
	s.mu.Lock()
	if !s.mu.resync {
		s.mu.pending[key] = ch
		if len(s.mu.pending) > s.limit {
			s.mu.pending = map[string]Change{}
			s.mu.resync = true
		}
	}
	s.mu.rev = ch.Revision
	s.mu.Unlock()
	s.poke()
}

// resync marks everything as possibly changed; called under Cache.mu.
func (s *Subscription) resync(rev int64) {
	s.mu.Lock()
	s.mu.pending = map[string]Change{}
	s.mu.resync = true
	s.mu.rev = rev
	s.mu.Unlock()
	s.poke()
}

func (s *Subscription) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next waits for changes and returns them, or returns ctx's error, or
// ErrCacheClosed once the cache is closed.
func (s *Subscription) Next(ctx context.Context) (Batch, error) {
	for {
		s.mu.Lock()
		if len(s.mu.pending) > 0 || s.mu.resync {
			b := Batch{Resync: s.mu.resync, Revision: s.mu.rev}
			for _, ch := range s.mu.pending {
				b.Changes = append(b.Changes, ch)
			}
			s.mu.pending = map[string]Change{}
			s.mu.resync = false
			s.mu.Unlock()
			return b, nil
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-s.c.done:
			return Batch{}, ErrCacheClosed
		}
	}
}
