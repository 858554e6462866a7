package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// Replicated subscriptions: a subscription whose consumed set travels to
// every other region of its topic's replication set, so that its
// consumers can move to another region and go on where they stood there.
// Package replsub says what travels and by which rules states meet; this
// file moves the states.
//
// Transport. Each region's state of a subscription is one key of the
// global store (global.Store.WriteSubscriptionState), written by the
// topic's owner in that region and watched by the owners in the others. A
// topic's own entries were rejected as the carrier (Pulsar's markers):
// markers must be filtered out of dispatch, they count in backlogs and
// hold back mark-deletes until a round trip completes (apache/pulsar#10054),
// and they stop for everyone while any one link is down. Keys in the
// shared store reach every region whose owner can read the global store,
// whatever the replication links do, and cost nothing while nothing
// changes. The price is a dependency of the sync (never of the data path)
// on the global store, and etcd writes: at most one per subscription per
// interval, and only when its consumed set changed.
//
// Turning it on. A subscription is replicated when it is created, or
// subscribed again, with replicate_subscription_state, or through the admin
// API; the flag is a cursor property, replicatedProperty, as Pulsar keeps
// it. A remote region's state for a subscription this region lacks creates
// it here (from the earliest entry, then the state applies), so the
// subscription exists in every region of the set.

const (
	// replicatedProperty is Pulsar's cursor property that marks a
	// replicated subscription ("1"; "0" or absent: not replicated).
	replicatedProperty = "pulsar.replicated.subscription"
	// epochProperty keeps the subscription's replsub.Epoch with its cursor.
	epochProperty = "meridian.replicated.epoch"
	// indexReader is the non-durable cursor that reads the topic's entries
	// into the index; no subscription may take its name (Topic.subscription),
	// and it is outside the replication cursors' prefix, which a region's
	// name completes.
	indexReader = "meridian.replsub.index"
	// indexReadBatch is the most entries one read of the index takes.
	indexReadBatch = 500
	// replicatedCatchUpTimeout bounds the catch-up before the first
	// consumer of a replicated subscription attaches. Past it the consumer
	// attaches on the states the watch has shown: the data path does not
	// wait on the global store for longer (DESIGN §3).
	replicatedCatchUpTimeout = 2 * time.Second
)

// ReplicatedSubscriptionsConfig says how replicated subscriptions' states
// travel.
type ReplicatedSubscriptionsConfig struct {
	// Interval is the longest a change of a subscription's consumed set
	// waits before it is written to the global store, and about the
	// shortest time between two writes of one subscription's state (less
	// the time a sync takes, to at most half of it: syncGap) (Pulsar's
	// replicatedSubscriptionsSnapshotFrequencyMillis, 1000 ms). A failover
	// redelivers at most what was acked in the last Interval (plus the
	// global store's latency); in a region cut off from the global store,
	// up to two Intervals (at least a second) with automatic failover
	// (writtenLately), and whatever was acked since the cut without.
	// Shorter costs more etcd writes: one per
	// replicated subscription per Interval while its consumers ack.
	// 10ms..1h.
	Interval time.Duration
	// MaxRanges bounds the ranges one state holds per origin (10,000). Past
	// it the origin falls back to its consumed prefix (the mark-delete), so
	// a failover redelivers its individually acked messages, counted in
	// meridian_replicated_subscription_fallbacks_total. A state's size is
	// about 12 bytes per range (1,333 ranges in 15 KB), within etcd's
	// request limit (1.5 MB) for 100,000 ranges per origin.
	// 1..100,000.
	MaxRanges int
}

// DefaultReplicatedSubscriptionsConfig returns Pulsar's interval and a
// bound of 10,000 ranges.
func DefaultReplicatedSubscriptionsConfig() ReplicatedSubscriptionsConfig {
	return ReplicatedSubscriptionsConfig{Interval: time.Second, MaxRanges: 10_000}
}

func (c ReplicatedSubscriptionsConfig) validate() error {
	switch {
	case c.Interval < 10*time.Millisecond || c.Interval > time.Hour:
		return fmt.Errorf("%w: ReplicatedSubscriptions.Interval %v, want 10ms..1h", ErrInvalidConfig, c.Interval)
	case c.MaxRanges < 1 || c.MaxRanges > 100_000:
		return fmt.Errorf("%w: ReplicatedSubscriptions.MaxRanges %d, want 1..100000", ErrInvalidConfig, c.MaxRanges)
	}
	return nil
}

