package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// Moving a namespace's clients to its active region.
//
// When a namespace's active region (DESIGN §6) is another region, lookups
// here redirect to it (Service.Lookup), and the clients already connected
// here are moved there: each producer and consumer of the namespace is sent
// CommandTopicMigrated and then closed. pulsar-client-go only records the
// URL of a TOPIC_MIGRATED (SetRedirectedClusterURI) and looks the topic up
// through it from then on; it is the CLOSE that makes it go. So the URL
// lists the brokers of every region of the namespace's set, the active
// region's first: a client sent to the active region's brokers alone could
// never leave them when that region fails, while through the others it is
// redirected to whichever region is active then.
//
// Nothing is lost on the way:
//   - A producer's SENDs are shut out first (dropped unanswered, as in a
//     hand-off), then every SEND it took is answered with its receipt, the
//     entries stored here are awaited in the new region (replication,
//     migrationReplicationGrace at most), and only then is it told to go.
//     The client resends what has no receipt, in the new region, so each
//     message is stored once, and after every message it stored here.
//   - A subscription's dispatch stops first, while acks still reach its
//     cursor; the consumers' last acks (pulsar-client-go groups them for
//     up to 100 ms) are awaited for migrationAckGrace, a replicated
//     subscription's state is written to the global store (flushed, past
//     its Interval), and then the consumers are told to go. The region
//     they go to reads that state before it attaches them
//     (replicatedSubs.catchUp), so what was acked here is not delivered
//     there. What they hold unacked is delivered again, which is not a
//     duplicate.
//
// Replication producers (ReplicationProducerPrefix) stay: replication into
// this region must go on whichever region is active, as their lookups are
// never redirected (LookupOptions.Replication).
//
// A cluster migration (Pulsar's PIP-188: POST
// /admin/v2/clusters/{cluster}/migrate?migrated=true) moves the clients of
// every topic of the region the same way, to the URL the operator gave,
// except that a subscription's consumers move only once they have drained
// its backlog here, as in Pulsar.
//
// The Service runs a pass whenever the global configuration changes and
// every migrationResync, so that a client whose lookup was answered here
// just before the switch, and that attached after the pass, moves too.

// migrationResync is how often the loaded topics are checked for clients
// that must move even without a change of the global configuration.
const migrationResync = time.Second

// migrationAckGrace is how long a moving subscription waits, once its
// dispatch has stopped, for its consumers to ack what they were sent:
// pulsar-client-go's ack grouping holds acks up to 100 ms, and the acks
// then cross the network. A consumer whose application holds messages
// longer gets them again in the new region.
const migrationAckGrace = 500 * time.Millisecond

// migrationReplicationGrace is how long a moving producer waits, once its
// SENDs are answered, for replication to have brought everything the topic
// stores here to the region it moves to. Its next messages are stored
// there after these, so that a key's messages stay in order across the
// switch. Past it (replication to that region is down) it moves anyway.
const migrationReplicationGrace = 2 * time.Second

// migrationTarget is where the clients of a namespace are sent: the broker
// service URLs of every region of its set, in one multi-host URL each.
type migrationTarget struct {
	serviceURL, serviceURLTLS string
	// region is the active region the clients go to; "" for a cluster
	// migration, whose target is the operator's URL.
	region string
}

// migrationLoop moves the clients of namespaces active elsewhere, on each
// change of the global configuration and every migrationResync.
func (s *Service) migrationLoop() {
	defer s.wg.Done()
	s.policyPasses(migrationResync, s.migrateInactiveTopics)
}

// migrateInactiveTopics moves the clients of every loaded topic whose
// namespace is active in another region, and, once this region's cluster
// is migrated (Pulsar's PIP-188), of every other loaded topic: all topics
// at once, each within CloseTimeout.
func (s *Service) migrateInactiveTopics() {
	var migrated *global.ClusterMigration
	if own, ok := s.policies.Cluster(s.cfg.Region); ok && own.Migration != nil && own.Migration.Migrated {
		migrated = own.Migration
	}
	var wg sync.WaitGroup
	for _, t := range s.loadedTopics() {
		eff, err := s.resolve(t.name)
		if err != nil {
			continue
		}
		elsewhere := s.failover.lookupElsewhere(t.name, eff)
		switch {
		case eff.ActiveRegion != "" && eff.ActiveRegion != s.cfg.Region:
			to, err := s.migrationTarget(eff)
			if err != nil {
				s.log.Warn("cannot move the clients of a topic active elsewhere", "topic", t.Name(), "err", err)
				continue
			}
			wg.Go(func() { t.migrateClients(s.ctx, to, false) })
		case elsewhere != "":
			// Active here, but the failover session lapsed: the replicated
			// subscriptions' consumers, which get nothing here now, go
			// where the namespace fails over to (failover.go); producers
			// stay, as their messages replicate after the heal.
			eff.ActiveRegion = elsewhere
			to, err := s.migrationTarget(eff)
			if err != nil {
				s.log.Warn("cannot move the consumers of a topic whose failover session lapsed", "topic", t.Name(), "err", err)
				continue
			}
			wg.Go(func() { t.migrateReplicatedConsumers(s.ctx, to) })
		case migrated != nil:
			u := migrated.MigratedClusterURL
			to := migrationTarget{serviceURL: u.BrokerServiceURL, serviceURLTLS: u.BrokerServiceURLTLS}
			wg.Go(func() { t.migrateClients(s.ctx, to, true) })
		}
	}
	wg.Wait()
}

