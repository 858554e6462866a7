package broker

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// subscription is a named cursor on a topic and the consumers attached to
// it, with one dispatcher goroutine that reads entries and hands them out
// according to the subscription type.
//
// Every type shares one machinery, and only the choice of consumer differs:
//   - Exclusive and Failover deliver to one active consumer (Failover picks
//     it by priority, then name, offset by the partition index, and tells
//     every consumer with ACTIVE_CONSUMER_CHANGE);
//   - Shared deliver round robin to consumers with permits;
//   - Key_Shared route by key hash (keySharedSelector), keeping each key's
//     order: an entry whose key has an earlier entry waiting is held too,
//     and a consumer that joins receives nothing read after its joining
//     until everything read before it is acked (Pulsar's recently-joined
//     rule).
//
// State (mu): the consumers and their permits, the entries delivered and
// not yet acked (pending, per consumer, so they can be redelivered when the
// consumer leaves or asks), the entries to deliver again before new ones
// (replay), redelivery counts, and delayed entries (deliver_at_time, on
// Shared and Key_Shared). The cursor holds what is acked.
//
// roundMu serialises dispatch rounds with seeks: a round reads and sends
// as a whole, so no message of before a seek is sent after its SUCCESS. A
// round never waits on a consumer: a consumer whose connection's message
// queue is full is skipped (its Key_Shared keys wait for it), and the
// writer wakes the dispatcher when the queue drains (msgQueue).
//
// Time (when a delayed entry falls due) is the Service's injected clock.
type subscription struct {
	topic  *Topic
	name   string
	kind   pb.CommandSubscribe_SubType
	cursor *mledger.Cursor
	cfg    DispatchConfig
	clock  clockwork.Clock

	wake   chan struct{} // cap 1: "permits, consumers or replay changed"
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	roundMu sync.Mutex
	// replMu serialises what changes a replicated subscription's epoch
	// with the sync that reads it (replsubs.go): a seek here resets the
	// cursor and takes a new epoch under it, so no sync merges another
	// region's older state into the reset cursor in between. Taken before
	// roundMu.
	replMu  sync.Mutex
	seeking atomic.Bool // a seek is disconnecting the consumers
	out     counters    // delivered messages and bytes
	// isReplicated mirrors the cursor's replicatedProperty (replsubs.go).
	isReplicated atomic.Bool
	// ignoredAcks counts the acked ids this subscription ignored since the
	// topic was loaded: positions never delivered to the consumer that
	// acked them (see ack).
	ignoredAcks atomic.Int64
	// lastActive is when the subscription last had a consumer (Unix ms):
	// its creation or load, or its last consumer's leaving. Subscription
	// expiry goes by it (expiry.go).
	lastActive atomic.Int64
	// expired counts the entries its cursor skipped by message expiry
	// (expiry.go) since the topic was loaded.
	expired atomic.Int64

	// readRetry is the wait before the next retry of a storage read that
	// failed, 0 while reads succeed (see retryReadInRound). Guarded by
	// roundMu.
	readRetry time.Duration

	mu struct {
		sync.Mutex
		closed    bool
		consumers []*consumer // Failover: sorted by (priority, name)
		active    *consumer   // Exclusive and Failover
		rr        int         // Shared: next consumer to try
		keys      keySharedSelector
		autoSplit bool
		pending   map[mledger.Position]*pendingEntry
		replay    map[mledger.Position]uint32 // value: key hash (Key_Shared)
		// replayKeys counts replay entries per key hash (Key_Shared): a new
		// entry of a waiting key waits behind them.
		replayKeys   map[uint32]int
		redeliveries map[mledger.Position]uint32
		// partial holds the ack sets of batches acked in part (bit i set:
		// message i not acked yet); a redelivery carries it, so the client
		// skips what was acked. Kept in memory only: after a reload the
		// whole batch is delivered again.
		partial map[mledger.Position][]int64
		delayed delayedQueue
		// msgsPerEntry is the moving average of the messages in the
		// entries dispatched (0 before the first), by which a round turns
		// permits into entries to read.
		msgsPerEntry float64
	}
}