// replicatedSubs carries the replicated subscriptions of one topic of a
// replicated namespace to and from the other regions.
//
// Ownership: two goroutines, started by startReplicatedSubs and stopped
// and waited for by stop (the topic's close). The watch goroutine follows
// the topic's states in the global store into mu.states and wakes run.
// run owns everything else: the index, its reader and what was written. It
// syncs at most once per Interval, and only when woken: by a change of a
// replicated subscription here (an ack, a seek), by a state that changed
// elsewhere, or, while other regions have states, by new entries (a state
// may name entries that had not arrived yet). An idle topic costs nothing.
type replicatedSubs struct {
	t    *Topic
	cfg  ReplicatedSubscriptionsConfig
	wake chan struct{} // cap 1
	// syncNow asks run for a sync at once, past the Interval, and for its
	// outcome on the channel sent (cap 1): a flush.
	syncNow chan chan syncOutcome
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu struct {
		sync.Mutex
		// states are the stored states of the topic's subscriptions, by
		// subscription, then region (this region's own included: its
		// revision is where the next write goes).
		states map[string]map[string]global.SubscriptionState
		// taken is when each region took the state last applied here, by
		// subscription, then region (Unix ms): the states' age in stats.
		taken map[string]map[string]int64
		// forgotten are the subscriptions unsubscribed here whose
		// tombstone the next sync writes.
		forgotten map[string]bool
		// expireBefore is the publish time (Unix ms) before which the
		// next sync expires what the replicated subscriptions hold (0:
		// none); see expire.
		expireBefore int64
		// unwrittenSince is when the oldest change here (an ack, a seek,
		// an expiry) that no sync has written yet was made, zero when
		// every change is written; changedSince, the oldest made since the
		// running sync began, which it may not have written. refused is
		// set when writtenLately held a dispatch back since the last sync
		// that wrote the changes.
		unwrittenSince, changedSince time.Time
		refused                      bool
	}

	// Owned by run (and by stop, once run has ended). The index and its
	// reader exist while the topic has a subscription to carry, nil
	// otherwise: a reader that does not move would hold back the eviction
	// of the topic's entry cache.
	index   *replsub.Index
	reader  *mledger.Cursor
	written map[string]replsub.State // the last state written, by subscription
	behind  bool                     // the last sync applied a state ahead of replication (replsub.Index.Behind)
}

// syncOutcome is what a flush learns of the sync it asked for.
type syncOutcome struct {
	// behind is set when a state applied names messages, consumed in its
	// region, that have not reached this one yet: applied as they come,
	// by a later sync.
	behind bool
	err    error
}

// startReplicatedSubs starts carrying t's replicated subscriptions when t
// replicates to another region; it returns nil otherwise (and for a
// non-persistent topic, which keeps nothing to fail over to).
func startReplicatedSubs(t *Topic) *replicatedSubs {
	if !t.replicatesElsewhere() {
		return nil
	}
	r := &replicatedSubs{t: t, cfg: t.svc.cfg.ReplicatedSubscriptions, wake: make(chan struct{}, 1),
		syncNow: make(chan chan syncOutcome), written: map[string]replsub.State{}}
	r.mu.states = map[string]map[string]global.SubscriptionState{}
	r.mu.taken = map[string]map[string]int64{}
	r.mu.forgotten = map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		t.svc.gstore.WatchSubscriptionStates(ctx, t.name, time.Second, t.svc.log, r.replaceStates, r.changeStates)
	}()
	go func() {
		defer r.wg.Done()
		r.run(ctx)
	}()
	return r
}

// replicatesElsewhere reports whether the topic's replication set, as of
// its load, holds a region besides this one.
func (t *Topic) replicatesElsewhere() bool {
	return t.name.Domain != "non-persistent" &&
		slices.ContainsFunc(t.eff.ReplicationClusters, func(r string) bool { return r != t.svc.cfg.Region })
}

// stop ends both goroutines and waits for them. A change not written yet is
// written by the topic's next owner, which exports on its first sync.
func (r *replicatedSubs) stop() {
	r.cancel()
	r.wg.Wait()
	r.closeIndex()
}

