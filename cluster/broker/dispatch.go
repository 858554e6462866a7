package broker

import (
	"cmp"
	"container/heap"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// dispatchState is what a subscription knows of its deliveries: the
// consumers and their permits, the entries delivered and not yet acked
// (pending, per consumer, so they can be redelivered when the consumer
// leaves or asks), the entries to deliver again before new ones (replay),
// redelivery counts, batches acked in part, and delayed entries
// (deliver_at_time, on Shared and Key_Shared). The cursor holds what is
// acked.
//
// It is a state machine and nothing more: no goroutine, no storage, no
// clock (callers pass the time) and no network beyond queueing frames on a
// consumer's connection. The policies it applies (dispatch rates, the
// subscription's unacked limit, the delayed delivery switch) are the
// topic's, which applyPolicies changes under it. The subscription's dispatcher goroutine owns it
// (see subscription); the data-driven tests (testdata/dispatch) drive it
// from scripts.
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
type dispatchState struct {
	kind pb.CommandSubscribe_SubType
	// partition is the topic's partition index (-1: not a partition), by
	// which Exclusive and Failover offset their choice of active consumer.
	partition int
	cfg       DispatchConfig
	log       *slog.Logger
	// announce tells a Failover consumer whether it is the active one
	// (ACTIVE_CONSUMER_CHANGE).
	announce func(c *consumer, active bool)
	// wake asks for a dispatch round: permits, consumers or replay changed.
	wake func()

	closed    bool
	consumers []*consumer // Failover: sorted by (priority, name)
	active    *consumer   // Exclusive and Failover
	rr        int         // Shared: next consumer to try
	keys      keySharedSelector
	autoSplit bool
	pending   map[mledger.Position]*pendingEntry
	replay    map[mledger.Position]uint32 // value: key hash (Key_Shared)
	// inRound holds the replay entries the round under way took to read
	// (value: key hash). They are still taken back: an ack of one applies
	// (ackable) and forgets it here, and the round then leaves it unsent
	// (endRound). Without it, an ack that met its entry in flight between
	// the replay set and a consumer was ignored and the entry sent again.
	inRound map[mledger.Position]uint32
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
	// rates are the dispatch rates the subscription's deliveries count
	// against (dispatchrate.go): the topic's, shared with its other
	// subscriptions, and the subscription's own. While one is spent, no
	// round starts before throttledUntil.
	rates          []*dispatchLimiter
	throttledUntil time.Time
	// unacked is what the consumers hold unacked together, in messages.
	// unackedLimit, when set and above 0, bounds it for Shared and
	// Key_Shared (the topic's maxUnackedMessagesOnSubscription); blocked is
	// set once it is reached, and cleared once acks bring it down to half
	// (Pulsar's blockedDispatcherOnUnackedMsgs).
	unacked      int64
	unackedLimit *atomic.Int64
	blocked      bool
	// delayedOff, when set and true, dispatches entries whatever their
	// delivery time (the topic's delayed delivery policy is not active),
	// and releases those delayed already.
	delayedOff *atomic.Bool
	// msgsPerEntry is the moving average of the messages in the entries
	// dispatched (0 before the first), by which a round turns permits into
	// entries to read.
	msgsPerEntry float64
}

// pendingEntry is an entry delivered and not wholly acked.
type pendingEntry struct {
	c    *consumer
	size int
	hash uint32 // Key_Shared key hash
}

// delivery is one message frame to send.
type delivery struct {
	c           *consumer
	pe          *pendingEntry // what assign recorded, undone if not sent
	e           *dispatchEntry
	redelivered uint32
	ackSet      []int64
}

// ackCursor is what acks need of the subscription's cursor.
type ackCursor interface {
	Ack(ps ...mledger.Position) error
	AckCumulative(p mledger.Position) error
	IsAcked(p mledger.Position) bool
	Consumed(p mledger.Position) bool
}

func (d *dispatchState) init(kind pb.CommandSubscribe_SubType, partition int, cfg DispatchConfig, log *slog.Logger,
	announce func(*consumer, bool), wake func()) {
	d.kind, d.partition, d.cfg, d.log, d.announce, d.wake = kind, partition, cfg, log, announce, wake
	d.pending = make(map[mledger.Position]*pendingEntry)
	d.replay = make(map[mledger.Position]uint32)
	d.inRound = make(map[mledger.Position]uint32)
	d.replayKeys = make(map[uint32]int)
	d.redeliveries = make(map[mledger.Position]uint32)
	d.partial = make(map[mledger.Position][]int64)
}

func (d *dispatchState) shared() bool {
	return d.kind == pb.CommandSubscribe_Shared || d.kind == pb.CommandSubscribe_Key_Shared
}

// ---- consumers ----

// addConsumer attaches c, checking the subscription type's rules and its
// limit of maxConsumers (0: none). readPosition is the cursor's, where a
// Key_Shared consumer joining a running subscription starts waiting.
func (d *dispatchState) addConsumer(c *consumer, kind pb.CommandSubscribe_SubType, ksm *pb.KeySharedMeta, maxConsumers int,
	name string, readPosition mledger.Position) error {
	if d.closed {
		return fmt.Errorf("%w: subscription %s is closing", wire.ErrServiceNotReady, name)
	}
	if maxConsumers > 0 && len(d.consumers) >= maxConsumers {
		return fmt.Errorf("%w: subscription %s reached max consumers limit (%d)", wire.ErrConsumerBusy, name, maxConsumers)
	}
	if len(d.consumers) > 0 && kind != d.kind {
		return fmt.Errorf("%w: subscription %s is of type %v, not %v", wire.ErrConsumerBusy, name, d.kind, kind)
	}
	if len(d.consumers) == 0 {
		d.kind = kind
	}
	switch d.kind {
	case pb.CommandSubscribe_Exclusive:
		if len(d.consumers) > 0 {
			return fmt.Errorf("%w: exclusive consumer is already connected to subscription %s", wire.ErrConsumerBusy, name)
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
		if len(d.consumers) > 0 && auto != d.autoSplit {
			return fmt.Errorf("%w: subscription %s mixes AUTO_SPLIT and STICKY consumers", wire.ErrConsumerAssign, name)
		}
		if err := d.keys.add(c, declared); err != nil {
			return err
		}
		d.autoSplit = auto
		if len(d.consumers) > 0 {
			// Recently joined: hold what is read after now until
			// everything read so far is acked. The owner reads the
			// position with no round between it and the joining.
			c.joinedAfter = &readPosition
		}
	}
	d.consumers = append(d.consumers, c)
	d.elect()
	d.wake()
	return nil
}

// removeConsumer detaches c and hands its unacked entries to the others.
func (d *dispatchState) removeConsumer(c *consumer) (last bool) {
	i := slices.Index(d.consumers, c)
	if i < 0 {
		return false
	}
	d.consumers = slices.Delete(d.consumers, i, i+1)
	if d.kind == pb.CommandSubscribe_Key_Shared {
		d.keys.remove(c, d.autoSplit)
	}
	d.redeliver(c, nil, false)
	d.elect()
	d.wake()
	return len(d.consumers) == 0
}

// elect picks the active consumer of an Exclusive or Failover subscription
// and announces a change to the consumers.
//
// A consumer that has just subscribed misses that announcement:
// pulsar-client-go registers it only after the SUBSCRIBE's SUCCESS. So
// each consumer is also told its state with its first FLOW, which the
// client sends once it knows the consumer (flow).
func (d *dispatchState) elect() {
	if d.shared() {
		return
	}
	var next *consumer
	if n := len(d.consumers); n > 0 {
		if d.kind == pb.CommandSubscribe_Failover {
			slices.SortStableFunc(d.consumers, func(a, b *consumer) int {
				return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.name, b.name))
			})
		}
		i := 0
		if p := d.partition; p >= 0 {
			i = p % n
		}
		next = d.consumers[i]
	}
	if next == d.active {
		return
	}
	prev := d.active
	d.active = next
	if prev != nil {
		// The new active consumer gets what the old one left unacked.
		d.redeliver(prev, nil, false)
	}
	if d.kind == pb.CommandSubscribe_Failover {
		for _, c := range d.consumers {
			d.announce(c, c == next)
		}
	}
}

