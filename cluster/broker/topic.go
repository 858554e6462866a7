package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Topic is a topic loaded on this broker: its managed ledger, producers,
// subscriptions and deduplication state. A non-persistent topic is served
// by the same machinery (see subscription), so its messages do reach the
// bookies; what differs is that nothing is kept for a subscriber that is
// not connected.
//
// Ownership: mu guards the producer and subscription sets and the producer
// epoch. Appends go straight to the managed ledger, which orders them;
// each subscription has its own dispatcher. The lock order is the
// package doc's.
type Topic struct {
	svc  *Service
	name topology.TopicName
	ml   *mledger.ManagedLedger
	eff  global.Effective // policies as of load
	dd   *dedup
	in   counters // stored messages and bytes
	// limits are the policies checked on each SEND (publishrate.go).
	limits topicLimits
	// dispatchRates limit what the subscriptions deliver (dispatchrate.go).
	dispatchRates topicDispatchRates
	// published measures the publish rate a relative dispatch rate is
	// raised by (dispatchrate.go).
	published publishRateMeter
	// subscribeRate limits each consumer's SUBSCRIBEs (subscriberate.go).
	subscribeRate subscribeLimiter
	// maxUnackedOnSubscription is the most messages the consumers of one
	// Shared or Key_Shared subscription may hold unacked together (0:
	// none), set by applyPolicies.
	maxUnackedOnSubscription atomic.Int64
	// delayedDeliveryOff is set when the topic's delayed delivery policy
	// is not active: messages are dispatched whatever their delivery time.
	delayedDeliveryOff atomic.Bool
	// lastPublish is when a SEND was last stored, in unix milliseconds (0:
	// none since the topic loaded): Pulsar's lastPublishTimestamp.
	lastPublish atomic.Int64
	// repl are the remote regions whose meridian.repl.<remote> cursors
	// this topic was last synced to, sorted (see syncReplicationCursors).
	// Set by the load, then only by the Service's replicationLoop.
	repl []string
	// rs carries the replicated subscriptions to and from the other regions
	// (replsubs.go); nil when the topic replicates nowhere. Set by the load.
	rs *replicatedSubs
	// overAgeQuota is the last backlog quota check's verdict on the
	// message_age quota (quota.go), by which a new producer is admitted.
	overAgeQuota atomic.Bool

	closed    chan struct{}
	closeOnce sync.Once
	// sends admits SENDs until a hand-off fences the topic (handoff.go).
	sends sendGate
	// appendMu keeps tracked appends in the managed ledger's order on
	// their way to the deduplication recorder (see append).
	appendMu sync.Mutex

	mu struct {
		sync.Mutex
		closing   bool
		producers map[*producer]struct{}
		// epoch counts exclusive takeovers (ExclusiveWithFencing); a
		// producer announcing an older epoch is fenced.
		epoch     uint64
		exclusive *producer   // the holder in an exclusive access mode
		waiting   []*producer // WaitForExclusive producers, in arrival order
		subs      map[string]*subscription
		// names of the producers connected, for ProducerBusy on reuse
		names map[string]*producer
	}
}

func newTopic(ctx context.Context, s *Service, t topology.TopicName, ml *mledger.ManagedLedger, eff global.Effective) (*Topic, error) {
	dd, err := openDedup(ctx, ml, s.cfg.DedupSnapshotInterval, s.clock)
	if err != nil {
		return nil, err
	}
	ml.SetRetention(retentionOf(eff))
	tp := &Topic{svc: s, name: t, ml: ml, eff: eff, dd: dd, closed: make(chan struct{})}
	tp.mu.producers = make(map[*producer]struct{})
	tp.mu.subs = make(map[string]*subscription)
	tp.mu.names = make(map[string]*producer)
	// Every durable cursor is a subscription, with consumers or not, as on
	// Pulsar: stats list it and its backlog counts from load.
	for _, name := range ml.DurableCursors() {
		if name == dedupCursor {
			continue
		}
		if _, err := tp.subscription(ctx, name, pb.CommandSubscribe_Exclusive, true, mledger.Latest, nil); err != nil {
			_ = dd.stopRecording(ctx) // nothing was appended: at once
			return nil, err
		}
	}
	tp.rs = startReplicatedSubs(tp)
	return tp, nil
}

// append hands msg to the managed ledger (then as in AppendAsync) and,
// when deduplication tracks it (track), queues its future for the recorder
// as the producer's name up to highest. appendMu spans both, so the
// recorder gets appends in the order they are stored. A failed append is
// forgotten at once.
func (t *Topic) append(ctx context.Context, msg []byte, n int, track bool, name string, highest int64, then func(mledger.Position, error)) (*mledger.AppendFuture, error) {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	fut, err := t.ml.AppendAsync(ctx, msg, n, then)
	switch {
	case err != nil && track:
		t.dd.failed(name)
	case err == nil && track:
		t.dd.queueAppend(name, highest, fut)
	}
	return fut, err
}