// pendingEntry is an entry delivered and not wholly acked.
type pendingEntry struct {
	c    *consumer
	size int
	hash uint32 // Key_Shared key hash
}

func newSubscription(t *Topic, name string, kind pb.CommandSubscribe_SubType, cur *mledger.Cursor) *subscription {
	s := &subscription{topic: t, name: name, kind: kind, cursor: cur, cfg: t.svc.cfg.Dispatch,
		clock: t.svc.clock, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.lastActive.Store(s.clock.Now().UnixMilli())
	s.mu.pending = make(map[mledger.Position]*pendingEntry)
	s.mu.replay = make(map[mledger.Position]uint32)
	s.mu.replayKeys = make(map[uint32]int)
	s.mu.redeliveries = make(map[mledger.Position]uint32)
	s.mu.partial = make(map[mledger.Position][]int64)
	s.isReplicated.Store(cur.Durable() && cur.Properties()[replicatedProperty] == "1")
	t.svc.wg.Add(1)
	go func() {
		defer t.svc.wg.Done()
		defer close(s.done)
		s.run()
	}()
	return s
}

func (s *subscription) shared() bool {
	return s.kind == pb.CommandSubscribe_Shared || s.kind == pb.CommandSubscribe_Key_Shared
}

func (s *subscription) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ---- consumers ----

// addConsumer attaches c, checking the subscription type's rules and its
// limit of maxConsumers (0: none).
func (s *subscription) addConsumer(c *consumer, kind pb.CommandSubscribe_SubType, ksm *pb.KeySharedMeta, maxConsumers int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("%w: subscription %s is closing", wire.ErrServiceNotReady, s.name)
	}
	if maxConsumers > 0 && len(s.mu.consumers) >= maxConsumers {
		return fmt.Errorf("%w: subscription %s reached max consumers limit (%d)", wire.ErrConsumerBusy, s.name, maxConsumers)
	}
	if len(s.mu.consumers) > 0 && kind != s.kind {
		return fmt.Errorf("%w: subscription %s is of type %v, not %v", wire.ErrConsumerBusy, s.name, s.kind, kind)
	}
	if len(s.mu.consumers) == 0 {
		s.kind = kind
	}
	switch s.kind {
	case pb.CommandSubscribe_Exclusive:
		if len(s.mu.consumers) > 0 {
			return fmt.Errorf("%w: exclusive consumer is already connected to subscription %s", wire.ErrConsumerBusy, s.name)
		}
	case pb.CommandSubscribe_Key_Shared:
		var declared [][2]uint32
		auto := ksm == nil || ksm.GetKeySharedMode() == pb.KeySharedMode_AUTO_SPLIT
		if !auto {
			for _, r := range ksm.GetHashRanges() {
				declared = append(declared, [2]uint32{uint32(r.GetStart()), uint32(r.GetEnd())})
			}
			if len(declared) == 0 {
				return fmt.Errorf("%w: a STICKY Key_Shared consumer must declare hash ranges", wire.ErrConsumerAssign)
			}
		}
		if len(s.mu.consumers) > 0 && auto != s.mu.autoSplit {
			return fmt.Errorf("%w: subscription %s mixes AUTO_SPLIT and STICKY consumers", wire.ErrConsumerAssign, s.name)
		}
		if err := s.mu.keys.add(c, declared); err != nil {
			return err
		}
		s.mu.autoSplit = auto
		if len(s.mu.consumers) > 0 {
			// Recently joined: hold what is read after now until
			// everything read so far is acked. Read under mu (as the
			// package doc's lock order allows), so that no
			// round assigns between the reading and the joining.
			rp := s.cursor.ReadPosition()
			c.joinedAfter = &rp
		}
	}
	s.mu.consumers = append(s.mu.consumers, c)
	s.electLocked()
	s.poke()
	return nil
}

// removeConsumer detaches c and hands its unacked entries to the others.
func (s *subscription) removeConsumer(c *consumer) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.mu.consumers, c)
	if i < 0 {
		return false
	}
	s.mu.consumers = slices.Delete(s.mu.consumers, i, i+1)
	if s.kind == pb.CommandSubscribe_Key_Shared {
		s.mu.keys.remove(c, s.mu.autoSplit)
	}
	s.redeliverLocked(c, nil, false)
	s.electLocked()
	s.poke()
	return len(s.mu.consumers) == 0
}

