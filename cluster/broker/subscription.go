package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// subscription is a named cursor on a topic and the consumers attached to
// it, with one dispatcher goroutine that owns its delivery state
// (dispatchState: consumers, permits, pending acks, redelivery, the
// delayed heap) and hands entries out according to the subscription type.
//
// Ownership. The dispatcher goroutine (run) is the only writer of mu's
// state, as the ledger writer is of its ledger. Adding and removing a
// consumer, FLOW, ACK, REDELIVER, seek and stop are requests to it (do),
// answered once applied; it takes mu for each step, so that stats and load
// samples may read the state under mu from other goroutines. It never
// waits on I/O: a round's storage reads run in a goroutine of their own
// (read), one at a time, whose result comes back to run, and a consumer
// whose connection's message queue is full is skipped (its Key_Shared keys
// wait for it) until the writer wakes the dispatcher as the queue drains
// (msgQueue). Once the dispatcher has stopped (stop), a request runs on its
// caller's goroutine under mu: there is no round left to order it with.
//
// Order. A round plans, reads and sends as a whole: run starts no other
// round, and a seek waits for the round under way to be sent (pause), so
// no message of before a seek is sent after its SUCCESS. Requests that come
// while a round reads apply at once; what a round assigns after its read
// reads the state as it is then (a consumer that left meanwhile gets
// nothing, its entries are in replay).
//
// Time (when a delayed entry falls due, when a failed read is retried) is
// the Service's injected clock.
type subscription struct {
	topic  *Topic
	name   string
	cursor *mledger.Cursor
	cfg    DispatchConfig
	clock  clockwork.Clock

	requests chan request
	wake     chan struct{} // cap 1: "permits, consumers or replay changed"
	ctx      context.Context
	cancel   context.CancelFunc
	// stopped is closed once run serves no more requests (do then runs
	// them on its caller); done once run and its round's read have ended.
	stopped chan struct{}
	done    chan struct{}

	// replMu serialises what changes a replicated subscription's epoch
	// with the sync that reads it (replsubs.go): a seek here resets the
	// cursor and takes a new epoch under it, so no sync merges another
	// region's older state into the reset cursor in between. Every rewrite
	// holds it, so rewrites never overlap.
	replMu  sync.Mutex
	seeking atomic.Bool // a seek is disconnecting the consumers
	out     counters    // delivered messages and bytes
	// isReplicated mirrors the cursor's replicatedProperty (replsubs.go).
	isReplicated atomic.Bool
	// elsewhere is what the other regions' states consumed, as the last
	// sync applied them, under the epoch they share with this one
	// (replsubs.go, consumedElsewhere); nil before any.
	elsewhere atomic.Pointer[elsewhereAt]
	// ignoredAcks counts the acked ids this subscription ignored since the
	// topic was loaded: positions never delivered to the consumer that
	// acked them (see ack).
	ignoredAcks atomic.Int64
	// dispatchRate is the subscription's own dispatch rate (its topic's
	// subscriptionDispatchRate, dispatchrate.go).
	dispatchRate dispatchLimiter
	// lastActive is when the subscription last had a consumer (Unix ms):
	// its creation or load, or its last consumer's leaving. Subscription
	// expiry goes by it (expiry.go).
	lastActive atomic.Int64
	// expired counts the entries its cursor skipped by message expiry
	// (expiry.go) since the topic was loaded.
	expired atomic.Int64
	// acked counts the message ids its consumers acked, and redelivered
	// the messages delivered again, since the topic was loaded (Pulsar's
	// ack and redeliver rates are their rates).
	acked, redelivered atomic.Int64

	// mu guards the delivery state. Only the dispatcher goroutine writes
	// it (or, once the dispatcher has stopped, a request's caller), always
	// holding mu; other goroutines only read it, under mu.
	mu struct {
		sync.Mutex
		dispatchState
		// paused holds rounds back while a rewrite moves the cursor.
		paused bool
		// reading: a round's read is under way (run's).
		reading bool
		// idle are the pauses waiting for the round under way to end.
		idle []chan struct{}
	}
}

// request is one change of the delivery state, run by the dispatcher with
// mu held; done is closed once it ran.
type request struct {
	apply func()
	done  chan struct{}
}

