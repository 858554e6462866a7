package meta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// MemoryConfig configures NewMemory.
type MemoryConfig struct {
	// HistoryLimit is how many revisions of change history the store keeps
	// for watches. A watch that starts, or falls, further behind than this
	// gets ErrCompacted, as an etcd watch does after compaction. It bounds the
	// store's memory: every kept revision holds its events. At least 1.
	HistoryLimit int
	// Clock times lease expiry once a lease's keep-alive has stopped (its
	// Grant context ended): a lease whose keep-alive has stopped expires one
	// TTL later, exactly as an etcd server lets it lapse. Tests pass a fake
	// clock to expire leases without sleeping. Required:
	// DefaultMemoryConfig sets the wall clock.
	Clock clockwork.Clock
}

// DefaultMemoryConfig keeps 10,000 revisions of history on the wall clock.
func DefaultMemoryConfig() MemoryConfig {
	return MemoryConfig{HistoryLimit: 10_000, Clock: clockwork.NewRealClock()}
}

// Validate reports a field out of bounds.
func (c MemoryConfig) Validate() error {
	if c.HistoryLimit < 1 {
		return fmt.Errorf("meta: MemoryConfig.HistoryLimit must be at least 1, got %d", c.HistoryLimit)
	}
	if c.Clock == nil {
		return errors.New("meta: MemoryConfig.Clock is required (DefaultMemoryConfig sets the wall clock)")
	}
	return nil
}

// Memory is an in-memory Store for unit tests. It follows etcd's semantics
// where callers can observe them: one global revision counter that every
// write (and every lease expiry that deletes keys) advances by one;
// CreateRevision and ModRevision as etcd sets them; prefix watches that replay
// from a revision still in the bounded history; leases whose keys are deleted
// in one revision when they are revoked or expire; and elections won by the
// lowest CreateRevision under the election prefix.
//
// Lease time. A lease is kept alive for as long as the context given to Grant
// lives. When that context ends, Lease.Done closes at once (the holder must
// treat what it held as lost) and the lease expires one TTL later on the
// configured Clock, deleting its keys, just as an etcd server lets an
// unrenewed lease lapse. Expire ends a lease at once, as a server-side expiry
// would (for example after a network partition), without any clock.
//
// Concurrency. All state sits under mu. Each watch and each leadership has
// one goroutine, owned by the store: Close stops them and waits for them, as
// it does for lease timers.
type Memory struct {
	clock        clockwork.Clock
	historyLimit int

	// life is cancelled by Close; it stops the goroutines the store owns.
	life   context.Context
	cancel context.CancelFunc
	// wg counts the store's goroutines and pending callbacks. Add is only
	// called under mu while mu.closed is false, so no Add races Close's Wait.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		rev    int64
		kvs    map[string]*KV
		// history holds the events of the last historyLimit revisions,
		// oldest first, one entry per revision.
		history []WatchResponse
		// compacted is the newest revision dropped from history; a watch
		// must start after it.
		compacted int64
		// changed is closed and replaced whenever rev advances, waking every
		// watcher.
		changed   chan struct{}
		leases    map[LeaseID]*memLease
		lastLease LeaseID
	}
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store at revision 0.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Memory{clock: cfg.Clock, historyLimit: cfg.HistoryLimit}
	m.life, m.cancel = context.WithCancel(context.Background())
	m.mu.kvs = make(map[string]*KV)
	m.mu.changed = make(chan struct{})
	m.mu.leases = make(map[LeaseID]*memLease)
	return m, nil
}