// migrationTarget lists the broker service URLs of eff's active region and
// then of the other regions of its set, from their cluster records. A
// region without a record is left out, but the active region must have
// one.
func (s *Service) migrationTarget(eff global.Effective) (migrationTarget, error) {
	regions := append([]string{eff.ActiveRegion}, slices.DeleteFunc(slices.Clone(eff.ReplicationClusters),
		func(r string) bool { return r == eff.ActiveRegion })...)
	var plain, tls []string
	for i, r := range regions {
		c, ok := s.policies.Cluster(r)
		if !ok {
			if i == 0 {
				return migrationTarget{}, fmt.Errorf("active region %s has no cluster record", r)
			}
			continue
		}
		plain = appendHosts(plain, c.BrokerServiceURL)
		tls = appendHosts(tls, c.BrokerServiceURLTLS)
	}
	if len(plain) == 0 && len(tls) == 0 {
		return migrationTarget{}, fmt.Errorf("no broker service URL in the cluster records of %v", regions)
	}
	to := migrationTarget{region: eff.ActiveRegion}
	if len(plain) > 0 {
		to.serviceURL = "pulsar://" + strings.Join(plain, ",")
	}
	if len(tls) > 0 {
		to.serviceURLTLS = "pulsar+ssl://" + strings.Join(tls, ",")
	}
	return to, nil
}