// expire has the next sync consume, in every replicated subscription,
// the entries published before cutoff: a message TTL or a message_age
// eviction. By the origin's publish time, not the arrival here, so that
// every region expires the same set: an expiry's acks travel like any
// other, and by arrival a region would ack, everywhere, messages that
// reached it late but are within their TTL in the regions they reached
// first. The publish time is the producer's clock, as in Pulsar without
// broker entry metadata. A sync that fails drops the request; the next
// check asks again.
func (r *replicatedSubs) expire(cutoff time.Time) {
	r.mu.Lock()
	r.mu.expireBefore = max(r.mu.expireBefore, cutoff.UnixMilli())
	r.mu.Unlock()
	r.poke()
}

// changed records a change of a replicated subscription here and asks
// run for a sync.
func (r *replicatedSubs) changed() {
	r.mu.Lock()
	now := r.t.svc.clock.Now()
	if r.mu.unwrittenSince.IsZero() {
		r.mu.unwrittenSince = now
	}
	if r.mu.changedSince.IsZero() {
		r.mu.changedSince = now
	}
	r.mu.Unlock()
	r.poke()
}

// writtenLately reports whether every change made here more than
// unwrittenBound ago has been written: a sync starts within an Interval
// of a change, and writes it unless the global store does not answer. In
// a namespace with automatic failover a replicated subscription
// dispatches only while it holds (Topic.mayDispatchReplicated): a region
// cut off from the global store stops that long after its oldest
// unwritten change, not when its failover session lapses (SessionTTL -
// Margin), and a failover redelivers no more acks than it made since.
func (r *replicatedSubs) writtenLately() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.unwrittenSince.IsZero() || r.t.svc.clock.Since(r.mu.unwrittenSince) < r.unwrittenBound() {
		return true
	}
	r.mu.refused = true
	return false
}

// unwrittenBound is two Intervals, and at least a second, so that a sync
// slower than a short Interval (a global store across a WAN) does not
// hold dispatch back.
func (r *replicatedSubs) unwrittenBound() time.Duration {
	return max(2*r.cfg.Interval, time.Second)
}

// syncing marks the start of a sync: the changes made from now on may not
// be in what it writes.
func (r *replicatedSubs) syncing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.changedSince = time.Time{}
}

// synced records a sync's outcome. One that failed leaves every change
// unwritten; one that wrote leaves those made since it began, and wakes
// the replicated subscriptions that writtenLately held back.
func (r *replicatedSubs) synced(err error) {
	if err != nil {
		return
	}
	r.mu.Lock()
	r.mu.unwrittenSince = r.mu.changedSince
	refused := r.mu.refused
	r.mu.refused = false
	r.mu.Unlock()
	if refused {
		for _, s := range r.t.subscriptions() {
			if s.replicated() {
				s.poke()
			}
		}
	}
}

// poke asks run for a sync.
func (r *replicatedSubs) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *replicatedSubs) replaceStates(all []global.SubscriptionState) {
	r.mu.Lock()
	clear(r.mu.states)
	r.mu.Unlock()
	r.changeStates(all)
}

func (r *replicatedSubs) changeStates(changed []global.SubscriptionState) {
	r.mu.Lock()
	for _, st := range changed {
		if st.Deleted {
			delete(r.mu.states[st.Subscription], st.Region)
			continue
		}
		r.putStateLocked(st)
	}
	r.mu.Unlock()
	r.poke()
}

func (r *replicatedSubs) putStateLocked(st global.SubscriptionState) {
	if r.mu.states[st.Subscription] == nil {
		r.mu.states[st.Subscription] = map[string]global.SubscriptionState{}
	}
	r.mu.states[st.Subscription][st.Region] = st
}