// retentionOf is the managed ledger's retention for a topic's effective
// policies: Pulsar's minutes and MB, where -1 keeps forever (or without a
// size limit) and 0 keeps nothing once consumed.
func retentionOf(eff global.Effective) (time.Duration, int64) {
	keep, size := time.Duration(-1), int64(-1)
	if m := eff.Retention.RetentionTimeInMinutes; m >= 0 {
		keep = time.Duration(m) * time.Minute
	}
	if mb := eff.Retention.RetentionSizeInMB; mb >= 0 {
		size = mb << 20
	}
	return keep, size
}

// Name returns the topic's full name.
func (t *Topic) Name() string { return t.name.String() }

// close takes no more SENDs and receipts the ones taken (settleSends),
// disconnects every producer and consumer (CLOSE_PRODUCER and
// CLOSE_CONSUMER, so clients look the topic up again), stops the
// dispatchers, snapshots deduplication and closes the managed ledger, all
// by ctx's deadline: waiting for receipts is bounded by it, telling
// clients to go only queues frames, and no dispatcher waits on a
// consumer, so no peer can hold it up.
func (t *Topic) close(ctx context.Context) { t.closeTo(ctx, nil) }

// closeTo is close, with the clients told where the topic moved (dest,
// when known: CLOSE_PRODUCER and CLOSE_CONSUMER carry its URLs).
func (t *Topic) closeTo(ctx context.Context, dest *loadmgr.Owner) {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.mu.closing = true
		producers := append(slices.Collect(maps.Keys(t.mu.producers)), t.mu.waiting...)
		t.mu.waiting = nil
		t.mu.Unlock()
		if err := t.settleSends(ctx, producers); err != nil {
			t.svc.log.Debug("closing topic: receipts still owed at the deadline", "topic", t.Name(), "err", err)
		}
		for _, p := range producers {
			p.disconnectTo(dest)
		}
		if t.rs != nil {
			t.rs.stop() // before the subscriptions it syncs
		}
		// closing is set: no subscription is added from here on.
		for _, s := range t.subscriptions() {
			s.closeTo(ctx, true, dest)
		}
		t.dd.snapshotRecorded(ctx)
		if err := t.ml.Close(ctx); err != nil {
			t.svc.log.Debug("closing managed ledger", "topic", t.Name(), "err", err)
		}
		close(t.closed)
	})
}

// idle reports a topic with no producers, no subscribers and no entries:
// the first consumer's schema becomes the topic's (Pulsar's rule).
func (t *Topic) idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.producers) > 0 || len(t.mu.waiting) > 0 || t.ml.NumberOfEntries() > 0 {
		return false
	}
	for _, s := range t.mu.subs {
		if s.consumerCount() > 0 {
			return false
		}
	}
	return true
}

// addProducer registers a producer per its access mode, returning it ready
// (ready false: WaitForExclusive, queued behind the current holder), unless
// the topic already has maxProducers producers (0: no limit; replication
// producers neither count nor are refused, as in Pulsar). The producers an
// ExclusiveWithFencing producer displaces are disconnected.
func (t *Topic) addProducer(p *producer, mode pb.ProducerAccessMode, epoch *uint64, maxProducers int) (ready bool, err error) {
	ready, fenced, err := t.admitProducer(p, mode, epoch, maxProducers)
	for _, q := range fenced {
		q.disconnect()
	}
	return ready, err
}

