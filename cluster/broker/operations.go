package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/topology"
)

// This file is what the admin API does to topics: statistics, and the
// operations pulsar-admin offers on topics and subscriptions. Errors wrap
// wire sentinels, which the admin API maps to HTTP statuses
// (TopicNotFound and SubscriptionNotFound → 404, NotAllowed → 405 or 409,
// ServiceNotReady → 503 or a redirect).

// TopicStats is a topic's state as pulsar-admin's `topics stats` shows it
// (the admin API renders Pulsar's JSON from it).
type TopicStats struct {
	MsgInCounter    int64
	BytesInCounter  int64
	MsgOutCounter   int64
	BytesOutCounter int64
	StorageSize     int64
	Entries         int64
	LastConfirmed   mledger.Position
	Terminated      bool
	// Created is when the topic was created (zero when its record
	// predates the time being kept).
	Created time.Time
	// LastPublishMillis is when a message was last stored since the
	// topic loaded, in unix milliseconds (0: none), as Pulsar reports it.
	LastPublishMillis int64
	Publishers        []PublisherStats
	Subscriptions     map[string]SubscriptionStats
}

// PublisherStats is one connected producer.
type PublisherStats struct {
	ProducerID     uint64
	ProducerName   string
	AccessMode     string
	Address        string
	ConnectedSince time.Time
	ClientVersion  string
	Metadata       map[string]string
	MsgInCounter   int64
	BytesInCounter int64
}

// SubscriptionStats is one subscription.
type SubscriptionStats struct {
	Type            string // Exclusive, Shared, Failover, Key_Shared
	Durable         bool
	MsgBacklog      int64
	MarkDelete      mledger.Position
	ReadPosition    mledger.Position
	UnackedMessages int64
	MsgOutCounter   int64
	BytesOutCounter int64
	DelayedMessages int64
	// IgnoredAcks counts the acked ids ignored since the topic was
	// loaded: positions never delivered to the consumer that acked them.
	IgnoredAcks int64
	// Expired counts the entries consumed by message expiry since the
	// topic was loaded (expiry.go).
	Expired int64
	// AckedCounter counts the message ids its consumers acked (an
	// ignored one not), and RedeliveredCounter the messages delivered
	// again (after a negative ack, an ack timeout or a consumer's
	// leaving), since the topic was loaded.
	AckedCounter, RedeliveredCounter int64
	// BlockedOnUnacked says its consumers hold as many unacked messages as
	// the topic's maxUnackedMessagesOnSubscription allows: dispatch waits
	// until acks bring them down to half.
	BlockedOnUnacked bool
	// Replicated says the subscription's state travels to the other
	// regions; ReplicatedStateTaken says when each of them took the state
	// last applied here (its age is now less that).
	Replicated           bool
	ReplicatedStateTaken map[string]time.Time
	Consumers            []ConsumerStats
	ActiveConsumerName   string
}

// ReplicatedStateAges returns, per other region, the age at now of its
// state last applied here (nil for none).
func (ss SubscriptionStats) ReplicatedStateAges(now time.Time) map[string]time.Duration {
	if len(ss.ReplicatedStateTaken) == 0 {
		return nil
	}
	out := make(map[string]time.Duration, len(ss.ReplicatedStateTaken))
	for region, at := range ss.ReplicatedStateTaken {
		out[region] = max(0, now.Sub(at))
	}
	return out
}

// ConsumerStats is one connected consumer.
type ConsumerStats struct {
	ConsumerName     string
	Address          string
	ConnectedSince   time.Time
	ClientVersion    string
	Metadata         map[string]string
	AvailablePermits int64
	UnackedMessages  int64
	MsgOutCounter    int64
	BytesOutCounter  int64
	// LastAckedMillis, LastConsumedMillis and LastFlowMillis are when the
	// consumer last acked, was sent a message and sent FLOW, in unix
	// milliseconds (0: never), as Pulsar reports them.
	LastAckedMillis, LastConsumedMillis, LastFlowMillis int64
}