// catchUp reads the topic's states from the global store itself, not the
// watch, and applies them at once: a consumer that moves here from another
// region (a switch of the active region, a failover) then starts from
// everything that region had written when it let the consumer go
// (migrate.go flushes first), not from what the watch had shown and a
// sync applied, which may be an Interval and more behind. A state read
// here replaces the held one only if it is newer: the watch may have
// shown a later write meanwhile.
//
// A state may name messages that replication has not brought here yet
// (the other region consumed them moments after it stored them); catchUp
// applies again as entries arrive, until none is missing or ctx ends, so
// that they are not delivered here when they come.
func (r *replicatedSubs) catchUp(ctx context.Context) error {
	read, err := r.t.svc.gstore.SubscriptionStates(ctx, r.t.name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	for _, st := range read {
		if held, ok := r.mu.states[st.Subscription][st.Region]; !ok || held.ModRevision < st.ModRevision {
			r.putStateLocked(st)
		}
	}
	r.mu.Unlock()
	for {
		arrived := r.t.ml.Changed()
		out := r.flush(ctx)
		if out.err != nil || !out.behind {
			return out.err
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return fmt.Errorf("messages consumed in another region have not all reached this one: %w", ctx.Err())
		}
	}
}

// flush has run sync at once, past the Interval, and waits for it: this
// region's states are then written, and the others' applied.
func (r *replicatedSubs) flush(ctx context.Context) syncOutcome {
	done := make(chan syncOutcome, 1)
	select {
	case r.syncNow <- done:
	case <-ctx.Done():
		return syncOutcome{err: ctx.Err()}
	}
	select {
	case out := <-done:
		return out
	case <-ctx.Done():
		return syncOutcome{err: ctx.Err()}
	}
}

// remoteStates reports whether another region has stored a state of one
// of the topic's subscriptions.
func (r *replicatedSubs) remoteStates() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, byRegion := range r.mu.states {
		for region := range byRegion {
			if region != r.t.svc.cfg.Region {
				return true
			}
		}
	}
	return false
}

// epochs returns the epochs the other regions' states of sub carry.
func (r *replicatedSubs) epochs(sub string) []replsub.Epoch {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []replsub.Epoch
	for region, st := range r.mu.states[sub] {
		if region == r.t.svc.cfg.Region {
			continue
		}
		if s, err := replsub.Decode(st.Value); err == nil {
			out = append(out, s.Epoch)
		}
	}
	return out
}

// takenAt returns when each other region took the state of sub last
// applied here.
func (r *replicatedSubs) takenAt(sub string) map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]time.Time{}
	for region, taken := range r.mu.taken[sub] {
		out[region] = time.UnixMilli(taken)
	}
	return out
}

func (r *replicatedSubs) run(ctx context.Context) {
	clock := r.t.svc.clock
	var last time.Time
	var took time.Duration // how long the last sync took
	for {
		var tail <-chan struct{}
		if r.remoteStates() {
			tail = r.t.ml.Changed()
		}
		var flushed chan syncOutcome // a flush's, which waits for this sync
		select {
		case <-r.wake:
		case <-tail:
		case flushed = <-r.syncNow:
		case <-ctx.Done():
			return
		}
		if wait := clock.Until(last.Add(r.syncGap(took))); wait > 0 && flushed == nil {
			timer := clock.NewTimer(wait)
			select {
			case <-timer.Chan():
			case flushed = <-r.syncNow:
				timer.Stop()
			case <-ctx.Done():
				timer.Stop()
				return
			}
		}
		last = clock.Now()
		r.syncing()
		err := r.sync(ctx)
		took = clock.Since(last)
		r.synced(err)
		if flushed != nil {
			flushed <- syncOutcome{behind: r.behind, err: err}
		}
		if err != nil && ctx.Err() == nil {
			// The next sync (an Interval on) tries again.
			r.t.svc.log.Warn("replicated subscriptions: sync failed", "topic", r.t.Name(), "err", err)
			r.poke()
		}
	}
}

// syncGap is the shortest time from the start of one sync to the start of
// the next, given how long the last one took: the Interval less that, so
// that a state is written within an Interval of the one before it being
// taken (the state a region's loss mid-write leaves behind is then at
// most an Interval old, as long as a sync takes no longer than it did),
// but never less than half an Interval, so that a slow global store is not
// written to without a pause.
func (r *replicatedSubs) syncGap(took time.Duration) time.Duration {
	return max(r.cfg.Interval-took, r.cfg.Interval/2)
}