// electLocked picks the active consumer of an Exclusive or Failover
// subscription and announces a change to the consumers.
//
// A consumer that has just subscribed misses that announcement:
// pulsar-client-go registers it only after the SUBSCRIBE's SUCCESS. So
// each consumer is also told its state with its first FLOW, which the
// client sends once it knows the consumer (flow).
func (s *subscription) electLocked() {
	if s.shared() {
		return
	}
	var next *consumer
	if n := len(s.mu.consumers); n > 0 {
		if s.kind == pb.CommandSubscribe_Failover {
			slices.SortStableFunc(s.mu.consumers, func(a, b *consumer) int {
				return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.name, b.name))
			})
		}
		i := 0
		if p := s.topic.name.Partition; p >= 0 {
			i = p % n
		}
		next = s.mu.consumers[i]
	}
	if next == s.mu.active {
		return
	}
	prev := s.mu.active
	s.mu.active = next
	if prev != nil {
		// The new active consumer gets what the old one left unacked.
		s.redeliverLocked(prev, nil, false)
	}
	if s.kind == pb.CommandSubscribe_Failover {
		for _, c := range s.mu.consumers {
			c.c.send(activeConsumerChange(c.id, c == next))
		}
	}
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
	s.mu.Lock()
	c.permits = min(c.permits+int64(n), maxPermits)
	if !c.flowed && s.kind == pb.CommandSubscribe_Failover {
		c.c.send(activeConsumerChange(c.id, c == s.mu.active))
	}
	c.flowed = true
	s.mu.Unlock()
	s.poke()
}

// maxPermits caps a consumer's permits: a client announcing absurd
// permits gets what it can use, not an overflow.
const maxPermits = 1 << 30

// ---- acks ----

// ack applies an ACK's ids, each only if it is c's to ack (ackableLocked);
// the others are ignored, counted in ignoredAcks, and reported as
// ErrAckNotDelivered. The rest of the ACK still applies.
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
	var firstErr error
	for _, id := range ids {
		p := mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}
		s.mu.Lock()
		ackable := s.ackableLocked(c, p)
		s.mu.Unlock()
		err := ErrAckNotDelivered
		if ackable {
			err = s.ackOne(c, cumulative, p, id.GetAckSet())
		} else {
			s.ignoredAcks.Add(1)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	s.mu.Lock()
	waiting := s.kind == pb.CommandSubscribe_Key_Shared && slices.ContainsFunc(s.mu.consumers, func(c *consumer) bool { return c.joinedAfter != nil })
	s.mu.Unlock()
	if waiting {
		s.poke() // a recently joined consumer may be released
	}
	s.replicatedChanged()
	return firstErr
}

// ackableLocked reports whether c may ack p: p was delivered to c and is
// not acked yet, or this subscription delivered it and took it back for
// redelivery (its consumer left or asked for it again). The latter keeps
// Pulsar's behaviour for a client that reconnects: the acks its
// application still holds spare the redelivery of what they name. An ack
// that arrives after the topic moved to another broker of the region
// finds nothing delivered there and is ignored; the message comes again.
func (s *subscription) ackableLocked(c *consumer, p mledger.Position) bool {
	if pe := s.mu.pending[p]; pe != nil {
		return pe.c == c
	}
	_, takenBack := s.mu.replay[p]
	return takenBack
}

func (s *subscription) ackOne(c *consumer, cumulative bool, p mledger.Position, ackSet []int64) error {
	if len(ackSet) > 0 {
		// Part of a batch: the messages whose bits are clear are acked.
		s.mu.Lock()
		set, ok := s.mu.partial[p]
		if !ok {
			set = slices.Clone(ackSet)
			s.mu.partial[p] = set
		}
		whole := intersect(set, ackSet)
		s.mu.Unlock()
		if cumulative && !whole {
			// Everything before the batch is acked, the batch itself in
			// part: the cursor holds the former, partial the latter.
			return s.ackCumulative(mledger.Position{Ledger: p.Ledger, Entry: p.Entry - 1})
		}
		if !whole {
			return nil
		}
	}
	if cumulative {
		return s.ackCumulative(p)
	}
	if err := s.cursor.Ack(p); err != nil {
		return err
	}
	s.mu.Lock()
	s.forgetLocked(p)
	s.mu.Unlock()
	return nil
}