// appendHosts appends the hosts of a service URL (one host or several) to
// hosts, skipping those already there.
func appendHosts(hosts []string, url string) []string {
	_, more, ok := global.ServiceHosts(url)
	if !ok {
		return hosts
	}
	for _, h := range more {
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// migrateClients moves t's producers (but the replicator's) and consumers
// to, each within CloseTimeout. The topic stays loaded: replication into
// it goes on, and clients may come back when the namespace is active here
// again. With drainFirst (a cluster migration, as Pulsar's) a
// subscription's consumers move only once they have acked everything the
// topic holds here, so that a namespace that is not replicated loses
// nothing; the passes every migrationResync try again until then.
func (t *Topic) migrateClients(ctx context.Context, to migrationTarget, drainFirst bool) {
	t.mu.Lock()
	var producers []*producer
	for p := range t.mu.producers {
		if !p.repl {
			producers = append(producers, p)
		}
	}
	for _, p := range t.mu.waiting {
		if !p.repl {
			producers = append(producers, p)
		}
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range producers {
		wg.Go(func() { p.migrate(ctx, to) })
	}
	for _, s := range t.subscriptions() {
		if s.consumerCount() > 0 && (!drainFirst || s.cursor.Backlog() == 0) {
			wg.Go(func() { s.migrate(ctx, to) })
		}
	}
	wg.Wait()
}

// migrateReplicatedConsumers moves the consumers of t's replicated
// subscriptions to, as migrateClients moves a subscription's.
func (t *Topic) migrateReplicatedConsumers(ctx context.Context, to migrationTarget) {
	var wg sync.WaitGroup
	for _, s := range t.subscriptions() {
		if s.isReplicated.Load() && s.consumerCount() > 0 {
			wg.Go(func() { s.migrate(ctx, to) })
		}
	}
	wg.Wait()
}

// migrate shuts out the producer's SENDs, waits until every SEND it took
// is receipted, and then sends TOPIC_MIGRATED and CLOSE_PRODUCER.
func (p *producer) migrate(ctx context.Context, to migrationTarget) {
	ctx, cancel := context.WithTimeout(ctx, p.topic.svc.cfg.CloseTimeout)
	defer cancel()
	err := p.migrating.close(ctx)
	if err == nil {
		err = p.awaitReceipts(ctx)
	}
	if err != nil {
		p.topic.svc.log.Debug("moving a producer: receipts still owed at the deadline", "topic", p.topic.Name(), "err", err)
	}
	if to.region != "" {
		p.topic.awaitReplicatedTo(ctx, to.region, migrationReplicationGrace)
	}
	if !p.c.holdsProducer(p) {
		return // the client closed it meanwhile
	}
	// Its SENDs are dropped from here on: by the migrating gate while it
	// is registered, then by the connection (release).
	p.c.send(topicMigrated(p.id, pb.CommandTopicMigrated_Producer, to))
	p.release(nil, true)
	p.topic.svc.metrics.migrated(pb.CommandTopicMigrated_Producer)
}

// migrate stops the subscription's dispatch, waits (migrationAckGrace at
// most) for its consumers to ack what they were sent, sends each
// TOPIC_MIGRATED and CLOSE_CONSUMER, and writes the cursor. A durable
// subscription is then opened again without consumers, as a topic's load
// opens every durable cursor, ready for clients that come back.
func (s *subscription) migrate(ctx context.Context, to migrationTarget) {
	ctx, cancel := context.WithTimeout(ctx, s.topic.svc.cfg.CloseTimeout)
	defer cancel()
	_, consumers := s.stop(ctx)
	s.awaitAcks(ctx, migrationAckGrace)
	if rs := s.topic.rs; rs != nil && s.replicated() {
		// Written before the consumers go, so that the region they go to
		// reads it when they attach there (replicatedSubs.catchUp).
		if err := rs.flush(ctx).err; err != nil {
			s.topic.svc.log.Warn("moving a subscription's consumers: its replicated state not written; they may get acked messages again",
				"topic", s.topic.Name(), "subscription", s.name, "err", err)
		}
	}
	for _, c := range consumers {
		if held, ok := registered(c.c, c.c.mu.consumers, c.id); !ok || held != c {
			continue // the client closed it meanwhile
		}
		c.c.send(topicMigrated(c.id, pb.CommandTopicMigrated_Consumer, to))
		c.disconnect(ctx)
		s.topic.svc.metrics.migrated(pb.CommandTopicMigrated_Consumer)
	}
	if err := s.cursor.Close(ctx); err != nil {
		s.topic.svc.log.Warn("moving a subscription's consumers: cursor not written", "topic", s.topic.Name(),
			"subscription", s.name, "err", err)
	}
	s.topic.forgetSubscription(s)
	if !s.cursor.Durable() {
		return
	}
	if _, err := s.topic.subscription(ctx, s.name, s.subType(), true, mledger.Latest, nil); err != nil {
		s.topic.svc.log.Warn("reopening a subscription whose consumers moved", "topic", s.topic.Name(),
			"subscription", s.name, "err", err)
	}
}

// awaitReplicatedTo waits until the replication cursor to region has
// passed every entry the topic stores, for grace at most, or until ctx
// ends. A topic that does not replicate to region has nothing to wait
// for. The cursor is the replicator's, seen through the owner's watch (the
// replicator writes it every 100 ms).
func (t *Topic) awaitReplicatedTo(ctx context.Context, region string, grace time.Duration) {
	last := t.ml.LastConfirmed()
	var at mledger.Position
	caughtUp := awaitMigration(ctx, t.svc.clock, grace, func() bool {
		var ok bool
		at, ok = t.ml.ForeignCursors()[ReplicationCursorPrefix+region]
		return !ok || !at.Less(last)
	})
	if !caughtUp && ctx.Err() == nil {
		t.svc.log.Warn("moving a producer: replication to its new region has not caught up; its next messages may be stored there ahead of older ones of the same key",
			"topic", t.Name(), "region", region, "replicated_through", at, "last", last, "waited", grace)
	}
}

// awaitAcks waits until no consumer of the stopped subscription holds a
// message unacked, for grace at most, or until ctx ends.
func (s *subscription) awaitAcks(ctx context.Context, grace time.Duration) {
	awaitMigration(ctx, s.topic.svc.clock, grace, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.mu.consumers {
			if c.unacked > 0 {
				return false
			}
		}
		return true
	})
}

// awaitMigration polls done every 10 ms on clock until it holds, grace
// passes or ctx ends, and reports whether it held. The waits of a move poll: each
// runs once per switch, for a fraction of a second, on state (a cursor
// seen through a watch, the consumers' counts) that has no signal of its
// own.
func awaitMigration(ctx context.Context, clock clockwork.Clock, grace time.Duration, done func() bool) bool {
	const poll = 10 * time.Millisecond
	deadline := clock.Now().Add(grace)
	for {
		if done() {
			return true
		}
		if clock.Now().After(deadline) {
			return false
		}
		select {
		case <-clock.After(poll):
		case <-ctx.Done():
			return false
		}
	}
}

// topicMigrated is the TOPIC_MIGRATED command sending producer or consumer
// id to the brokers of to.
func topicMigrated(id uint64, kind pb.CommandTopicMigrated_ResourceType, to migrationTarget) *pb.BaseCommand {
	b := pb.CommandTopicMigrated_builder{ResourceId: ptr(id), ResourceType: kind.Enum()}
	if to.serviceURL != "" {
		b.BrokerServiceUrl = ptr(to.serviceURL)
	}
	if to.serviceURLTLS != "" {
		b.BrokerServiceUrlTls = ptr(to.serviceURLTLS)
	}
	return pb.BaseCommand_builder{Type: pb.BaseCommand_TOPIC_MIGRATED.Enum(), TopicMigrated: b.Build()}.Build()
}