// Stats returns the topic's statistics.
func (t *Topic) Stats() TopicStats {
	ms := t.ml.Stats()
	st := TopicStats{StorageSize: ms.StorageSize, Entries: ms.Entries, LastConfirmed: ms.LastConfirmed,
		Terminated: ms.Terminated, Created: ms.Created, LastPublishMillis: t.lastPublish.Load(),
		Subscriptions: map[string]SubscriptionStats{}}
	t.mu.Lock()
	for p := range t.mu.producers {
		ps := PublisherStats{ProducerID: p.id, ProducerName: p.name, AccessMode: p.mode.String(),
			Address: p.c.nc.RemoteAddr().String(), ConnectedSince: p.since,
			ClientVersion: p.c.clientVersion, Metadata: maps.Clone(p.metadata),
			MsgInCounter: p.in.msgs.Load(), BytesInCounter: p.in.bytes.Load()}
		st.Publishers = append(st.Publishers, ps)
	}
	t.mu.Unlock()
	st.MsgInCounter, st.BytesInCounter = t.in.msgs.Load(), t.in.bytes.Load()
	slices.SortFunc(st.Publishers, func(a, b PublisherStats) int { return int(a.ProducerID) - int(b.ProducerID) })
	for _, s := range t.subscriptions() {
		ss := s.stats()
		st.Subscriptions[s.name] = ss
		st.MsgOutCounter += ss.MsgOutCounter
		st.BytesOutCounter += ss.BytesOutCounter
	}
	return st
}

func (s *subscription) stats() SubscriptionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := SubscriptionStats{Type: s.mu.kind.String(), Durable: s.cursor.Durable(), MsgBacklog: s.cursor.Backlog(),
		MarkDelete: s.cursor.MarkDeletePosition(), ReadPosition: s.cursor.ReadPosition(),
		DelayedMessages: int64(s.mu.delayed.Len()), BlockedOnUnacked: s.mu.blocked}
	ss.MsgOutCounter, ss.BytesOutCounter = s.out.msgs.Load(), s.out.bytes.Load()
	ss.IgnoredAcks, ss.Expired = s.ignoredAcks.Load(), s.expired.Load()
	ss.AckedCounter, ss.RedeliveredCounter = s.acked.Load(), s.redelivered.Load()
	if ss.Replicated = s.replicated(); ss.Replicated && s.topic.rs != nil {
		ss.ReplicatedStateTaken = s.topic.rs.takenAt(s.name)
	}
	if s.mu.active != nil {
		ss.ActiveConsumerName = s.mu.active.name
	}
	for _, c := range s.mu.consumers {
		ss.UnackedMessages += int64(c.unacked)
		ss.Consumers = append(ss.Consumers, ConsumerStats{ConsumerName: c.name, Address: c.c.nc.RemoteAddr().String(),
			ConnectedSince: c.since, ClientVersion: c.c.clientVersion, Metadata: maps.Clone(c.metadata),
			AvailablePermits: c.permits, UnackedMessages: int64(c.unacked),
			MsgOutCounter: c.out.msgs.Load(), BytesOutCounter: c.out.bytes.Load(),
			LastAckedMillis: c.lastAck.Load(), LastConsumedMillis: c.lastConsumed.Load(), LastFlowMillis: c.lastFlow.Load()})
	}
	return ss
}

// InternalStats are the managed ledger's statistics and the cursors'
// positions (pulsar-admin's `topics stats-internal`).
type InternalStats struct {
	Ledger  mledger.Stats
	Ledgers []int64
	Cursors map[string]SubscriptionStats
}

// InternalStats returns the storage view of the topic.
func (t *Topic) InternalStats() InternalStats {
	st := InternalStats{Ledger: t.ml.Stats(), Ledgers: t.ml.Ledgers(), Cursors: map[string]SubscriptionStats{}}
	for _, s := range t.subscriptions() {
		st.Cursors[s.name] = s.stats()
	}
	return st
}

// LastMessageID is the position of the topic's last entry ((ledger, -1)
// when it has none).
func (t *Topic) LastMessageID() mledger.Position { return t.ml.LastConfirmed() }