// sync brings the index up to date, applies the other regions' states to
// the subscriptions here and writes the states of those that changed.
func (r *replicatedSubs) sync(ctx context.Context) error {
	region := r.t.svc.cfg.Region
	r.behind = false
	r.mu.Lock()
	states := make(map[string]map[string]global.SubscriptionState, len(r.mu.states))
	for sub, byRegion := range r.mu.states {
		states[sub] = maps.Clone(byRegion)
	}
	forgotten := maps.Clone(r.mu.forgotten)
	clear(r.mu.forgotten)
	expireBefore := r.mu.expireBefore
	r.mu.expireBefore = 0
	r.mu.Unlock()

	var errs []error
	for name := range forgotten {
		delete(r.written, name)
		tomb := replsub.State{Unsubscribed: true, TakenMillis: r.t.svc.clock.Now().UnixMilli()}
		if err := r.write(ctx, name, tomb, states[name][region].ModRevision); err != nil {
			errs = append(errs, fmt.Errorf("subscription %s: tombstone: %w", name, err))
		}
	}
	names := map[string]bool{}
	for _, s := range r.t.subscriptions() {
		if s.replicated() {
			names[s.name] = true
		}
	}
	for name, byRegion := range states {
		if own, ok := byRegion[region]; forgotten[name] || (ok && unsubscribed(own)) {
			continue // unsubscribed here: other regions' states do not bring it back
		}
		for from := range byRegion {
			if from != region {
				names[name] = true
			}
		}
	}
	if len(names) == 0 {
		// Nothing to carry: no reader holds the topic's entry cache back.
		r.closeIndex()
		return errors.Join(errs...)
	}
	if err := r.extendIndex(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if err := r.syncSubscription(ctx, name, states[name], expireBefore); err != nil {
			errs = append(errs, fmt.Errorf("subscription %s: %w", name, err))
		}
	}
	r.trimIndex()
	return errors.Join(errs...)
}

func unsubscribed(st global.SubscriptionState) bool {
	s, err := replsub.Decode(st.Value)
	return err == nil && s.Unsubscribed
}

// syncSubscription applies the other regions' states of name here (a
// higher epoch replaces, the same merges, a lower is stale), expires what
// was published before expireBefore (Unix ms; 0: nothing) and writes this
// region's state if it changed.
func (r *replicatedSubs) syncSubscription(ctx context.Context, name string, stored map[string]global.SubscriptionState, expireBefore int64) error {
	region := r.t.svc.cfg.Region
	s, err := r.replicatedSubscription(ctx, name)
	if err != nil || s == nil {
		return err
	}
	s.replMu.Lock()
	defer s.replMu.Unlock()
	epoch := s.epoch()
	var remote []replsub.State
	taken := map[string]int64{}
	for from, st := range stored {
		if from == region {
			continue
		}
		dec, err := replsub.Decode(st.Value)
		if err != nil {
			r.t.svc.log.Warn("replicated subscriptions: a state not readable; ignored", "topic", r.t.Name(),
				"subscription", name, "region", from, "err", err)
			continue
		}
		if !dec.Unsubscribed {
			remote = append(remote, dec)
			taken[from] = dec.TakenMillis
		}
	}
	if len(remote) > 0 {
		newest := slices.MaxFunc(remote, func(a, b replsub.State) int { return a.Epoch.Compare(b.Epoch) })
		if newest.Epoch.Compare(epoch) > 0 {
			if err := r.replace(ctx, s, newest); err != nil {
				return err
			}
			epoch = newest.Epoch
		}
		var applied []replsub.State
		for _, st := range remote {
			if st.Epoch == epoch {
				if err := s.applyRemote(r.index.Translate(st, s.cursor.MarkDeletePosition())); err != nil {
					return err
				}
				r.behind = r.behind || r.index.Behind(st)
				applied = append(applied, st)
			}
		}
		s.elsewhere.Store(&elsewhereAt{epoch: epoch, consumed: replsub.UnionOf(applied)})
	}
	if expireBefore > 0 {
		if err := s.expireEntries(r.index.PublishedBefore(expireBefore, s.cursor.MarkDeletePosition())); err != nil {
			return err
		}
	}
	// Only once applied: a state's time in stats says what is in effect.
	r.mu.Lock()
	r.mu.taken[name] = taken
	r.mu.Unlock()
	return r.export(ctx, s, epoch, stored[region])
}