func (s *subscription) ackCumulative(p mledger.Position) error {
	if p.Entry < 0 {
		return nil
	}
	if err := s.cursor.AckCumulative(p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for q := range s.mu.pending {
		if !p.Less(q) {
			s.forgetLocked(q)
		}
	}
	return nil
}

func (s *subscription) forgetLocked(p mledger.Position) {
	if pe := s.mu.pending[p]; pe != nil {
		held := pe.c.unacked >= pe.c.maxUnacked
		pe.c.unacked -= pe.size
		if held && pe.c.unacked < pe.c.maxUnacked {
			s.poke() // the consumer takes entries again
		}
		delete(s.mu.pending, p)
	}
	s.dropReplayLocked(p)
	delete(s.mu.redeliveries, p)
	delete(s.mu.partial, p)
}

func (s *subscription) dropReplayLocked(p mledger.Position) {
	if h, ok := s.mu.replay[p]; ok {
		delete(s.mu.replay, p)
		if s.mu.replayKeys[h]--; s.mu.replayKeys[h] <= 0 {
			delete(s.mu.replayKeys, h)
		}
	}
}

func (s *subscription) addReplayLocked(p mledger.Position, h uint32) {
	if _, ok := s.mu.replay[p]; !ok {
		s.mu.replay[p] = h
		s.mu.replayKeys[h]++
	}
}

// intersect keeps in dst only the bits also set in other and reports
// whether none is left (every message acked).
func intersect(dst, other []int64) bool {
	empty := true
	for i := range dst {
		if i < len(other) {
			dst[i] &= other[i]
		} else {
			dst[i] = 0
		}
		if dst[i] != 0 {
			empty = false
		}
	}
	return empty
}

// ---- redelivery ----

// redeliver hands back c's unacked entries (all, or those in ids) for
// delivery again, counting a redelivery for each.
func (s *subscription) redeliver(c *consumer, ids []*pb.MessageIdData) {
	s.mu.Lock()
	var only map[mledger.Position]bool
	if len(ids) > 0 {
		only = make(map[mledger.Position]bool, len(ids))
		for _, id := range ids {
			only[mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}] = true
		}
	}
	s.redeliverLocked(c, only, true)
	s.mu.Unlock()
	s.poke()
}

// resubscribed starts c afresh for a SUBSCRIBE that its client sent again
// while c stayed attached. Both reference clients empty their receive
// queue and reset their permits before every SUBSCRIBE, and send FLOW once
// it succeeds; so whatever c was sent and has not acked is gone from the
// client, and would stay pending here until c leaves (pulsar-client-go
// v0.19.0 reconnects twice when a CLOSE_CONSUMER and its connection's
// close both reach it, and its second SUBSCRIBE meets the consumer its
// first one attached). Its entries go back for redelivery and its permits
// to none. roundMu: no round under way sends on with the old permits.
func (s *subscription) resubscribed(c *consumer) {
	s.roundMu.Lock()
	s.mu.Lock()
	c.permits = 0
	s.redeliverLocked(c, nil, true)
	s.mu.Unlock()
	s.roundMu.Unlock()
	s.poke()
}

func (s *subscription) redeliverLocked(c *consumer, only map[mledger.Position]bool, count bool) {
	for p, pe := range s.mu.pending {
		if pe.c != c || (only != nil && !only[p]) {
			continue
		}
		c.unacked -= pe.size
		delete(s.mu.pending, p)
		if count {
			s.mu.redeliveries[p]++
		}
		s.addReplayLocked(p, pe.hash)
	}
}

// ---- dispatch ----