// Terminate seals the topic: no more messages are accepted, and consumers
// learn the end when they reach it. Producers are disconnected: the one
// place pulsar-client-go gives up on a terminated topic is its reconnect,
// which the topic refuses with TopicTerminated.
func (t *Topic) Terminate(ctx context.Context) (mledger.Position, error) {
	p, err := t.ml.Terminate(ctx)
	if err != nil {
		return p, fmt.Errorf("%w: terminate %s: %v", wire.ErrPersistence, t.Name(), err)
	}
	t.disconnectProducers()
	return p, nil
}

// Subscriptions returns the names of the topic's subscriptions.
func (t *Topic) Subscriptions() []string {
	var names []string
	for _, s := range t.subscriptions() {
		names = append(names, s.name)
	}
	slices.Sort(names)
	return names
}

// CreateSubscription creates a durable subscription positioned after
// start, or at the end (latest) when start is nil.
func (t *Topic) CreateSubscription(ctx context.Context, name string, start *mledger.Position) error {
	if _, err := t.existing(name); err == nil {
		return fmt.Errorf("%w: subscription %s already exists on %s", wire.ErrNotAllowed, name, t.Name())
	}
	s, err := t.createSubscription(ctx, name, mledger.Latest)
	if err != nil {
		return err
	}
	if start != nil {
		return s.cursor.ResetAfter(*start)
	}
	return nil
}

// createSubscription creates a durable subscription with no consumers at
// initial, within the topic's subscription limit; one that exists is
// returned as it is.
func (t *Topic) createSubscription(ctx context.Context, name string, initial mledger.InitialPosition) (*subscription, error) {
	eff, err := t.svc.resolve(t.name)
	if err != nil {
		return nil, err
	}
	if err := t.admitSubscription(name, eff.MaxSubscriptionsPerTopic); err != nil {
		return nil, err
	}
	return t.subscription(ctx, name, pb.CommandSubscribe_Exclusive, true, initial, nil)
}

// DeleteSubscription deletes a subscription; with consumers connected it
// is refused unless force, which disconnects them.
func (t *Topic) DeleteSubscription(ctx context.Context, name string, force bool) error {
	s, err := t.existing(name)
	if err != nil {
		return err
	}
	if s.consumerCount() > 0 && !force {
		return fmt.Errorf("%w: subscription %s has active consumers", wire.ErrConsumerBusy, name)
	}
	for _, c := range s.consumerList() {
		c.disconnect(ctx)
	}
	return s.unsubscribe(ctx, nil)
}

// Skip consumes the next n messages' entries of a subscription (n < 0:
// everything, pulsar-admin's clear-backlog).
func (t *Topic) Skip(name string, n int64) error {
	s, err := t.existing(name)
	if err != nil {
		return err
	}
	if n < 0 {
		n = s.cursor.Backlog()
	}
	_, err = s.cursor.Skip(n)
	s.dropPending()
	s.replicatedChanged()
	return err
}

// SetSubscriptionReplicated turns on or off the replication of a
// subscription's state to the topic's other regions (Pulsar's
// replicatedSubscriptionStatus). Turning it off stops this region's writes;
// the other regions keep the last state they applied.
func (t *Topic) SetSubscriptionReplicated(name string, on bool) error {
	s, err := t.existing(name)
	if err != nil {
		return err
	}
	return s.setReplicated(on)
}

// SubscriptionReplicated reports whether a subscription's state is
// replicated.
func (t *Topic) SubscriptionReplicated(name string) (bool, error) {
	s, err := t.existing(name)
	if err != nil {
		return false, err
	}
	return s.replicated(), nil
}

// ResetCursor moves a subscription to after position p, or to the first
// entry published at or after t (Unix ms), as a seek does: its consumers
// are disconnected and resubscribe.
func (t *Topic) ResetCursor(ctx context.Context, name string, p *mledger.Position, at *int64) error {
	s, err := t.existing(name)
	if err != nil {
		return err
	}
	var id *pb.MessageIdData
	var ts *uint64
	switch {
	case at != nil:
		ts = ptr(uint64(*at))
	case p != nil:
		id = pb.MessageIdData_builder{LedgerId: ptr(uint64(p.Ledger)), EntryId: ptr(uint64(p.Entry))}.Build()
	default:
		return fmt.Errorf("%w: reset needs a position or a time", wire.ErrNotAllowed)
	}
	return s.seek(ctx, id, ts)
}