func newSubscription(t *Topic, name string, kind pb.CommandSubscribe_SubType, cur *mledger.Cursor) *subscription {
	s := &subscription{topic: t, name: name, cursor: cur, cfg: t.svc.cfg.Dispatch, clock: t.svc.clock,
		requests: make(chan request), wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.init(kind, t.name.Partition, s.cfg, t.svc.log.With("topic", t.Name(), "subscription", name),
		func(c *consumer, active bool) { c.c.send(activeConsumerChange(c.id, active)) }, s.poke)
	s.mu.rates = t.subscriptionRates(&s.dispatchRate)
	s.mu.unackedLimit = &t.maxUnackedOnSubscription
	s.mu.delayedOff = &t.delayedDeliveryOff
	s.lastActive.Store(s.clock.Now().UnixMilli())
	s.isReplicated.Store(cur.Durable() && cur.Properties()[replicatedProperty] == "1")
	t.svc.wg.Add(1)
	go func() {
		defer t.svc.wg.Done()
		defer close(s.done)
		s.run()
	}()
	return s
}

func (s *subscription) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// do has the dispatcher apply f to the delivery state, and waits for it.
// f must not wait: the dispatcher serves everyone.
func (s *subscription) do(f func()) {
	req := request{apply: f, done: make(chan struct{})}
	select {
	case s.requests <- req:
		<-req.done
	case <-s.stopped:
		s.mu.Lock()
		defer s.mu.Unlock()
		f()
	}
}

// subType is the subscription's type, set by its first consumer.
func (s *subscription) subType() pb.CommandSubscribe_SubType {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.kind
}

// ---- consumers ----

// addConsumer attaches c, checking the subscription type's rules and its
// limit of maxConsumers (0: none).
func (s *subscription) addConsumer(c *consumer, kind pb.CommandSubscribe_SubType, ksm *pb.KeySharedMeta, maxConsumers int) error {
	var err error
	s.do(func() { err = s.mu.addConsumer(c, kind, ksm, maxConsumers, s.name, s.cursor.ReadPosition()) })
	return err
}

// removeConsumer detaches c and hands its unacked entries to the others.
func (s *subscription) removeConsumer(c *consumer) (last bool) {
	s.do(func() { last = s.mu.removeConsumer(c) })
	return last
}

func activeConsumerChange(id uint64, active bool) *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(),
		ActiveConsumerChange: pb.CommandActiveConsumerChange_builder{ConsumerId: ptr(id), IsActive: ptr(active)}.Build()}.Build()
}

// consumerList returns a snapshot of the consumers.
func (s *subscription) consumerList() []*consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mu.consumers)
}

// consumerConns returns the connections of the subscription's consumers.
func (s *subscription) consumerConns() []*conn {
	var out []*conn
	for _, c := range s.consumerList() {
		out = append(out, c.c)
	}
	return out
}

func (s *subscription) consumerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.consumers)
}

// flow adds permits (FLOW), counted in messages.
func (s *subscription) flow(c *consumer, n uint32) {
	c.lastFlow.Store(s.clock.Now().UnixMilli())
	s.do(func() { s.mu.flow(c, n) })
}

// ---- acks ----

// ack applies an ACK's ids, each only if it is c's to ack
// (dispatchState.ackable); the others are ignored, counted in ignoredAcks,
// and reported as ErrAckNotDelivered. The rest of the ACK still applies.
// A consumer that has left still acks what it was given: its entries wait
// in replay, and an ack spares their redelivery.
//
// Why ignore rather than apply: a message id is only (ledger, entry), and
// the same id can name another entry in another region (ledgers made
// before ids were unique across regions, see cluster/ledger's LedgerID).
// After a failover a client may still hold acks of the old region's ids:
// its ack grouping waits up to 100 ms, and its application acks messages
// it received before the move. Applying them here would ack entries the
// client was never given, and those would be lost to it. Ignoring one
// costs at most a redelivery of a message the client was really given,
// which at-least-once allows.
func (s *subscription) ack(c *consumer, cumulative bool, ids []*pb.MessageIdData) error {
	c.lastAck.Store(s.clock.Now().UnixMilli())
	var ignored int64
	var err error
	s.do(func() { ignored, err = s.mu.ack(s.cursor, c, cumulative, ids) })
	s.ignoredAcks.Add(ignored)
	s.acked.Add(int64(len(ids)) - ignored)
	s.replicatedChanged()
	return err
}

// ---- redelivery ----

// redeliver hands back c's unacked entries (all, or those in ids) for
// delivery again, counting a redelivery for each.
func (s *subscription) redeliver(c *consumer, ids []*pb.MessageIdData) {
	var only map[mledger.Position]bool
	if len(ids) > 0 {
		only = make(map[mledger.Position]bool, len(ids))
		for _, id := range ids {
			only[mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}] = true
		}
	}
	s.do(func() { s.mu.redeliver(c, only, true) })
}