// run is the dispatcher goroutine.
func (s *subscription) run() {
	for {
		changed := s.topic.ml.Changed()
		gateOpened := s.topic.svc.failover.gateOpened()
		progressed, due := s.round()
		if progressed {
			continue
		}
		var timer clockwork.Timer
		var fire <-chan time.Time
		if !due.IsZero() {
			timer = s.clock.NewTimer(due.Sub(s.clock.Now()))
			fire = timer.Chan()
		}
		select {
		case <-changed:
		case <-s.wake:
		case <-gateOpened:
		case <-fire:
		case <-s.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if s.ctx.Err() != nil {
			return
		}
	}
}

// delivery is one message frame to send.
type delivery struct {
	c           *consumer
	pe          *pendingEntry // what assign recorded, undone if not sent
	e           *dispatchEntry
	redelivered uint32
	ackSet      []int64
}

// round reads what the consumers can take and sends it. It reports
// whether anything moved, and when the dispatcher must run again without
// being woken: when the next delayed entry falls due, or when a storage
// read that failed is retried.
func (s *subscription) round() (progressed bool, due time.Time) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	now := s.clock.Now()
	var readErr error
	var retry time.Time // when a failed read is retried
	defer func() { due = earliest(due, retry) }()
	// Read before mu (the package doc's lock order); a stale value only holds a recently
	// joined consumer a little longer.
	markDeleted := s.cursor.MarkDeletePosition()

	// A replicated subscription of a namespace with automatic failover
	// dispatches only where and while failover.go allows; run waits for
	// the gate to open.
	if s.isReplicated.Load() && !s.topic.svc.failover.mayDispatch(s.topic.name) {
		return false, time.Time{}
	}

	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return false, time.Time{}
	}
	s.releaseJoinedLocked(markDeleted)
	for _, d := range s.mu.delayed.popDue(now.UnixMilli()) {
		s.addReplayLocked(d.pos, d.hash)
	}
	budget := s.readBudgetLocked()
	var replay []mledger.Position
	hashes := map[mledger.Position]uint32{}
	if budget > 0 {
		replay = s.replayableLocked(int(budget))
		for _, p := range replay {
			hashes[p] = s.mu.replay[p]
			s.dropReplayLocked(p)
		}
	}
	// New entries are read only behind what waits for redelivery: on a
	// Shared subscription while the set is within its bound; on an Exclusive
	// or Failover one only once every older entry is on its way, since its
	// single consumer must get them in order (permits that grow meanwhile,
	// or entries smaller than the estimate, would otherwise let a new entry
	// overtake the replay left for a later round).
	readNew := budget > 0 && len(s.mu.replay) < s.cfg.MaxRedeliveries
	if !s.shared() {
		readNew = budget > 0 && len(s.mu.replay) == 0
	}
	due = s.mu.delayed.next()
	s.mu.Unlock()
	if budget <= 0 {
		return false, due
	}

	var entries []mledger.Entry
	for i, p := range replay {
		if s.cursor.IsAcked(p) {
			continue
		}
		es, err := s.topic.ml.ReadAt(s.ctx, p, 1)
		if errors.Is(err, mledger.ErrInvalidPosition) {
			continue // trimmed or deleted meanwhile: nothing to redeliver
		}
		if err != nil {
			// Not read this time (a bookie hiccup, or closing): keep the
			// rest for a later round rather than lose them.
			readErr = err
			s.mu.Lock()
			for _, q := range replay[i:] {
				s.addReplayLocked(q, hashes[q])
			}
			s.mu.Unlock()
			if !s.shared() {
				readNew = false // they go first, next round
			}
			break
		}
		entries = append(entries, es...)
	}
	fresh := 0
	if readNew {
		es, err := s.cursor.Read(s.ctx, int(budget))
		if err != nil {
			readErr = err
		}
		fresh = len(es)
		entries = append(entries, es...)
	}
	if readErr != nil {
		retry = s.retryReadInRound(now, readErr)
	} else {
		s.readRetry = 0
	}
	s.topic.svc.metrics.dispatchRead(len(entries))
	if len(entries) == 0 {
		return false, due
	}

	sent := s.send(s.assign(entries, now))
	s.mu.Lock()
	due = s.mu.delayed.next()
	s.mu.Unlock()
	return sent > 0 || fresh > 0, due
}