// ExpireMessages consumes every message of a subscription older than age.
func (t *Topic) ExpireMessages(ctx context.Context, name string, age time.Duration) error {
	s, err := t.existing(name)
	if err != nil {
		return err
	}
	first, _, err := t.storedWithin(ctx, age)
	if err != nil {
		return err
	}
	return s.expireBefore(first)
}

// Peek returns up to n entries a subscription has not consumed, from its
// mark-delete position on, without moving it. A subscription that does not
// exist is first created at the earliest position, as Pulsar's admin API
// has done since 2.6.2 (apache/pulsar#8182): peeking under a new name shows
// the topic's oldest messages, and the subscription stays.
func (t *Topic) Peek(ctx context.Context, name string, n int) ([]mledger.Entry, error) {
	s, err := t.existing(name)
	if errors.Is(err, wire.ErrSubscriptionNotFound) {
		s, err = t.createSubscription(ctx, name, mledger.Earliest)
	}
	if err != nil {
		return nil, err
	}
	var out []mledger.Entry
	p := s.cursor.MarkDeletePosition()
	for len(out) < n {
		es, err := t.ml.ReadAt(ctx, mledger.Position{Ledger: p.Ledger, Entry: p.Entry + 1}, n-len(out))
		if errors.Is(err, mledger.ErrInvalidPosition) {
			// Past the end of that ledger: continue in the next, if any.
			next, ok := t.nextLedger(p.Ledger)
			if !ok {
				break
			}
			p = mledger.Position{Ledger: next, Entry: -1}
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%w: %v", wire.ErrPersistence, err)
		}
		for _, e := range es {
			if !s.cursor.IsAcked(e.Position) {
				out = append(out, e)
			}
			p = e.Position
		}
		if len(es) == 0 {
			break
		}
	}
	return out, nil
}

func (t *Topic) nextLedger(id int64) (int64, bool) {
	for _, l := range t.ml.Ledgers() {
		if l > id {
			return l, true
		}
	}
	return 0, false
}

// FindByTime returns the first entry published (broker time) at or after
// t, Unix ms; found is false when every entry is older.
func (t *Topic) FindByTime(ctx context.Context, unixMs int64) (p mledger.Position, found bool, err error) {
	p, found, err = t.ml.FindByTime(ctx, unixMs)
	if err != nil {
		err = fmt.Errorf("%w: %v", wire.ErrPersistence, err)
	}
	return p, found, err
}

// Message returns the entry at p.
func (t *Topic) Message(ctx context.Context, p mledger.Position) (mledger.Entry, error) {
	es, err := t.ml.ReadAt(ctx, p, 1)
	if err != nil {
		if errors.Is(err, mledger.ErrInvalidPosition) {
			return mledger.Entry{}, fmt.Errorf("%w: no message at %v on %s", wire.ErrTopicNotFound, p, t.Name())
		}
		return mledger.Entry{}, fmt.Errorf("%w: %v", wire.ErrPersistence, err)
	}
	return es[0], nil
}

// ---- service-level operations ----

// DeleteTopic deletes a topic this broker owns: its ledgers, cursors and
// schemas. With producers or consumers connected it is refused unless
// force, which disconnects them.
func (s *Service) DeleteTopic(ctx context.Context, t topology.TopicName, force bool) error {
	topic, err := s.Topic(ctx, t, false)
	if err != nil {
		return err
	}
	topic.mu.Lock()
	busy := len(topic.mu.producers) > 0
	for _, sub := range topic.mu.subs {
		busy = busy || sub.consumerCount() > 0
	}
	topic.mu.Unlock()
	if busy && !force {
		return fmt.Errorf("%w: topic %s has active producers or consumers", wire.ErrNotAllowed, t)
	}
	s.mu.Lock()
	l := s.mu.topics[t.String()]
	if l != nil && l.topic == topic {
		delete(s.mu.topics, t.String())
	}
	s.mu.Unlock()
	topic.close(ctx)
	ml, err := s.ledgers.Open(ctx, t.String())
	if err != nil {
		return fmt.Errorf("%w: reopen %s to delete it: %v", wire.ErrServiceNotReady, t, err)
	}
	if err := ml.Delete(ctx); err != nil {
		return fmt.Errorf("%w: delete %s: %v", wire.ErrPersistence, t, err)
	}
	if _, err := s.schemas.Delete(ctx, t.String()); err != nil && !errors.Is(err, schema.ErrNotFound) {
		s.log.Warn("deleting the schemas of a deleted topic", "topic", t.String(), "err", err)
	}
	// The topic's replicated subscription states of this region go with
	// it. Were one left behind (the global store unreachable), it could not
	// ack anything of a topic created again: it names the old incarnation.
	if err := s.gstore.DeleteSubscriptionStates(ctx, t, "", s.cfg.Region); err != nil {
		s.log.Warn("deleting the replicated subscription states of a deleted topic", "topic", t.String(), "err", err)
	}
	return nil
}