func (t *Topic) admitProducer(p *producer, mode pb.ProducerAccessMode, epoch *uint64, maxProducers int) (ready bool, fenced []*producer, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closing {
		return false, nil, fmt.Errorf("%w: topic %s is closing", wire.ErrServiceNotReady, t.Name())
	}
	if t.ml.Terminated() {
		return false, nil, fmt.Errorf("%w: topic %s is terminated", wire.ErrTopicTerminated, t.Name())
	}
	if epoch != nil && *epoch < t.mu.epoch {
		return false, nil, fmt.Errorf("%w: producer epoch %d is older than the topic's %d", wire.ErrProducerFenced, *epoch, t.mu.epoch)
	}
	if other, ok := t.mu.names[p.name]; ok && other != p {
		return false, nil, fmt.Errorf("%w: producer with name '%s' is already connected to topic %s", wire.ErrProducerBusy, p.name, t.Name())
	}
	if maxProducers > 0 && !p.repl {
		n := 0
		for q := range t.mu.producers {
			if !q.repl {
				n++
			}
		}
		if n >= maxProducers {
			return false, nil, fmt.Errorf("%w: topic %s reached max producers limit (%d)", wire.ErrProducerBusy, t.Name(), maxProducers)
		}
	}
	switch mode {
	case pb.ProducerAccessMode_Shared:
		if t.mu.exclusive != nil {
			return false, nil, fmt.Errorf("%w: topic %s has an exclusive producer", wire.ErrProducerBusy, t.Name())
		}
	case pb.ProducerAccessMode_Exclusive:
		if len(t.mu.producers) > 0 {
			// Pulsar's answer: the newcomer is fenced out.
			return false, nil, fmt.Errorf("%w: topic %s already has producers", wire.ErrProducerFenced, t.Name())
		}
		t.mu.epoch++
	case pb.ProducerAccessMode_WaitForExclusive:
		if len(t.mu.producers) > 0 {
			t.mu.waiting = append(t.mu.waiting, p)
			t.mu.names[p.name] = p
			return false, nil, nil
		}
		t.mu.epoch++
	case pb.ProducerAccessMode_ExclusiveWithFencing:
		fenced = slices.Collect(maps.Keys(t.mu.producers))
		t.mu.epoch++
	default:
		return false, nil, fmt.Errorf("%w: unknown producer access mode %v", wire.ErrNotAllowed, mode)
	}
	for _, q := range fenced {
		t.removeProducerLocked(q)
	}
	if mode != pb.ProducerAccessMode_Shared {
		t.mu.exclusive = p
	}
	t.mu.producers[p] = struct{}{}
	t.mu.names[p.name] = p
	p.epoch = t.mu.epoch
	return true, fenced, nil
}

// disconnectProducers closes the session of every producer holding the
// topic (CLOSE_PRODUCER: the clients look it up again).
func (t *Topic) disconnectProducers() {
	t.mu.Lock()
	producers := slices.Collect(maps.Keys(t.mu.producers))
	t.mu.Unlock()
	for _, p := range producers {
		p.disconnect()
	}
}

// removeProducer forgets p, promoting the first WaitForExclusive producer
// when p held the topic exclusively.
func (t *Topic) removeProducer(p *producer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeProducerLocked(p)
}

func (t *Topic) removeProducerLocked(p *producer) {
	if t.mu.names[p.name] == p {
		delete(t.mu.names, p.name)
	}
	if i := slices.Index(t.mu.waiting, p); i >= 0 {
		t.mu.waiting = slices.Delete(t.mu.waiting, i, i+1)
		return
	}
	delete(t.mu.producers, p)
	if t.mu.exclusive != p {
		return
	}
	t.mu.exclusive = nil
	if len(t.mu.waiting) > 0 && !t.mu.closing {
		next := t.mu.waiting[0]
		t.mu.waiting = t.mu.waiting[1:]
		t.mu.epoch++
		t.mu.exclusive = next
		t.mu.producers[next] = struct{}{}
		next.epoch = t.mu.epoch
		next.becameReady() // only queues a reply
	}
}

// subscription returns the named subscription, creating it (and its
// cursor) on first use.
func (t *Topic) subscription(ctx context.Context, name string, kind pb.CommandSubscribe_SubType, durable bool,
	initial mledger.InitialPosition, start *pb.MessageIdData) (*subscription, error) {
	if name == dedupCursor || name == indexReader || strings.HasPrefix(name, ReplicationProducerPrefix) {
		return nil, fmt.Errorf("%w: subscription name %q is reserved", wire.ErrNotAllowed, name)
	}
	if t.name.Domain == topology.NonPersistent {
		// A non-persistent topic's subscriptions live only while their
		// consumers do, and see only what is published while they do: on
		// non-durable cursors from the end, which pin no storage, so what
		// the topic's ledgers hold is trimmed as they roll over.
		durable, initial, start = false, mledger.Latest, nil
	}
	t.mu.Lock()
	if t.mu.closing {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: topic %s is closing", wire.ErrServiceNotReady, t.Name())
	}
	if s, ok := t.mu.subs[name]; ok {
		t.mu.Unlock()
		return s, nil
	}
	t.mu.Unlock()

	var cur *mledger.Cursor
	var err error
	if durable {
		cur, err = t.ml.OpenCursor(ctx, name, initial)
	} else {
		// A reader's start id wins over the initial position: the client
		// sends (-1,-1) for earliest and (MaxInt64,MaxInt64) for latest.
		if start != nil && isEarliestOrLatest(start) {
			initial = mledger.Latest
			if int64(start.GetLedgerId()) < 0 {
				initial = mledger.Earliest
			}
		}
		cur, err = t.ml.OpenNonDurableCursor(name, initial)
		if err == nil && start != nil && !isEarliestOrLatest(start) {
			err = cur.ResetAfter(startAfter(start))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open cursor %s: %v", wire.ErrServiceNotReady, name, err)
	}
	s := newSubscription(t, name, kind, cur)
	t.mu.Lock()
	other, raced := t.mu.subs[name] // lost a race with another subscribe
	closing := t.mu.closing
	if !raced && !closing {
		t.mu.subs[name] = s
	}
	t.mu.Unlock()
	// A subscription that is not kept closes without Topic.mu: its close
	// waits for its dispatcher and persists its cursor.
	switch {
	case raced:
		s.close(ctx, false)
		return other, nil
	case closing:
		s.close(ctx, false)
		return nil, fmt.Errorf("%w: topic %s is closing", wire.ErrServiceNotReady, t.Name())
	}
	return s, nil
}

// subscriptionNamed returns the subscription name, nil when there is none.
func (t *Topic) subscriptionNamed(name string) *subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.subs[name]
}