// retryReadInRound schedules the retry of a storage read that failed with
// err: Dispatch.ReadRetryInitial after the first failure in a row, twice
// the previous wait after each next one, up to Dispatch.ReadRetryMax. It
// returns when the retry is due. Called with roundMu held.
//
// Nothing else is sure to wake the dispatcher: on an idle topic no entry
// is appended, and a client sends FLOW only once it has taken half of what
// it asked for, so a consumer (a reader from the earliest position, say)
// that got nothing would wait for ever.
func (s *subscription) retryReadInRound(now time.Time, err error) time.Time {
	if s.readRetry == 0 {
		s.readRetry = s.cfg.ReadRetryInitial
	} else {
		s.readRetry = min(2*s.readRetry, s.cfg.ReadRetryMax)
	}
	if s.ctx.Err() == nil {
		s.topic.svc.log.Warn("dispatch read failed; retrying", "topic", s.topic.Name(), "subscription", s.name,
			"retry_in", s.readRetry, "err", err)
	}
	return now.Add(s.readRetry)
}

// earliest is the earlier of two times, the zero time standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// send queues a round's deliveries on their connections, never waiting. A
// consumer whose connection refuses one is skipped for the rest of the
// round, so that a key's entries keep their order, and what it was
// assigned goes back to replay with its permits. It returns how many were
// sent.
func (s *subscription) send(out []delivery) (sent int) {
	var refused []delivery
	skipped := map[*consumer]bool{}
	now := s.clock.Now().UnixMilli()
	for _, d := range out {
		if skipped[d.c] || !d.c.c.sendMessage(d.c.id, d.e, d.redelivered, d.ackSet) {
			skipped[d.c] = true
			refused = append(refused, d)
			continue
		}
		sent++
		d.c.lastConsumed.Store(now)
		s.traceDeliver(d)
		d.c.out.add(d.e.size, len(d.e.msg))
		s.out.add(d.e.size, len(d.e.msg))
	}
	if len(refused) > 0 {
		s.mu.Lock()
		for _, d := range refused {
			s.unassignLocked(d)
		}
		s.mu.Unlock()
	}
	return sent
}

// unassignLocked undoes assign's record of a delivery that was not sent.
func (s *subscription) unassignLocked(d delivery) {
	if s.mu.pending[d.e.pos] != d.pe {
		return // the consumer left meanwhile: its entries are in replay already
	}
	delete(s.mu.pending, d.e.pos)
	d.c.permits += int64(d.e.size)
	d.c.unacked -= d.e.size
	s.addReplayLocked(d.e.pos, d.pe.hash)
}

// replayableLocked picks, in position order, up to n replay entries that
// a consumer can take now. For Key_Shared that skips the entries of keys
// whose consumer cannot (no permits, or recently joined), and every later
// entry of those keys, so that a stuck key neither blocks the others nor
// loses its order.
func (s *subscription) replayableLocked(n int) []mledger.Position {
	all := slices.SortedFunc(maps.Keys(s.mu.replay), mledger.Position.Compare)
	if s.kind != pb.CommandSubscribe_Key_Shared {
		return all[:min(n, len(all))]
	}
	var take []mledger.Position
	held := map[uint32]bool{}
	for _, p := range all {
		if len(take) == n {
			break
		}
		h := s.mu.replay[p]
		if held[h] {
			continue
		}
		if c := s.mu.keys.pick(h); c == nil || !s.canTakeLocked(c, p) {
			held[h] = true
			continue
		}
		take = append(take, p)
	}
	return take
}