// Unload closes a topic on this broker (clients reconnect and it loads
// again, here or elsewhere), within CloseTimeout whatever its clients do.
func (s *Service) Unload(t topology.TopicName) {
	s.mu.Lock()
	l := s.mu.topics[t.String()]
	s.mu.Unlock()
	if l == nil {
		return
	}
	<-l.done
	if l.topic != nil {
		s.unload(t.String(), l)
	}
}

// Config returns the service's configuration.
func (s *Service) Config() ServiceConfig { return s.cfg }

// Region is the region this broker serves.
func (s *Service) Region() string { return s.cfg.Region }

// Self is this broker's ownership record: its id and URLs.
func (s *Service) Self() loadmgr.Owner { return s.cfg.self() }

// Schemas returns the schema registry.
func (s *Service) Schemas() *schema.Registry { return s.schemas }

// PartitionedTopics returns the partitioned topics of tenant/ns and their
// partition counts, as the global configuration's cache has them.
func (s *Service) PartitionedTopics(tenant, ns string) map[topology.TopicName]int {
	out := map[topology.TopicName]int{}
	for _, name := range s.policies.Topics(tenant, ns) {
		t, err := topology.ParseTopicName(name)
		if err != nil {
			continue
		}
		if tp, ok := s.policies.Topic(t); ok && tp.Partitions > 0 {
			out[t] = tp.Partitions
		}
	}
	return out
}

// declaredPartitions names every partition of the persistent partitioned
// topics of tenant/ns. A partition is created where it is served when it
// is first used, not when its topic is (see StoredPartitions), and is
// listed from the start all the same, as on Pulsar: a regex consumer
// finds a partitioned topic before anyone has produced to it. The count
// is bounded by BrokerDefaults.MaxNumPartitions per topic.
func (s *Service) declaredPartitions(tenant, ns string) []string {
	var names []string
	for t, n := range s.PartitionedTopics(tenant, ns) {
		if t.Domain != topology.Persistent {
			continue
		}
		for i := range n {
			names = append(names, t.PartitionN(i).String())
		}
	}
	return names
}

// StoredPartitions returns the partitions of partitioned topic t, below
// its count n, that have been created in this region (they have a managed
// ledger), in order, from one listing of the metadata store. A partition
// is created when first used, so a partitioned topic's operations over
// every partition (its delete) visit these rather than all n: deleting a
// topic of many partitions, few of them used, costs what was used.
func (s *Service) StoredPartitions(ctx context.Context, t topology.TopicName, n int) ([]topology.TopicName, error) {
	// A partition's name is its topic's, a suffix and its index; the
	// key of the suffix's end, without the index, prefixes every one.
	first := t.Base().PartitionN(0).String()
	prefix := mledger.ListKey(s.cfg.Region, first[:len(first)-1])
	kvs, _, err := s.store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrMetadata, err)
	}
	var out []topology.TopicName
	for _, kv := range kvs {
		name, err := meta.Name(kv.Key)
		if err != nil {
			continue
		}
		p, err := topology.ParseTopicName(name)
		if err == nil && p.IsPartition() && p.Base() == t.Base() && p.Partition < n {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b topology.TopicName) int { return a.Partition - b.Partition })
	return out, nil
}