// flow adds permits (FLOW), counted in messages.
func (d *dispatchState) flow(c *consumer, n uint32) {
	c.permits = min(c.permits+int64(n), maxPermits)
	if !c.flowed && d.kind == pb.CommandSubscribe_Failover {
		d.announce(c, c == d.active)
	}
	c.flowed = true
	d.wake()
}

// maxPermits caps a consumer's permits: a client announcing absurd
// permits gets what it can use, not an overflow.
const maxPermits = 1 << 30

// ---- acks ----

// ack applies one ACK's ids, each only if it is c's to ack (ackable); it
// returns how many it ignored, and the first error. The rest of the ACK
// still applies. See subscription.ack for why ids are ignored.
func (d *dispatchState) ack(cur ackCursor, c *consumer, cumulative bool, ids []*pb.MessageIdData) (ignored int64, firstErr error) {
	for _, id := range ids {
		p := mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}
		var err error
		switch {
		case d.ackable(c, p):
			err = d.ackOne(cur, cumulative, p, id.GetAckSet())
		case cur.Consumed(p):
			// An entry of this topic consumed already: this ack changes
			// nothing, and it succeeds, as Pulsar's does (a made-up
			// position, or another topic's, is still refused). A client
			// may hold two copies of one entry: it received the entry
			// from the topic's previous broker, and again here, because
			// its ack reached here while the entry was being read, before
			// it was delivered (ignored, below). Once the retried ack of
			// one copy applied, the other copy's ack would otherwise be
			// refused for ever.
		default:
			ignored++
			err = ErrAckNotDelivered
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if d.kind == pb.CommandSubscribe_Key_Shared && slices.ContainsFunc(d.consumers, func(c *consumer) bool { return c.joinedAfter != nil }) {
		d.wake() // a recently joined consumer may be released
	}
	return ignored, firstErr
}

// ackable reports whether c may ack p: p was delivered to c and is not
// acked yet, or this subscription delivered it and took it back for
// redelivery (its consumer left or asked for it again). The latter keeps
// Pulsar's behaviour for a client that reconnects: the acks its
// application still holds spare the redelivery of what they name. An ack
// that arrives after the topic moved to another broker of the region
// finds nothing delivered there and is ignored; the message comes again.
func (d *dispatchState) ackable(c *consumer, p mledger.Position) bool {
	if pe := d.pending[p]; pe != nil {
		return pe.c == c
	}
	_, takenBack := d.replay[p]
	_, reading := d.inRound[p]
	return takenBack || reading
}

func (d *dispatchState) ackOne(cur ackCursor, cumulative bool, p mledger.Position, ackSet []int64) error {
	if len(ackSet) > 0 {
		// Part of a batch: the messages whose bits are clear are acked.
		set, ok := d.partial[p]
		if !ok {
			set = slices.Clone(ackSet)
			d.partial[p] = set
		}
		whole := intersect(set, ackSet)
		if cumulative && !whole {
			// Everything before the batch is acked, the batch itself in
			// part: the cursor holds the former, partial the latter.
			return d.ackCumulative(cur, mledger.Position{Ledger: p.Ledger, Entry: p.Entry - 1})
		}
		if !whole {
			return nil
		}
	}
	if cumulative {
		return d.ackCumulative(cur, p)
	}
	if err := cur.Ack(p); err != nil {
		return err
	}
	d.forget(p)
	return nil
}

func (d *dispatchState) ackCumulative(cur ackCursor, p mledger.Position) error {
	if p.Entry < 0 {
		return nil
	}
	if err := cur.AckCumulative(p); err != nil {
		return err
	}
	for q := range d.pending {
		if !p.Less(q) {
			d.forget(q)
		}
	}
	for q := range d.inRound {
		if !p.Less(q) {
			d.forget(q)
		}
	}
	return nil
}

// applyRemote acks what another region's state says was consumed (see
// subscription.applyRemote).
func (d *dispatchState) applyRemote(cur ackCursor, applies []replsub.Apply) error {
	var whole []mledger.Position
	for _, a := range applies {
		if a.Remaining == nil {
			whole = append(whole, a.Pos)
			continue
		}
		set, ok := d.partial[a.Pos]
		if !ok {
			d.partial[a.Pos] = slices.Clone(a.Remaining)
			continue
		}
		if intersect(set, a.Remaining) {
			whole = append(whole, a.Pos)
		}
	}
	_, err := d.ackWhole(cur, whole)
	return err
}

// ackWhole acks the entries at ps that are not acked yet, consumed under
// the subscription (another region's state, an expiry), and forgets them;
// it returns how many it acked.
func (d *dispatchState) ackWhole(cur ackCursor, ps []mledger.Position) (int, error) {
	ps = slices.DeleteFunc(ps, cur.IsAcked)
	if len(ps) == 0 {
		return 0, nil
	}
	if err := cur.Ack(ps...); err != nil {
		return 0, err
	}
	for _, p := range ps {
		d.forget(p)
	}
	return len(ps), nil
}

// dropConsumed forgets what was delivered, or waits for redelivery, that
// the cursor consumed under the subscription (skip, expiry).
func (d *dispatchState) dropConsumed(cur ackCursor, markDeleted mledger.Position) {
	for p := range d.pending {
		if cur.IsAcked(p) || !markDeleted.Less(p) {
			d.forget(p)
		}
	}
	for p := range d.replay {
		if !markDeleted.Less(p) {
			d.dropReplay(p)
		}
	}
	d.wake()
}

func (d *dispatchState) forget(p mledger.Position) {
	if pe := d.pending[p]; pe != nil {
		held := pe.c.unacked >= pe.c.maxUnacked
		d.countUnacked(pe.c, -pe.size)
		if held && pe.c.unacked < pe.c.maxUnacked {
			d.wake() // the consumer takes entries again
		}
		if d.blocked && d.unackedRoom() > 0 {
			d.wake() // the subscription takes entries again
		}
		delete(d.pending, p)
	}
	d.dropReplay(p)
	delete(d.inRound, p)
	delete(d.redeliveries, p)
	delete(d.partial, p)
}

func (d *dispatchState) dropReplay(p mledger.Position) {
	if h, ok := d.replay[p]; ok {
		delete(d.replay, p)
		if d.replayKeys[h]--; d.replayKeys[h] <= 0 {
			delete(d.replayKeys, h)
		}
	}
}

func (d *dispatchState) addReplay(p mledger.Position, h uint32) {
	if _, ok := d.replay[p]; !ok {
		d.replay[p] = h
		d.replayKeys[h]++
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

// redeliver hands back c's unacked entries (all, or those in only) for
// delivery again; with count, each counts a redelivery.
func (d *dispatchState) redeliver(c *consumer, only map[mledger.Position]bool, count bool) {
	for p, pe := range d.pending {
		if pe.c != c || (only != nil && !only[p]) {
			continue
		}
		d.countUnacked(c, -pe.size)
		delete(d.pending, p)
		if count {
			d.redeliveries[p]++
		}
		d.addReplay(p, pe.hash)
	}
	d.wake()
}

// resubscribed starts c afresh: what it was sent goes back for redelivery
// and its permits to none (see subscription.resubscribed).
func (d *dispatchState) resubscribed(c *consumer) {
	c.permits = 0
	d.redeliver(c, nil, true)
}

// rewind drops what was delivered, held for redelivery or delayed: the
// cursor is about to move under the subscription (a seek).
func (d *dispatchState) rewind() {
	for _, c := range d.consumers {
		c.unacked = 0
	}
	d.unacked, d.blocked = 0, false
	clear(d.pending)
	clear(d.replay)
	clear(d.inRound)
	clear(d.replayKeys)
	clear(d.redeliveries)
	clear(d.partial)
	d.delayed = delayedQueue{}
}

// ---- a dispatch round ----

// roundPlan is what a round reads: the replay entries, in order, and
// whether to read new ones and how many. The storage reads run off the
// owner goroutine (subscription.read).
type roundPlan struct {
	now    time.Time
	budget int
	// reserved is what the round took from the dispatch rates when
	// planned, in messages (settle).
	reserved int64
	replay   []mledger.Position
	hashes   map[mledger.Position]uint32
	// readNew: read up to budget new entries after the replay ones.
	readNew bool
	// inOrder: a replay entry not read holds back the new ones
	// (Exclusive and Failover, whose one consumer takes them in order).
	inOrder bool
}

// plan starts a round at now: due delayed entries join the replay set, the
// recently joined consumers acked up to markDeleted are released, and the
// replay entries the round reads leave the set (endRound puts back those
// not read). ok is false when nobody can take anything.
func (d *dispatchState) plan(now time.Time, markDeleted mledger.Position) (p roundPlan, ok bool) {
	if d.closed {
		return roundPlan{}, false
	}
	d.releaseJoined(markDeleted)
	dueBy := now.UnixMilli()
	if d.delayDisabled() {
		dueBy = math.MaxInt64
	}
	for _, e := range d.delayed.popDue(dueBy) {
		d.addReplay(e.pos, e.hash)
	}
	d.throttledUntil = time.Time{}
	// The messages the round may read: taken from the rates now, each in
	// one step, so that the subscriptions sharing the topic's limiter do
	// not read the same tokens; a rate that holds fewer than the ones
	// before it took has them give the difference back, and settle gives
	// back what is not sent.
	reserved := d.permits()
	for i, r := range d.rates {
		got, wait := r.reserve(now, reserved)
		giveBack(now, d.rates[:i], reserved-got)
		if wait > 0 {
			d.throttledUntil = now.Add(wait)
			return roundPlan{}, false
		}
		reserved = got
	}
	budget := d.readBudget(reserved)
	if budget <= 0 {
		giveBack(now, d.rates, reserved)
		return roundPlan{}, false
	}
	p = roundPlan{now: now, budget: int(budget), reserved: reserved, hashes: map[mledger.Position]uint32{}, inOrder: !d.shared()}
	p.replay = d.replayable(p.budget)
	for _, q := range p.replay {
		p.hashes[q] = d.replay[q]
		d.inRound[q] = d.replay[q]
		d.dropReplay(q)
	}
	// New entries are read only behind what waits for redelivery: on a
	// Shared subscription while the set is within its bound; on an Exclusive
	// or Failover one only once every older entry is on its way, since its
	// single consumer must get them in order (permits that grow meanwhile,
	// or entries smaller than the estimate, would otherwise let a new entry
	// overtake the replay left for a later round).
	p.readNew = len(d.replay) < d.cfg.MaxRedeliveries
	if p.inOrder {
		p.readNew = len(d.replay) == 0
	}
	return p, true
}

// endRound ends the round of plan p with what its read brought: the
// replay entries it did not read (unread) go back to the set, and of the
// replay entries it read, those acked meanwhile are left out. It returns
// the entries to assign.
func (d *dispatchState) endRound(p roundPlan, unread []mledger.Position, read []mledger.Entry) []mledger.Entry {
	for _, q := range unread {
		if _, ok := d.inRound[q]; ok {
			d.addReplay(q, p.hashes[q])
		}
	}
	read = slices.DeleteFunc(read, func(e mledger.Entry) bool {
		_, replayed := p.hashes[e.Position]
		_, still := d.inRound[e.Position]
		return replayed && !still
	})
	clear(d.inRound)
	return read
}

// replayable picks, in position order, up to n replay entries that a
// consumer can take now. For Key_Shared that skips the entries of keys
// whose consumer cannot (no permits, or recently joined), and every later
// entry of those keys, so that a stuck key neither blocks the others nor
// loses its order.
func (d *dispatchState) replayable(n int) []mledger.Position {
	all := slices.SortedFunc(maps.Keys(d.replay), mledger.Position.Compare)
	if d.kind != pb.CommandSubscribe_Key_Shared {
		return all[:min(n, len(all))]
	}
	var take []mledger.Position
	held := map[uint32]bool{}
	for _, p := range all {
		if len(take) == n {
			break
		}
		h := d.replay[p]
		if held[h] {
			continue
		}
		if c := d.keys.pick(h); c == nil || !canTake(c, p) {
			held[h] = true
			continue
		}
		take = append(take, p)
	}
	return take
}

// assign picks a consumer for each entry a round read: delayed entries
// wait, entries nobody can take now go to replay. The first entries come
// from the replay set, the earliest of their keys there when the round
// took them; a fresh entry of a key with entries waiting in replay waits
// behind them.
//
// An Exclusive or Failover entry waits behind every earlier one in the
// replay set, and behind one held this round, since the one consumer
// takes them in order: a round plans to read new entries only with the
// set empty, but while it reads, a consumer may leave or ask for a
// redelivery, or the read of a replay entry fail.
func (d *dispatchState) assign(entries []mledger.Entry, now time.Time) []delivery {
	var out []delivery
	held := map[uint32]bool{} // keys with an entry held this round (one key, 0, for the other types)
	var firstReplay *mledger.Position
	if !d.shared() {
		for q := range d.replay {
			if firstReplay == nil || q.Less(*firstReplay) {
				firstReplay = &q
			}
		}
	}
	for _, raw := range entries {
		if _, taken := d.pending[raw.Position]; taken {
			continue
		}
		e, err := newDispatchEntry(raw)
		if err != nil {
			d.log.Warn("skipping undecodable entry", "position", raw.Position.String(), "err", err)
			continue
		}
		var h uint32
		if d.kind == pb.CommandSubscribe_Key_Shared {
			h = keyHash(e.stickyKey())
		}
		if d.shared() && e.md.HasDeliverAtTime() && e.md.GetDeliverAtTime() > now.UnixMilli() && !d.delayDisabled() {
			d.delayed.add(e.pos, h, e.md.GetDeliverAtTime())
			continue
		}
		var c *consumer
		if d.kind == pb.CommandSubscribe_Key_Shared {
			if !held[h] && !d.replayHoldsEarlier(h, e.pos) {
				c = d.keys.pick(h)
				if c != nil && !canTake(c, e.pos) {
					c = nil
				}
			}
		} else if d.shared() || (!held[h] && (firstReplay == nil || e.pos.Less(*firstReplay))) {
			c = d.pick()
		}
		if c == nil {
			held[h] = true
			d.addReplay(e.pos, h)
			continue
		}
		c.permits -= int64(e.size)
		d.countUnacked(c, e.size)
		pe := &pendingEntry{c: c, size: e.size, hash: h}
		d.pending[e.pos] = pe
		out = append(out, delivery{c: c, pe: pe, e: e, redelivered: d.redeliveries[e.pos], ackSet: slices.Clone(d.partial[e.pos])})
	}
	d.learnEntrySize(out)
	return out
}

// unassign undoes assign's record of a delivery that was not sent.
func (d *dispatchState) unassign(dl delivery) {
	if d.pending[dl.e.pos] != dl.pe {
		return // the consumer left meanwhile: its entries are in replay already
	}
	delete(d.pending, dl.e.pos)
	dl.c.permits += int64(dl.e.size)
	d.countUnacked(dl.c, -dl.e.size)
	d.addReplay(dl.e.pos, dl.pe.hash)
}

// send queues deliveries on their consumers' connections, never waiting,
// and returns those sent. A consumer whose connection refuses one is
// skipped for the rest of the deliveries, so that a key's entries keep
// their order, and what it was assigned goes back to replay with its
// permits.
func (d *dispatchState) send(out []delivery) (sent []delivery) {
	skipped := map[*consumer]bool{}
	for _, dl := range out {
		if skipped[dl.c] || !dl.c.c.sendMessage(dl.c.id, dl.e, dl.redelivered, dl.ackSet) {
			skipped[dl.c] = true
			d.unassign(dl)
			continue
		}
		sent = append(sent, dl)
	}
	return sent
}

// giveBack returns n messages to each of rates at now; nothing, without
// taking their locks, when n is 0, as it is on almost every round.
func giveBack(now time.Time, rates []*dispatchLimiter, n int64) {
	if n == 0 {
		return
	}
	for _, r := range rates {
		r.take(now, -n, 0)
	}
}

// settle ends round p's count against the dispatch rates at now: the
// messages it took when planned become those it sent, and the bytes it
// sent are taken.
func (d *dispatchState) settle(p roundPlan, now time.Time, sent []delivery) {
	var msgs, bytes int64
	for _, dl := range sent {
		msgs, bytes = msgs+int64(dl.e.size), bytes+int64(len(dl.e.msg))
	}
	for _, r := range d.rates {
		r.take(now, msgs-p.reserved, bytes)
	}
}

// wakeAt is when the dispatcher must start a round unasked (zero: never):
// the next delayed entry falls due, or a spent dispatch rate has refilled.
func (d *dispatchState) wakeAt() time.Time {
	return earliest(d.delayed.next(), d.throttledUntil)
}

// replayHoldsEarlier reports whether the replay set holds an entry of key
// hash h before p, which p must then wait behind (Key_Shared). A fresh
// entry comes after every replay entry, so for it this is whether the key
// waits at all. A replayed one was the earliest of its key when the round
// took it from the set, but a consumer that left while the round read
// storage has handed its entries back since, and those can be earlier:
// delivered first, the replayed entry would overtake them (message 84 of a
// key before its message 4, once the consumer that held 4 was dropped).
// The set is scanned only for a key that waits, once per key and round
// (assign holds the key after).
func (d *dispatchState) replayHoldsEarlier(h uint32, p mledger.Position) bool {
	if d.replayKeys[h] == 0 {
		return false
	}
	for q, qh := range d.replay {
		if qh == h && q.Less(p) {
			return true
		}
	}
	return false
}

// learnEntrySize folds a round's deliveries into msgsPerEntry, which
// readBudget divides permits by.
func (d *dispatchState) learnEntrySize(out []delivery) {
	if len(out) == 0 {
		return
	}
	msgs := 0
	for _, dl := range out {
		msgs += dl.e.size
	}
	perEntry := float64(msgs) / float64(len(out))
	if d.msgsPerEntry == 0 {
		d.msgsPerEntry = perEntry
	} else {
		d.msgsPerEntry = 0.9*d.msgsPerEntry + 0.1*perEntry
	}
}

// releaseJoined ends the recently-joined wait of the Key_Shared consumers
// that joined at or before markDeleted: everything read before their
// joining is acked.
func (d *dispatchState) releaseJoined(markDeleted mledger.Position) {
	for _, c := range d.consumers {
		if c.joinedAfter != nil && !markDeleted.Less(*c.joinedAfter) {
			c.joinedAfter = nil
		}
	}
}

// canTake applies permits, the unacked limit, room on the consumer's
// connection and the recently-joined rule to a Key_Shared consumer and the
// entry at p. It changes nothing.
func canTake(c *consumer, p mledger.Position) bool {
	if !c.ready() {
		return false
	}
	// Read after its joining: wait for what precedes to be acked.
	return c.joinedAfter == nil || !c.joinedAfter.Less(p)
}

// ready reports whether the consumer can take a message now: it has
// permits, is under its unacked limit, and its connection has room. A
// connection without room wakes the dispatcher when it drains.
func (c *consumer) ready() bool {
	return c.permits > 0 && c.unacked < c.maxUnacked && c.c.msgs.room()
}

// pick chooses the consumer of the next entry for the non-key types.
func (d *dispatchState) pick() *consumer {
	if !d.shared() {
		if a := d.active; a != nil && a.permits > 0 && a.c.msgs.room() {
			return a
		}
		return nil
	}
	n := len(d.consumers)
	for i := range n {
		c := d.consumers[(d.rr+i)%n]
		if c.ready() {
			d.rr = (d.rr + i + 1) % n
			return c
		}
	}
	return nil
}

// readBudget is how many entries a round reads to deliver msgs messages
// (the consumers' permits, within the dispatch rates): msgs over the
// average messages per entry dispatched so far (rounded up, so that the
// last entry a consumer can start is read in the same round), and at most
// MaxReadEntries. Pulsar's dispatchers estimate the same way. Reading an
// entry per permit would read up to a batch's size times too many, and
// every entry the consumers cannot take goes back to the replay set, to be
// read again.
func (d *dispatchState) readBudget(msgs int64) int64 {
	if msgs <= 0 {
		return 0
	}
	entries := int64(math.Ceil(float64(msgs) / max(d.msgsPerEntry, 1)))
	return min(entries, int64(d.cfg.MaxReadEntries))
}

// permits is how many messages the consumers can take now; a consumer
// whose connection has no room counts none, so that a round does not read
// what nobody can take.
func (d *dispatchState) permits() int64 {
	if !d.shared() {
		if a := d.active; a != nil && a.c.msgs.room() {
			return max(a.permits, 0)
		}
		return 0
	}
	var n int64
	for _, c := range d.consumers {
		if c.ready() {
			n += c.permits
		}
	}
	return min(n, d.unackedRoom())
}

// delayDisabled reports whether delivery times are ignored (the topic's
// delayed delivery policy is not active).
func (d *dispatchState) delayDisabled() bool {
	return d.delayedOff != nil && d.delayedOff.Load()
}

// countUnacked adds n messages to what c, and so the subscription, holds
// unacked.
func (d *dispatchState) countUnacked(c *consumer, n int) {
	c.unacked += n
	d.unacked += int64(n)
}

// unackedRoom is how many more messages a Shared or Key_Shared
// subscription's consumers may take unacked together (math.MaxInt64: no
// limit), 0 while it is blocked on them.
func (d *dispatchState) unackedRoom() int64 {
	var limit int64
	if d.unackedLimit != nil {
		limit = d.unackedLimit.Load()
	}
	if limit <= 0 || !d.shared() {
		d.blocked = false
		return math.MaxInt64
	}
	switch {
	case d.unacked >= limit:
		d.blocked = true
	case d.blocked && d.unacked <= limit/2:
		d.blocked = false
	}
	if d.blocked {
		return 0
	}
	return limit - d.unacked
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