// assign picks a consumer for each entry, under mu: delayed entries wait,
// entries nobody can take now go to replay. The first replayed entries
// come from the replay set, the earliest of their keys there when the
// round took them; a fresh entry of a key with entries waiting in replay
// waits behind them.
func (s *subscription) assign(entries []mledger.Entry, now time.Time) []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery
	held := map[uint32]bool{} // Key_Shared: keys with an entry held this round
	for _, raw := range entries {
		if _, taken := s.mu.pending[raw.Position]; taken {
			continue
		}
		e, err := newDispatchEntry(raw)
		if err != nil {
			s.topic.svc.log.Warn("skipping undecodable entry", "topic", s.topic.Name(), "position", raw.Position.String(), "err", err)
			continue
		}
		var h uint32
		if s.kind == pb.CommandSubscribe_Key_Shared {
			h = keyHash(e.stickyKey())
		}
		if s.shared() && e.md.HasDeliverAtTime() && e.md.GetDeliverAtTime() > now.UnixMilli() {
			s.mu.delayed.add(e.pos, h, e.md.GetDeliverAtTime())
			continue
		}
		var c *consumer
		if s.kind == pb.CommandSubscribe_Key_Shared {
			if !held[h] && !s.replayHoldsEarlierLocked(h, e.pos) {
				c = s.mu.keys.pick(h)
				if c != nil && !s.canTakeLocked(c, e.pos) {
					c = nil
				}
			}
		} else {
			c = s.pickLocked()
		}
		if c == nil {
			held[h] = true
			s.addReplayLocked(e.pos, h)
			continue
		}
		c.permits -= int64(e.size)
		c.unacked += e.size
		pe := &pendingEntry{c: c, size: e.size, hash: h}
		s.mu.pending[e.pos] = pe
		out = append(out, delivery{c: c, pe: pe, e: e, redelivered: s.mu.redeliveries[e.pos], ackSet: slices.Clone(s.mu.partial[e.pos])})
	}
	s.learnEntrySizeLocked(out)
	return out
}

// replayHoldsEarlierLocked reports whether the replay set holds an entry
// of key hash h before p, which p must then wait behind (Key_Shared). A
// fresh entry comes after every replay entry, so for it this is whether the
// key waits at all. A replayed one was the earliest of its key when the
// round took it from the set, but a consumer that left while the round
// read storage has handed its entries back since, and those can be earlier:
// delivered first, the replayed entry would overtake them (message 84 of a
// key before its message 4, once the consumer that held 4 was dropped).
// The set is scanned only for a key that waits, once per key and round
// (assign holds the key after).
func (s *subscription) replayHoldsEarlierLocked(h uint32, p mledger.Position) bool {
	if s.mu.replayKeys[h] == 0 {
		return false
	}
	for q, qh := range s.mu.replay {
		if qh == h && q.Less(p) {
			return true
		}
	}
	return false
}

// learnEntrySizeLocked folds a round's deliveries into msgsPerEntry, which
// readBudgetLocked divides permits by.
func (s *subscription) learnEntrySizeLocked(out []delivery) {
	if len(out) == 0 {
		return
	}
	msgs := 0
	for _, d := range out {
		msgs += d.e.size
	}
	perEntry := float64(msgs) / float64(len(out))
	if s.mu.msgsPerEntry == 0 {
		s.mu.msgsPerEntry = perEntry
	} else {
		s.mu.msgsPerEntry = 0.9*s.mu.msgsPerEntry + 0.1*perEntry
	}
}

// releaseJoinedLocked ends the recently-joined wait of the Key_Shared
// consumers that joined at or before markDeleted: everything read before
// their joining is acked.
func (s *subscription) releaseJoinedLocked(markDeleted mledger.Position) {
	for _, c := range s.mu.consumers {
		if c.joinedAfter != nil && !markDeleted.Less(*c.joinedAfter) {
			c.joinedAfter = nil
		}
	}
}

// canTakeLocked applies permits, the unacked limit, room on the consumer's
// connection and the recently-joined rule to a Key_Shared consumer and the
// entry at p. It changes nothing.
func (s *subscription) canTakeLocked(c *consumer, p mledger.Position) bool {
	if !c.readyLocked() {
		return false
	}
	// Read after its joining: wait for what precedes to be acked.
	return c.joinedAfter == nil || !c.joinedAfter.Less(p)
}

// readyLocked reports whether the consumer can take a message now: it has
// permits, is under its unacked limit, and its connection has room. A
// connection without room wakes the dispatcher when it drains. Its mu is
// the subscription's.
func (c *consumer) readyLocked() bool {
	return c.permits > 0 && c.unacked < c.maxUnacked && c.c.msgs.room()
}