// resubscribed starts c afresh for a SUBSCRIBE that its client sent again
// while c stayed attached. Both reference clients empty their receive
// queue and reset their permits before every SUBSCRIBE, and send FLOW once
// it succeeds; so whatever c was sent and has not acked is gone from the
// client, and would stay pending here until c leaves (pulsar-client-go
// v0.19.0 reconnects twice when a CLOSE_CONSUMER and its connection's
// close both reach it, and its second SUBSCRIBE meets the consumer its
// first one attached). Its entries go back for redelivery and its permits
// to none; a round under way assigns after this, with no permits for c.
func (s *subscription) resubscribed(c *consumer) {
	s.do(func() { s.mu.resubscribed(c) })
}

// dropPending forgets what was delivered before the cursor moved under the
// subscription (skip, expiry), and wakes the dispatcher.
func (s *subscription) dropPending() {
	s.do(func() { s.mu.dropConsumed(s.cursor, s.cursor.MarkDeletePosition()) })
}

// ---- dispatch ----

// run is the dispatcher goroutine: it serves requests, starts a round when
// woken and none is under way, and finishes the round when its read comes
// back.
func (s *subscription) run() {
	var (
		woken    = true // a round may progress: start one
		readDone = make(chan roundRead, 1)
		changed  <-chan struct{} // the managed ledger's, taken before the last round
		gate     <-chan struct{} // the failover gate's, likewise
		retryAt  time.Time       // when a failed read is retried (zero: none)
		timer    clockwork.Timer // fires at timerAt, the earlier of retryAt and the next delayed entry's time
		timerAt  time.Time
		retry    = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(s.cfg.ReadRetryInitial), backoff.WithMaxInterval(s.cfg.ReadRetryMax),
			backoff.WithMultiplier(2), backoff.WithMaxElapsedTime(0), backoff.WithClockProvider(s.clock))
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if woken && !s.reading() {
			woken = false
			changed = s.topic.ml.Changed()
			gate = s.topic.svc.failover.gateOpened()
			if plan, ok := s.plan(); ok {
				retryAt = time.Time{}
				go s.read(plan, readDone)
			}
		}
		if next := earliest(s.wakeAt(), retryAt); !next.Equal(timerAt) {
			if timer != nil {
				timer.Stop()
				timer = nil
			}
			if timerAt = next; !next.IsZero() {
				timer = s.clock.NewTimer(next.Sub(s.clock.Now()))
			}
		}
		var fire <-chan time.Time
		if timer != nil {
			fire = timer.Chan()
		}
		select {
		case req := <-s.requests:
			s.mu.Lock()
			req.apply()
			s.mu.Unlock()
			close(req.done)
		case r := <-readDone:
			progressed, failed := s.finish(r)
			if failed {
				retryAt = s.clock.Now().Add(retry.NextBackOff())
			} else {
				retry.Reset()
			}
			woken = woken || progressed
			s.resumeIdle()
		case <-changed:
			woken = true
		case <-gate:
			woken = true
		case <-s.wake:
			woken = true
		case <-fire:
			timer, timerAt, retryAt, woken = nil, time.Time{}, time.Time{}, true
		case <-s.ctx.Done():
			// Requests no longer wait for the dispatcher, whatever the
			// read under way takes to end.
			close(s.stopped)
			if s.reading() {
				<-readDone // cancelled with s.ctx; stopped, nothing is sent
				s.mu.Lock()
				s.mu.reading = false
				s.mu.Unlock()
				s.resumeIdle()
			}
			return
		}
	}
}

// plan starts a round, unless the subscription is paused or closed,
// nobody can take anything, or the failover gate is shut: a replicated
// subscription of a namespace with automatic failover dispatches only
// where and while Topic.mayDispatchReplicated allows, and run waits for
// the gate to open.
func (s *subscription) plan() (roundPlan, bool) {
	if s.isReplicated.Load() && !s.topic.mayDispatchReplicated() {
		return roundPlan{}, false
	}
	// Read before mu (the package doc's lock order); a stale value only
	// holds a recently joined consumer a little longer.
	markDeleted := s.cursor.MarkDeletePosition()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.paused {
		return roundPlan{}, false
	}
	p, ok := s.mu.plan(s.clock.Now(), markDeleted)
	s.mu.reading = ok
	return p, ok
}

// reading reports whether a round's read is under way. Only run asks.
func (s *subscription) reading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.reading
}

// roundRead is what a round's read brought back.
type roundRead struct {
	plan    roundPlan
	entries []mledger.Entry
	fresh   int                // how many of entries are new (not replayed)
	unread  []mledger.Position // replay entries not read, for a later round
	// consumedElsewhere are new entries that another region's state
	// names consumed: acked, not delivered (replsubs.go).
	consumedElsewhere []mledger.Position
	err               error
}