// forgetSubscription drops s once its last consumer has gone (non-durable)
// or it was unsubscribed.
func (t *Topic) forgetSubscription(s *subscription) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.subs[s.name] == s {
		delete(t.mu.subs, s.name)
	}
}

// isEarliestOrLatest reports the client's special start ids: earliest is
// (-1,-1), latest is (MaxInt64,MaxInt64).
func isEarliestOrLatest(id *pb.MessageIdData) bool {
	l := int64(id.GetLedgerId())
	return l < 0 || l == int64(^uint64(0)>>1)
}

// startAfter is the position a reader's cursor starts after: the entry
// before its start id, so that the start entry itself is delivered. The
// client drops what precedes its start (all of it but the start message
// itself, when it asked for an inclusive start): Pulsar's rule, which
// treats every start id as a batch id.
func startAfter(id *pb.MessageIdData) mledger.Position {
	return mledger.Position{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId()) - 1}
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
		out = append(out, sub.consumerConns()...)
	}
	return out
}

// admitSubscription refuses a new subscription name when the topic already
// has maxSubscriptions (0: no limit). Only what clients and the admin API
// create is checked: the subscriptions a topic restores from its cursors
// when it loads always come back. Like Pulsar's, the check is not atomic
// with the creation.
func (t *Topic) admitSubscription(name string, maxSubscriptions int) error {
	if maxSubscriptions <= 0 {
		return nil
	}
	t.mu.Lock()
	_, known := t.mu.subs[name]
	n := len(t.mu.subs)
	t.mu.Unlock()
	if !known && n >= maxSubscriptions {
		return fmt.Errorf("%w: topic %s reached max subscriptions limit (%d)", wire.ErrNotAllowed, t.Name(), maxSubscriptions)
	}
	return nil
}

// mayCreateOnSubscribe reports whether a subscribe (or a producer's
// initial subscription) may create the durable subscription name: it
// exists already, the topic is non-persistent, or the topic's policies
// allow it (Pulsar's allowAutoSubscriptionCreation, topic over namespace
// over broker). The admin API creates subscriptions whatever it says.
func (t *Topic) mayCreateOnSubscribe(name string, eff global.Effective) bool {
	if eff.AllowAutoSubscriptionCreation || t.name.Domain == topology.NonPersistent {
		return true
	}
	_, err := t.existing(name)
	return err == nil
}

func (t *Topic) subscriptions() []*subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := make([]*subscription, 0, len(t.mu.subs))
	for _, s := range t.mu.subs {
		subs = append(subs, s)
	}
	return subs
}

// counters are a producer's or consumer's message and byte counts.
type counters struct {
	msgs, bytes atomic.Int64
}

func (c *counters) add(msgs, bytes int) {
	c.msgs.Add(int64(msgs))
	c.bytes.Add(int64(bytes))
}

// admitConsumer refuses a new consumer when the topic's subscriptions
// already have maxConsumers between them (0: no limit). It runs before the
// subscription is looked up or created, as Pulsar's check does, and like it
// is not atomic with the attach: consumers subscribing at the same moment
// may all pass it.
func (t *Topic) admitConsumer(maxConsumers int) error {
	if maxConsumers <= 0 {
		return nil
	}
	n := 0
	for _, s := range t.subscriptions() {
		n += s.consumerCount()
	}
	if n >= maxConsumers {
		return fmt.Errorf("%w: topic %s reached max consumers limit (%d)", wire.ErrConsumerBusy, t.Name(), maxConsumers)
	}
	return nil
}

func (t *Topic) existing(name string) (*subscription, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.mu.subs[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("%w: subscription %s does not exist on %s", wire.ErrSubscriptionNotFound, name, t.Name())
}