// pickLocked chooses the consumer of the next entry for the non-key types.
func (s *subscription) pickLocked() *consumer {
	if !s.shared() {
		if a := s.mu.active; a != nil && a.permits > 0 && a.c.msgs.room() {
			return a
		}
		return nil
	}
	n := len(s.mu.consumers)
	for i := range n {
		c := s.mu.consumers[(s.mu.rr+i)%n]
		if c.readyLocked() {
			s.mu.rr = (s.mu.rr + i + 1) % n
			return c
		}
	}
	return nil
}

// readBudgetLocked is how many entries a round reads: the consumers'
// permits, which count messages, over the average messages per entry
// dispatched so far (rounded up, so that the last entry a consumer can
// start is read in the same round), and at most MaxReadEntries. Pulsar's
// dispatchers estimate the same way. Reading an entry per permit would read
// up to a batch's size times too many, and every entry the consumers cannot
// take goes back to the replay set, to be read again.
func (s *subscription) readBudgetLocked() int64 {
	permits := s.permitsLocked()
	if permits <= 0 {
		return 0
	}
	entries := int64(math.Ceil(float64(permits) / max(s.mu.msgsPerEntry, 1)))
	return min(entries, int64(s.cfg.MaxReadEntries))
}

// permitsLocked is how many messages the consumers can take now; a
// consumer whose connection has no room counts none, so that a round does
// not read what nobody can take.
func (s *subscription) permitsLocked() int64 {
	if !s.shared() {
		if a := s.mu.active; a != nil && a.c.msgs.room() {
			return max(a.permits, 0)
		}
		return 0
	}
	var n int64
	for _, c := range s.mu.consumers {
		if c.readyLocked() {
			n += c.permits
		}
	}
	return n
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
// replacing a replicated subscription's state.
func (s *subscription) rewrite(ctx context.Context, move func() error) error {
	s.seeking.Store(true)
	defer s.seeking.Store(false)
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	for _, c := range s.consumerList() {
		c.disconnect(ctx)
	}
	s.mu.Lock()
	clear(s.mu.pending)
	clear(s.mu.replay)
	clear(s.mu.replayKeys)
	clear(s.mu.redeliveries)
	clear(s.mu.partial)
	s.mu.delayed = delayedQueue{}
	s.mu.Unlock()
	return move()
}

// unsubscribe deletes the subscription; only its one consumer (or none)
// may ask.
func (s *subscription) unsubscribe(ctx context.Context, c *consumer) error {
	s.mu.Lock()
	others := slices.ContainsFunc(s.mu.consumers, func(o *consumer) bool { return o != c })
	s.mu.Unlock()
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
// delivered from here on, while acks still reach the cursor. It returns
// whether the subscription was already stopped, and its consumers.
func (s *subscription) stop(ctx context.Context) (wasStopped bool, consumers []*consumer) {
	s.mu.Lock()
	wasStopped = s.mu.closed
	s.mu.closed = true
	consumers = slices.Clone(s.mu.consumers)
	s.mu.Unlock()
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

// ---- delayed delivery ----

// delayedQueue holds entries whose deliver_at_time is ahead, earliest
// first. It lives in memory: after a reload the cursor reads them again
// from its mark-delete position, and they are delayed again.
type delayedQueue []delayedEntry

type delayedEntry struct {
	at   int64 // Unix ms
	pos  mledger.Position
	hash uint32
}

func (q delayedQueue) Len() int { return len(q) }
func (q delayedQueue) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(q[i].at, q[j].at), q[i].pos.Compare(q[j].pos)) < 0
}
func (q delayedQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *delayedQueue) Push(x any)   { *q = append(*q, x.(delayedEntry)) }
func (q *delayedQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (q *delayedQueue) add(p mledger.Position, hash uint32, at int64) {
	heap.Push(q, delayedEntry{at, p, hash})
}

// popDue removes and returns the entries due at now.
func (q *delayedQueue) popDue(now int64) []delayedEntry {
	var due []delayedEntry
	for q.Len() > 0 && (*q)[0].at <= now {
		due = append(due, heap.Pop(q).(delayedEntry))
	}
	return due
}

// next is when the earliest entry falls due (zero: none).
func (q delayedQueue) next() time.Time {
	if len(q) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(q[0].at)
}