// read reads a round's entries from storage, off the dispatcher's
// goroutine: the replay entries first, then the new ones. A replay read
// that fails keeps the rest for a later round rather than lose them, and,
// for a type whose one consumer takes entries in order, reads no new ones.
//
// A read that failed is retried (run) after a wait that grows
// exponentially from Dispatch.ReadRetryInitial to Dispatch.ReadRetryMax,
// with jitter, so that the subscriptions of a bookie in trouble do not
// retry in step. Nothing else is sure to wake the dispatcher: on an idle
// topic no entry is appended, and a client sends FLOW only once it has
// taken half of what it asked for, so a consumer (a reader from the
// earliest position, say) that got nothing would wait for ever.
func (s *subscription) read(p roundPlan, done chan<- roundRead) {
	r := roundRead{plan: p}
	readNew := p.readNew
	for i, q := range p.replay {
		if s.cursor.IsAcked(q) {
			continue
		}
		es, err := s.topic.ml.ReadAt(s.ctx, q, 1)
		if errors.Is(err, mledger.ErrInvalidPosition) {
			continue // trimmed or deleted meanwhile: nothing to redeliver
		}
		if err != nil {
			r.err, r.unread = err, p.replay[i:]
			readNew = readNew && !p.inOrder
			break
		}
		r.entries = append(r.entries, es...)
	}
	if readNew {
		es, err := s.cursor.Read(s.ctx, p.budget)
		if err != nil {
			r.err = err
		}
		r.fresh = len(es)
		es, r.consumedElsewhere = s.consumedElsewhere(es)
		r.entries = append(r.entries, es...)
	}
	if r.err != nil && s.ctx.Err() == nil {
		s.topic.svc.log.Warn("dispatch read failed; retrying", "topic", s.topic.Name(), "subscription", s.name, "err", r.err)
	}
	done <- r
}

// finish ends a round with what its read brought: it assigns and sends
// the entries. It reports whether anything moved, and whether the read
// failed (read logged it).
func (s *subscription) finish(r roundRead) (progressed, failed bool) {
	s.topic.svc.metrics.dispatchRead(len(r.entries))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reading = false
	if _, err := s.mu.ackWhole(s.cursor, r.consumedElsewhere); err != nil {
		s.topic.svc.log.Warn("replicated subscription: acking entries consumed in another region", "topic", s.topic.Name(),
			"subscription", s.name, "err", err)
	}
	entries := s.mu.endRound(r.plan, r.unread, r.entries)
	var sent []delivery
	if len(entries) > 0 && !s.mu.closed {
		sent = s.sendLocked(s.mu.assign(entries, r.plan.now))
	}
	s.mu.settle(r.plan, s.clock.Now(), sent)
	return len(sent) > 0 || r.fresh > 0, r.err != nil
}

// resumeIdle answers the pauses that waited for the round that just
// ended.
func (s *subscription) resumeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.mu.idle {
		close(ch)
	}
	s.mu.idle = nil
}

// wakeAt is when the dispatcher starts a round unasked (zero: never).
func (s *subscription) wakeAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.wakeAt()
}

// earliest is the earlier of two times, the zero time standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// sendLocked queues a round's deliveries (dispatchState.send), counts and traces
// those sent, and returns them. mu is held.
func (s *subscription) sendLocked(out []delivery) []delivery {
	sent := s.mu.send(out)
	now := s.clock.Now().UnixMilli()
	for _, d := range sent {
		d.c.lastConsumed.Store(now)
		s.traceDeliver(d)
		d.c.out.add(d.e.size, len(d.e.msg))
		s.out.add(d.e.size, len(d.e.msg))
		if d.redelivered > 0 {
			s.redelivered.Add(int64(d.e.size))
		}
	}
	return sent
}

// ---- seek, unsubscribe, close ----