// replicatedSubscription returns the subscription name, which another
// region has a state of or which is replicated here: created when missing,
// and turned on unless it was turned off here (the admin API's false, the
// cursor property "0"), which this region's choice keeps; nil then, and for
// a reader's subscription.
func (r *replicatedSubs) replicatedSubscription(ctx context.Context, name string) (*subscription, error) {
	s := r.t.subscriptionNamed(name)
	if s == nil {
		var err error
		s, err = r.t.subscription(ctx, name, defaultSubType, true, mledger.Earliest, nil)
		if err != nil {
			return nil, err
		}
	}
	if !s.cursor.Durable() || s.cursor.Properties()[replicatedProperty] == "0" {
		return nil, nil
	}
	if !s.replicated() {
		if err := s.setReplicated(true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// replace makes s's consumed set what st says, and takes st's epoch: a
// seek elsewhere. The index must cover the whole topic, so that every
// entry's fate is known; a trimmed one is read again first.
func (r *replicatedSubs) replace(ctx context.Context, s *subscription, st replsub.State) error {
	if !r.index.Covers(mledger.Position{Ledger: -1, Entry: -1}) {
		if err := r.rebuildIndex(ctx); err != nil {
			return err
		}
	}
	return s.replaceState(ctx, r.index.Translate(st, mledger.Position{Ledger: -1, Entry: -1}), st.Epoch)
}

// export writes s's state under epoch when it differs from the last one
// written (own: this region's stored state, if any).
func (r *replicatedSubs) export(ctx context.Context, s *subscription, epoch replsub.Epoch, own global.SubscriptionState) error {
	// The state holds every ack made before its TakenMillis, which is how
	// old a failover may find it. So the time is taken before the index is
	// brought up to date: an entry acked before then was stored before
	// then, and is in the index. The sync extended the index when it
	// began, but the other subscriptions' writes since then take a global
	// store round trip each, and an entry stored meanwhile and acked
	// before this export would otherwise be left out of a state taken
	// after its ack (seen in e2e's TestReplicatedSubscriptionFailover*:
	// a Shared subscription, written after a Key_Shared one, lost acks
	// made up to 93 ms before its TakenMillis).
	taken := r.t.svc.clock.Now().UnixMilli()
	if err := r.extendIndex(ctx); err != nil {
		return err
	}
	md := s.cursor.MarkDeletePosition()
	if !r.index.Covers(md) {
		// A seek here moved the subscription back over trimmed entries.
		if err := r.rebuildIndex(ctx); err != nil {
			return err
		}
	}
	st, cut := r.index.Export(md, s.consumed, epoch, r.cfg.MaxRanges)
	prev, ok := r.written[s.name]
	if !ok && own.ModRevision != 0 {
		// First sync since the load: what the previous owner wrote.
		prev, _ = replsub.Decode(own.Value)
		ok = true
	}
	if ok && prev.SameAcks(st) && !prev.Unsubscribed {
		r.written[s.name] = prev
		return nil
	}
	st.TakenMillis = taken
	if err := r.write(ctx, s.name, st, own.ModRevision); err != nil {
		return err
	}
	r.t.svc.metrics.replicatedStateWritten(cut)
	return nil
}

// write stores st as this region's state of sub, at the revision the watch
// last saw. A conflict (a write the watch has not shown yet, such as the
// previous owner's during a hand-off) is tried again at the next sync, once
// the watch has caught up.
func (r *replicatedSubs) write(ctx context.Context, sub string, st replsub.State, modRev int64) error {
	b, err := st.Encode()
	if err != nil {
		return err
	}
	rev, err := r.t.svc.gstore.WriteSubscriptionState(ctx, r.t.name, sub, r.t.svc.cfg.Region, b, modRev)
	if err != nil {
		return err
	}
	r.written[sub] = st
	r.changeStates([]global.SubscriptionState{{Subscription: sub, Region: r.t.svc.cfg.Region, Value: b, ModRevision: rev}})
	return nil
}

// forget has the next sync write the tombstone of sub, unsubscribed here,
// so that the other regions' states do not create it here again; a later
// subscribe with replicate_subscription_state takes it back (remember).
func (r *replicatedSubs) forget(sub string) {
	r.mu.Lock()
	r.mu.forgotten[sub] = true
	r.mu.Unlock()
	r.poke()
}

// remember undoes forget: sub is replicated here again.
func (r *replicatedSubs) remember(sub string) {
	r.mu.Lock()
	delete(r.mu.forgotten, sub)
	r.mu.Unlock()
	r.poke()
}

// extendIndex reads the entries appended since the last sync into the
// index; the first time, from the oldest entry stored.
func (r *replicatedSubs) extendIndex(ctx context.Context) error {
	if r.reader == nil {
		reader, err := r.t.ml.OpenNonDurableCursor(indexReader, mledger.Earliest)
		if err != nil {
			return fmt.Errorf("open the index's reader: %w", err)
		}
		r.reader, r.index = reader, replsub.NewIndex()
	}
	for {
		es, err := r.reader.Read(ctx, indexReadBatch)
		if err != nil {
			return fmt.Errorf("read entries for the index: %w", err)
		}
		if len(es) == 0 {
			return nil
		}
		for _, e := range es {
			id, published, err := r.identityOf(e)
			if err != nil {
				return fmt.Errorf("entry %v: %w", e.Position, err)
			}
			r.index.Append(e.Position, id, published)
		}
	}
}

// rebuildIndex reads the whole topic into a new index.
func (r *replicatedSubs) rebuildIndex(ctx context.Context) error {
	if err := r.reader.ResetAfter(mledger.Position{Ledger: -1, Entry: -1}); err != nil {
		return err
	}
	r.index = replsub.NewIndex()
	return r.extendIndex(ctx)
}

// closeIndex drops the index and closes its reader, if open.
func (r *replicatedSubs) closeIndex() {
	if r.reader != nil {
		_ = r.reader.Close(context.Background())
		r.reader, r.index = nil, nil
	}
}

// trimIndex drops the entries every replicated subscription has consumed
// (all of them when there is none).
func (r *replicatedSubs) trimIndex() {
	through, any := r.reader.ReadPosition(), false
	for _, s := range r.t.subscriptions() {
		if s.replicated() {
			if md := s.cursor.MarkDeletePosition(); !any || md.Less(through) {
				through, any = md, true
			}
		}
	}
	r.index.TrimThrough(through)
}

// identityOf names an entry by its origin (package replsub): a replicated
// entry by the source its replicator stamped on it, a local one by this
// region, the topic's incarnation and its BrokerEntryMetadata index. It
// returns the entry's publish time (Unix ms) as well.
func (r *replicatedSubs) identityOf(e mledger.Entry) (id replsub.Identity, published int64, err error) {
	_, msg, err := e.Split()
	if err != nil {
		return replsub.Identity{}, 0, err
	}
	md, payload, err := wire.DecodeMessage(msg)
	if err != nil {
		return replsub.Identity{}, 0, err
	}
	published = int64(md.GetPublishTime())
	if from := md.GetReplicatedFrom(); from != "" {
		src, ok, err := wire.ReplicationSourceOf(md)
		if err != nil || !ok {
			return replsub.Identity{}, 0, fmt.Errorf("replicated from %s without a readable source: %v", from, err)
		}
		return replsub.Identity{Origin: replsub.Origin{Region: from, Incarnation: src.Incarnation}, First: src.First, Last: src.Last}, published, nil
	}
	bem, err := e.Metadata()
	if err != nil {
		return replsub.Identity{}, 0, err
	}
	last := int64(bem.GetIndex())
	n := int64(wire.BatchMessages(md, len(payload)))
	return replsub.Identity{Origin: replsub.Origin{Region: r.t.svc.cfg.Region, Incarnation: r.t.ml.Incarnation()},
		First: last - n + 1, Last: last}, published, nil
}

// defaultSubType is the type of a subscription created with no consumer
// (loaded from its cursor, or created by another region's state): the
// first consumer to attach sets the real one.
const defaultSubType = pb.CommandSubscribe_Exclusive

// ---- the subscription's side ----

// replicated reports whether the subscription's state travels to the
// other regions.
func (s *subscription) replicated() bool { return s.isReplicated.Load() }

// setReplicated turns replication of the subscription's state on or off,
// persisted with its cursor.
func (s *subscription) setReplicated(on bool) error {
	if !s.cursor.Durable() {
		return fmt.Errorf("%w: subscription %s is not durable: a reader's position is not replicated", wire.ErrNotAllowed, s.name)
	}
	v := "0"
	if on {
		v = "1"
	}
	if s.cursor.Properties()[replicatedProperty] == v {
		return nil
	}
	if err := s.cursor.SetProperty(replicatedProperty, v); err != nil {
		return err
	}
	s.isReplicated.Store(on)
	if rs := s.topic.rs; rs != nil && on {
		rs.remember(s.name)
	}
	return nil
}

// replicatedChanged tells the topic's replicated subscriptions that this
// one's consumed set may have changed.
func (s *subscription) replicatedChanged() {
	if rs := s.topic.rs; rs != nil && s.replicated() {
		rs.changed()
	}
}

// epoch returns the seek the subscription's state descends from.
func (s *subscription) epoch() replsub.Epoch {
	e, err := replsub.ParseEpoch(s.cursor.Properties()[epochProperty])
	if err != nil {
		s.topic.svc.log.Warn("replicated subscriptions: epoch not readable; taken as none", "topic", s.topic.Name(),
			"subscription", s.name, "err", err)
	}
	return e
}

// sought takes a new epoch after a seek here, above every one known, so
// that the seek replaces the state in the other regions rather than being
// merged away. The seek holds replMu.
func (s *subscription) sought() error {
	rs := s.topic.rs
	if rs == nil || !s.replicated() {
		return nil
	}
	next := s.epoch().Next(s.topic.svc.cfg.Region, rs.epochs(s.name)...)
	if err := s.cursor.SetProperty(epochProperty, next.String()); err != nil {
		return err
	}
	rs.poke()
	return nil
}

// consumed is the replsub.Consumed of this subscription.
func (s *subscription) consumed(p mledger.Position) (whole bool, remaining []int64) {
	if s.cursor.IsAcked(p) {
		return true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return false, slices.Clone(s.mu.partial[p])
}

// elsewhereAt is what the other regions' states of a subscription
// consumed, under epoch.
type elsewhereAt struct {
	epoch    replsub.Epoch
	consumed replsub.Elsewhere
}

// consumedElsewhere splits entries, just read for dispatch, into those to
// deliver and the positions of those another region's state, as the last
// sync applied it, names consumed (replsub.Elsewhere). The sync acks only
// the entries that were here when it ran: one that arrives after it, such
// as a message replicated late from a region that consumed it, would
// otherwise be delivered before the next sync acked it. Nothing is taken
// out under another epoch than the subscription's (a seek since), or
// from a subscription that is not replicated.
func (s *subscription) consumedElsewhere(entries []mledger.Entry) (deliver []mledger.Entry, consumed []mledger.Position) {
	rs, at := s.topic.rs, s.elsewhere.Load()
	if rs == nil || at == nil || len(at.consumed) == 0 || !s.replicated() || at.epoch != s.epoch() {
		return entries, nil
	}
	deliver = make([]mledger.Entry, 0, len(entries))
	for _, e := range entries {
		if id, _, err := rs.identityOf(e); err == nil && at.consumed.Covers(id) {
			consumed = append(consumed, e.Position)
			continue
		}
		deliver = append(deliver, e)
	}
	return deliver, consumed
}

// expireEntries consumes the entries at ps, a replicated subscription's
// expiry by publish time (replicatedSubs.expire), and counts those it
// consumed as expired.
func (s *subscription) expireEntries(ps []mledger.Position) error {
	var n int
	var err error
	s.do(func() { n, err = s.mu.ackWhole(s.cursor, ps) })
	s.expired.Add(int64(n))
	return err
}

// applyRemote acks what another region's state says was consumed: whole
// entries in the cursor, batches in part in the ack sets that delivery
// sends along. Nothing is un-acked (a union).
func (s *subscription) applyRemote(applies []replsub.Apply) error {
	var err error
	s.do(func() { err = s.mu.applyRemote(s.cursor, applies) })
	return err
}

// replaceState makes the subscription's consumed set exactly applies (a
// translation of the whole topic) under epoch: another region's seek. Its
// consumers are disconnected first, as for a seek here. The sync holds
// replMu.
func (s *subscription) replaceState(ctx context.Context, applies []replsub.Apply, epoch replsub.Epoch) error {
	err := s.rewrite(ctx, func() error {
		if err := s.cursor.ResetAfter(mledger.Position{Ledger: -1, Entry: -1}); err != nil {
			return err
		}
		return s.applyRemote(applies)
	})
	if err != nil {
		return err
	}
	return s.cursor.SetProperty(epochProperty, epoch.String())
}