// lockOpen takes m.mu for an operation, or fails without holding it when
// ctx is done or the store is closed.
func (m *Memory) lockOpen(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string) (KV, error) {
	if err := m.lockOpen(ctx); err != nil {
		return KV{}, err
	}
	defer m.mu.Unlock()
	kv, ok := m.mu.kvs[key]
	if !ok {
		return KV{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return copyKV(kv), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	if err := m.lockOpen(ctx); err != nil {
		return nil, 0, err
	}
	defer m.mu.Unlock()
	var out []KV
	for k, kv := range m.mu.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, copyKV(kv))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, m.mu.rev, nil
}

// Create implements Store.
func (m *Memory) Create(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	if err := m.lockOpen(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if _, ok := m.mu.kvs[key]; ok {
		return 0, fmt.Errorf("%w: %s", ErrExists, key)
	}
	var l *memLease
	if lease != NoLease {
		if l = m.mu.leases[lease]; l == nil {
			return 0, fmt.Errorf("%w: lease %x", ErrLeaseNotFound, int64(lease))
		}
	}
	rev := m.mu.rev + 1
	kv := &KV{Key: key, Value: cloneBytes(value), CreateRevision: rev, ModRevision: rev, Lease: lease}
	m.mu.kvs[key] = kv
	if l != nil {
		l.keys[key] = struct{}{}
	}
	m.commitLocked([]Event{{Type: EventPut, KV: copyKV(kv)}})
	return rev, nil
}

// Update implements Store.
func (m *Memory) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	return m.updateIf(ctx, key, value, revisionAt{key, modRev})
}

// UpdateGuarded implements Store.
func (m *Memory) UpdateGuarded(ctx context.Context, key string, value []byte, modRev int64, guardKey string, guardRev int64) (int64, error) {
	return m.updateIf(ctx, key, value, revisionAt{key, modRev}, revisionAt{guardKey, guardRev})
}

// UpdateIfNone implements Store.
func (m *Memory) UpdateIfNone(ctx context.Context, key string, value []byte, modRev int64, prefix string) (int64, error) {
	if err := m.lockOpen(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	kv, ok := m.mu.kvs[key]
	noneUnder := true
	for k := range m.mu.kvs {
		noneUnder = noneUnder && !strings.HasPrefix(k, prefix)
	}
	if !ok || kv.ModRevision != modRev || !noneUnder {
		return 0, fmt.Errorf("%w: %s at revision %d with no key under %s", ErrConflict, key, modRev, prefix)
	}
	rev := m.mu.rev + 1
	kv.Value = cloneBytes(value)
	kv.ModRevision = rev
	m.commitLocked([]Event{{Type: EventPut, KV: copyKV(kv)}})
	return rev, nil
}

// updateIf replaces key's value if every key of conds exists at its
// ModRevision; conds[0] is key itself.
func (m *Memory) updateIf(ctx context.Context, key string, value []byte, conds ...revisionAt) (int64, error) {
	if err := m.lockOpen(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	for _, c := range conds {
		if kv, ok := m.mu.kvs[c.key]; !ok || kv.ModRevision != c.rev {
			return 0, conflict(conds)
		}
	}
	kv := m.mu.kvs[key]
	rev := m.mu.rev + 1
	kv.Value = cloneBytes(value)
	kv.ModRevision = rev
	m.commitLocked([]Event{{Type: EventPut, KV: copyKV(kv)}})
	return rev, nil
}

// MoveToLease implements Store.
func (m *Memory) MoveToLease(ctx context.Context, key string, value []byte, modRev int64, lease LeaseID) (int64, error) {
	if err := m.lockOpen(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	kv, ok := m.mu.kvs[key]
	if !ok || kv.ModRevision != modRev {
		return 0, conflict([]revisionAt{{key, modRev}})
	}
	var to *memLease
	if lease != NoLease {
		if to = m.mu.leases[lease]; to == nil {
			return 0, fmt.Errorf("meta: move %s: %w: lease %x", key, ErrLeaseNotFound, int64(lease))
		}
	}
	if from := m.mu.leases[kv.Lease]; from != nil {
		delete(from.keys, key)
	}
	if to != nil {
		to.keys[key] = struct{}{}
	}
	rev := m.mu.rev + 1
	kv.Value = cloneBytes(value)
	kv.ModRevision = rev
	kv.Lease = lease
	m.commitLocked([]Event{{Type: EventPut, KV: copyKV(kv)}})
	return rev, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string, modRev int64) error {
	if err := m.lockOpen(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	kv, ok := m.mu.kvs[key]
	if !ok || kv.ModRevision != modRev {
		return fmt.Errorf("%w: %s at revision %d", ErrConflict, key, modRev)
	}
	m.deleteLocked([]string{key})
	return nil
}

// deleteLocked removes keys in one new revision. The keys must exist.
func (m *Memory) deleteLocked(keys []string) {
	rev := m.mu.rev + 1
	events := make([]Event, 0, len(keys))
	for _, k := range keys {
		kv := m.mu.kvs[k]
		delete(m.mu.kvs, k)
		if l := m.mu.leases[kv.Lease]; l != nil {
			delete(l.keys, k)
		}
		// etcd's delete events carry only the key and the deletion revision.
		events = append(events, Event{Type: EventDelete, KV: KV{Key: k, ModRevision: rev}})
	}
	m.commitLocked(events)
}

// commitLocked advances the revision by one, records events in the history
// and wakes the watchers. Every event carries the new revision as ModRevision.
func (m *Memory) commitLocked(events []Event) {
	m.mu.rev++
	m.mu.history = append(m.mu.history, WatchResponse{Events: events, Revision: m.mu.rev})
	if over := len(m.mu.history) - m.historyLimit; over > 0 {
		m.mu.compacted = m.mu.history[over-1].Revision
		// Copy rather than re-slice so the dropped revisions are freed now.
		m.mu.history = append(m.mu.history[:0:0], m.mu.history[over:]...)
	}
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
}

// Watch implements Store. Each watch has one goroutine that replays the
// history from its next revision and then waits for new revisions; it never
// buffers more than one response, so a slow reader holds back only itself and
// gets ErrCompacted once the history has moved past it.
//
// When the store is closed the channel is closed; a final ErrClosed response
// is delivered only if the reader is waiting for it, so that Close never
// blocks on a reader that has gone away.
func (m *Memory) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	out := make(chan WatchResponse, 1)
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		out <- WatchResponse{Err: ErrClosed}
		close(out)
		return out
	}
	next := fromRev
	if next <= 0 {
		next = m.mu.rev + 1
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go m.watch(ctx, prefix, next, out)
	return out
}

func (m *Memory) watch(ctx context.Context, prefix string, next int64, out chan<- WatchResponse) {
	defer m.wg.Done()
	defer close(out)
	for {
		m.mu.Lock()
		if m.mu.closed {
			m.mu.Unlock()
			select {
			case out <- WatchResponse{Err: ErrClosed}:
			default:
			}
			return
		}
		if next <= m.mu.compacted {
			m.mu.Unlock()
			select {
			case out <- WatchResponse{Err: fmt.Errorf("%w: watch from revision %d", ErrCompacted, next)}:
			case <-ctx.Done():
			case <-m.life.Done():
			}
			return
		}
		batch := m.eventsSinceLocked(prefix, next)
		// A watch from a future revision keeps waiting for it.
		next = max(next, m.mu.rev+1)
		changed := m.mu.changed
		m.mu.Unlock()

		for _, resp := range batch {
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			case <-m.life.Done():
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-m.life.Done():
			// Loop once more to report ErrClosed.
		}
	}
}

// eventsSinceLocked copies the history's events under prefix from revision
// next on, one response per revision.
func (m *Memory) eventsSinceLocked(prefix string, next int64) []WatchResponse {
	h := m.mu.history
	i := sort.Search(len(h), func(i int) bool { return h[i].Revision >= next })
	var batch []WatchResponse
	for _, r := range h[i:] {
		var evs []Event
		for _, ev := range r.Events {
			if strings.HasPrefix(ev.KV.Key, prefix) {
				ev.KV = copyKV(&ev.KV)
				evs = append(evs, ev)
			}
		}
		if len(evs) > 0 {
			batch = append(batch, WatchResponse{Events: evs, Revision: r.Revision})
		}
	}
	return batch
}

// memLease is a lease of the in-memory store. Its fields other than id and
// ttl are under the store's mu.
type memLease struct {
	m    *Memory
	id   LeaseID
	ttl  time.Duration
	keys map[string]struct{}
	// done is closed when the keep-alive stops, which happens before or at
	// the lease's end.
	done     chan struct{}
	doneSent bool
	// expiresAt is when the lease lapses, once its keep-alive has stopped;
	// zero while it is kept alive.
	expiresAt time.Time
	// stopKeepAlive unregisters the Grant context's callback; stopExpiry
	// cancels the expiry timer, once armed.
	stopKeepAlive func() bool
	stopExpiry    func() bool
}

func (l *memLease) ID() LeaseID                      { return l.id }
func (l *memLease) Done() <-chan struct{}            { return l.done }
func (l *memLease) Revoke(ctx context.Context) error { return l.m.Revoke(ctx, l.id) }
func (l *memLease) String() string                   { return fmt.Sprintf("lease %x", int64(l.id)) }

// closeDoneLocked closes done once; its mu is the store's.
func (l *memLease) closeDoneLocked() {
	if !l.doneSent {
		l.doneSent = true
		close(l.done)
	}
}

// Grant implements Store. ttl must be positive.
func (m *Memory) Grant(ctx context.Context, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("meta: lease TTL must be positive, got %v", ttl)
	}
	if err := m.lockOpen(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	m.mu.lastLease++
	l := &memLease{m: m, id: m.mu.lastLease, ttl: ttl, keys: make(map[string]struct{}), done: make(chan struct{})}
	m.mu.leases[l.id] = l
	m.wg.Add(1)
	l.stopKeepAlive = context.AfterFunc(ctx, func() {
		defer m.wg.Done()
		m.keepAliveStopped(l)
	})
	return l, nil
}

// keepAliveStopped runs when a lease's Grant context ends: the holder learns
// at once, and the lease lapses one TTL later.
func (m *Memory) keepAliveStopped(l *memLease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed || m.mu.leases[l.id] != l {
		return
	}
	// Arm the expiry before closing done: whoever sees done closed may move
	// a manual clock at once, and the timer must already be there.
	m.wg.Add(1)
	l.expiresAt = m.clock.Now().Add(l.ttl)
	l.stopExpiry = m.clock.AfterFunc(l.ttl, func() {
		defer m.wg.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.mu.closed && m.mu.leases[l.id] == l {
			m.endLeaseLocked(l)
		}
	}).Stop
	l.closeDoneLocked()
}

// Expire ends the lease now, deleting its keys, as an etcd server does when a
// lease's TTL runs out unrenewed. It is a test hook for the failures a clock
// cannot reach, such as a holder cut off from etcd while its own process
// keeps running. It reports whether the lease existed.
func (m *Memory) Expire(id LeaseID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.mu.leases[id]
	if m.mu.closed || l == nil {
		return false
	}
	m.endLeaseLocked(l)
	return true
}

// TimeToLive implements Store: a lease kept alive has its whole TTL left.
func (m *Memory) TimeToLive(ctx context.Context, id LeaseID) (remaining, granted time.Duration, err error) {
	if err := m.lockOpen(ctx); err != nil {
		return 0, 0, err
	}
	defer m.mu.Unlock()
	l := m.mu.leases[id]
	switch {
	case l == nil:
		return 0, 0, fmt.Errorf("meta: lease %x: %w", int64(id), ErrLeaseNotFound)
	case l.expiresAt.IsZero():
		return l.ttl, l.ttl, nil
	}
	return max(l.expiresAt.Sub(m.clock.Now()), 0), l.ttl, nil
}

// Revoke implements Store.
func (m *Memory) Revoke(ctx context.Context, id LeaseID) error {
	if err := m.lockOpen(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if l := m.mu.leases[id]; l != nil {
		m.endLeaseLocked(l)
	}
	return nil
}

// endLeaseLocked forgets the lease and deletes its keys in one revision (none
// if it had no keys, as in etcd).
func (m *Memory) endLeaseLocked(l *memLease) {
	delete(m.mu.leases, l.id)
	m.stopLeaseCallbacksLocked(l)
	l.closeDoneLocked()
	if len(l.keys) == 0 {
		return
	}
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m.deleteLocked(keys)
}

// stopLeaseCallbacksLocked cancels the lease's pending callbacks, releasing
// their hold on wg for each one that had not started.
func (m *Memory) stopLeaseCallbacksLocked(l *memLease) {
	if l.stopKeepAlive != nil && l.stopKeepAlive() {
		m.wg.Done()
	}
	l.stopKeepAlive = nil
	if l.stopExpiry != nil && l.stopExpiry() {
		m.wg.Done()
	}
	l.stopExpiry = nil
}

// Campaign implements Store.
func (m *Memory) Campaign(ctx context.Context, prefix string, value []byte, lease Lease) (Leadership, error) {
	m.mu.Lock()
	closed := m.mu.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return campaign(ctx, m, m.spawn, prefix, value, lease)
}

// spawn runs f in a goroutine the store owns, with a context that Close
// cancels. It reports false, running nothing, once the store is closed.
func (m *Memory) spawn(f func(ctx context.Context)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f(m.life)
	}()
	return true
}

// Close implements Store. Leases stop at once (their Done channels close) but
// no keys are deleted: the store simply stops serving, as a client that
// closes its etcd connection would see it.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	for _, l := range m.mu.leases {
		m.stopLeaseCallbacksLocked(l)
		l.closeDoneLocked()
	}
	close(m.mu.changed)
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

// Compact drops the history before revision rev, as etcd's compaction does:
// a watch from rev or later still works, one from an earlier revision gets
// ErrCompacted. Key values are unaffected (the store keeps no old versions).
func (m *Memory) Compact(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev-1 <= m.mu.compacted {
		return
	}
	m.mu.compacted = min(rev-1, m.mu.rev)
	h := m.mu.history
	i := sort.Search(len(h), func(i int) bool { return h[i].Revision > m.mu.compacted })
	m.mu.history = append(h[:0:0], h[i:]...)
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
}

// Revision returns the store's current revision.
func (m *Memory) Revision() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.rev
}

func copyKV(kv *KV) KV {
	c := *kv
	c.Value = cloneBytes(kv.Value)
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