// seek moves the cursor (to after a message id, or to a time) after
// disconnecting every consumer, which then reconnects (DESIGN §5: the
// client resumes only after CLOSE_CONSUMER precedes the SEEK's SUCCESS).
//
// A reader's (non-durable) subscription, which otherwise ends with its
// consumer, outlives this disconnection: the reader subscribes again and
// finds it at the seek target.
//
// A replicated subscription takes a new epoch, so that the seek replaces its
// state in the other regions (replsubs.go).
func (s *subscription) seek(ctx context.Context, id *pb.MessageIdData, publishTime *uint64) error {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	err := s.rewrite(ctx, func() error {
		if publishTime != nil {
			_, err := s.cursor.ResetToTime(ctx, int64(*publishTime))
			return err
		}
		if isEarliestOrLatest(id) {
			if int64(id.GetLedgerId()) < 0 {
				return s.cursor.ResetAfter(mledger.Position{Ledger: -1, Entry: -1})
			}
			return s.cursor.ResetAfter(s.topic.ml.LastConfirmed())
		}
		return s.cursor.ResetAfter(mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId()) - 1})
	})
	if err != nil {
		return err
	}
	return s.sought()
}

// rewrite changes the cursor by move with no dispatch round in between,
// after disconnecting every consumer and dropping what was delivered,
// held for redelivery or delayed: a seek here, or another region's
// replacing a replicated subscription's state. The dispatcher is paused
// meanwhile, and move runs on the caller's goroutine: its storage reads
// (a seek by time) hold up no request. The caller holds replMu.
func (s *subscription) rewrite(ctx context.Context, move func() error) error {
	s.seeking.Store(true)
	defer s.seeking.Store(false)
	if err := s.pause(ctx); err != nil {
		return err
	}
	defer s.do(func() { s.mu.paused = false; s.poke() })
	for _, c := range s.consumerList() {
		c.disconnect(ctx)
	}
	s.do(s.mu.rewind)
	return move()
}

// pause stops the dispatcher's rounds, and waits until the round under
// way, if any, has sent what it read, or ctx ends (then the dispatcher is
// left running).
func (s *subscription) pause(ctx context.Context) error {
	idle := make(chan struct{})
	s.do(func() {
		s.mu.paused = true
		if s.mu.reading {
			s.mu.idle = append(s.mu.idle, idle)
		} else {
			close(idle)
		}
	})
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		s.do(func() { s.mu.paused = false; s.poke() })
		return fmt.Errorf("%w: subscription %s: a dispatch round still reading: %v", wire.ErrServiceNotReady, s.name, ctx.Err())
	}
}

// unsubscribe deletes the subscription; only its one consumer (or none)
// may ask.
func (s *subscription) unsubscribe(ctx context.Context, c *consumer) error {
	others := slices.ContainsFunc(s.consumerList(), func(o *consumer) bool { return o != c })
	if others {
		return fmt.Errorf("%w: subscription %s has other connected consumers", wire.ErrConsumerBusy, s.name)
	}
	replicated := s.replicated()
	s.topic.forgetSubscription(s)
	s.close(ctx, false)
	if s.cursor.Durable() {
		if err := s.topic.ml.DeleteCursor(ctx, s.name); err != nil {
			return fmt.Errorf("%w: delete subscription %s: %v", wire.ErrMetadata, s.name, err)
		}
	}
	if rs := s.topic.rs; rs != nil && replicated {
		rs.forget(s.name)
	}
	return nil
}

// close stops the dispatcher and closes the cursor; with disconnect, the
// consumers are told to reconnect (CLOSE_CONSUMER). It returns by ctx's
// deadline: a round never waits on a consumer, and telling one to go only
// queues a frame. A dispatcher still in a storage read at the deadline
// ends on its own (its context is cancelled), owned by the Service.
func (s *subscription) close(ctx context.Context, disconnect bool) { s.closeTo(ctx, disconnect, nil) }

// closeTo is close, with the consumers told where the topic moved (dest,
// when known). A subscription a hand-off has stopped (its dispatcher ended,
// its consumers left attached, its cursor closed with the managed ledger)
// only has its consumers disconnected.
func (s *subscription) closeTo(ctx context.Context, disconnect bool, dest *loadmgr.Owner) {
	wasStopped, consumers := s.stop(ctx)
	if disconnect {
		for _, c := range consumers {
			c.disconnectTo(ctx, dest)
		}
	}
	if !wasStopped {
		_ = s.cursor.Close(ctx)
	}
}

// stop ends dispatch, within ctx: no consumer is added and nothing is
// delivered from here on, while acks still reach the cursor (applied by
// their callers, see do). It returns whether the subscription was already
// stopped, and its consumers.
func (s *subscription) stop(ctx context.Context) (wasStopped bool, consumers []*consumer) {
	s.do(func() {
		wasStopped = s.mu.closed
		s.mu.closed = true
		consumers = slices.Clone(s.mu.consumers)
	})
	if !wasStopped {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.topic.svc.log.Warn("closing subscription: dispatcher still reading at the deadline",
				"topic", s.topic.Name(), "subscription", s.name)
		}
	}
	return wasStopped, consumers
}
