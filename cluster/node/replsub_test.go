package node_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// The replicated subscription tests run two regions, east and west, that
// replicate public/default both ways, and sync subscription states every
// replSyncInterval. They wait on what the other region's subscription
// shows (its backlog, the state it applied), never on the interval.
const replSyncInterval = 100 * time.Millisecond

func startReplicatedSubsDev(t *testing.T) (*node.Node, map[string]string) {
	t.Helper()
	return startDevWith(t, func(r *node.RegionConfig) {
		r.Broker.Service.ReplicatedSubscriptions.Interval = replSyncInterval
	}, "east", "west")
}

// regionService returns the broker service of region.
func regionService(t *testing.T, n *node.Node, region string) *broker.Service {
	t.Helper()
	for _, r := range n.Regions() {
		if r.Name() == region {
			return r.Broker().Service()
		}
	}
	t.Fatalf("no region %s", region)
	return nil
}

// subscriptionStats returns sub's stats on topic in svc's region; ok is
// false while the topic or the subscription is not there.
func subscriptionStats(t *testing.T, svc *broker.Service, topic, sub string) (broker.SubscriptionStats, bool) {
	t.Helper()
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp, err := svc.Topic(ctx, tn, false)
	if err != nil {
		return broker.SubscriptionStats{}, false
	}
	ss, ok := tp.Stats().Subscriptions[sub]
	return ss, ok
}

// awaitBacklog waits until sub on topic in svc's region has backlog
// entries.
func awaitBacklog(t *testing.T, svc *broker.Service, region, topic, sub string, backlog int64) {
	t.Helper()
	last := int64(-1)
	testkit.WaitFor(t, fmt.Sprintf("%s's subscription %s to have a backlog of %d entries", region, sub, backlog), func() bool {
		ss, ok := subscriptionStats(t, svc, topic, sub)
		if ok && ss.MsgBacklog != last {
			t.Logf("%s: subscription %s backlog %d (replicated %v)", region, sub, ss.MsgBacklog, ss.Replicated)
			last = ss.MsgBacklog
		}
		return ok && ss.MsgBacklog == backlog
	})
}

// drainUntil receives from cons until the message whose payload is
// sentinel, acking everything, and returns the payloads before it. The
// sentinel is published after everything else, so every message the
// subscription still had to deliver comes before it: no quiet period is
// needed to know that nothing more comes.
func drainUntil(t *testing.T, cons pulsar.Consumer, sentinel string) []string {
	t.Helper()
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) == sentinel {
			return got
		}
		got = append(got, string(m.Payload()))
	}
}

// receiveUnacked receives one message, leaving its ack to the caller.
func receiveUnacked(t *testing.T, cons pulsar.Consumer) pulsar.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func send(t *testing.T, p pulsar.Producer, m *pulsar.ProducerMessage) {
	t.Helper()
	if _, err := p.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestReplicatedSubscriptionCarriesEveryAck: a Shared consumer in east
// acks out of order (every third message left unacked, messages of batches
// acked one by one) while both regions publish; once west has applied
// east's state, a consumer of the same subscription in west gets exactly
// the messages east had not acked, and the ones that only ever existed in
// west.
func TestReplicatedSubscriptionCarriesEveryAck(t *testing.T) {
	n, urls := startReplicatedSubsDev(t)
	const topic, sub = "persistent://public/default/replsub-acks", "s"
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	westClient := newClient(t, pulsar.ClientOptions{URL: urls["west"]})
	eastCons, err := eastClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		EnableBatchIndexAcknowledgment: true, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eastCons.Close()

	// East publishes batches of 4, west single messages and, twice, a
	// message kept to west (replicate_to).
	eastProd, err := eastClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4,
		BatchingMaxPublishDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer eastProd.Close()
	westProd, err := westClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer westProd.Close()
	const rounds = 10
	var westOnly []string
	for r := range rounds {
		for i := range 4 {
			eastProd.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "e-%d", 4*r+i)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						t.Errorf("east send: %v", err)
					}
				})
		}
		if err := eastProd.FlushWithCtx(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			send(t, westProd, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "w-%d", 2*r+i)})
		}
		if r%4 == 1 {
			w := fmt.Sprintf("west-only-%d", r)
			send(t, westProd, &pulsar.ProducerMessage{Payload: []byte(w), ReplicationClusters: []string{"west"}})
			westOnly = append(westOnly, w)
		}
	}

	// East receives all 60 messages of both origins and acks all but every
	// third of each origin; w-19, acked last, tells when west has the
	// final state.
	unacked := map[string]bool{}
	unackedEastEntries := map[[2]int64]bool{} // (ledger, entry) in east of a batch not wholly acked
	var last pulsar.Message
	for range 4*rounds + 2*rounds {
		m := receiveUnacked(t, eastCons)
		_, num, _ := strings.Cut(string(m.Payload()), "-")
		var i int
		fmt.Sscan(num, &i)
		switch {
		case i%3 == 0:
			unacked[string(m.Payload())] = true
			if strings.HasPrefix(string(m.Payload()), "e-") {
				unackedEastEntries[[2]int64{m.ID().LedgerID(), m.ID().EntryID()}] = true
			}
		case string(m.Payload()) == "w-19":
			last = m
		default:
			if err := eastCons.Ack(m); err != nil {
				t.Fatalf("ack %s: %v", m.Payload(), err)
			}
		}
	}
	if last == nil {
		t.Fatal("east never received w-19")
	}
	if err := eastCons.Ack(last); err != nil {
		t.Fatal(err)
	}
	for _, w := range westOnly {
		unacked[w] = true
	}
	// West's backlog, once east's final state applies: each east batch
	// with a message left unacked, each west message left unacked, and
	// the west-only messages.
	westUnackedEntries := 0
	for m := range unacked {
		if !strings.HasPrefix(m, "e-") {
			westUnackedEntries++
		}
	}
	want := int64(len(unackedEastEntries) + westUnackedEntries)
	west := regionService(t, n, "west")
	awaitBacklog(t, west, "west", topic, sub, want)
	if ss, _ := subscriptionStats(t, west, topic, sub); !ss.Replicated || ss.ReplicatedStateTaken["east"].IsZero() {
		t.Fatalf("west's subscription: replicated %v, east's state taken at %v; want replicated, with east's state",
			ss.Replicated, ss.ReplicatedStateTaken["east"])
	}

	// The consumers move: east's goes, one of the same subscription comes
	// up in west.
	eastCons.Close()
	westCons, err := westClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true})
	if err != nil {
		t.Fatal(err)
	}
	defer westCons.Close()
	send(t, westProd, &pulsar.ProducerMessage{Payload: []byte("sentinel")})
	got := drainUntil(t, westCons, "sentinel")
	slices.Sort(got)
	wantMsgs := slices.Sorted(maps.Keys(unacked))
	if !slices.Equal(got, wantMsgs) {
		t.Fatalf("west delivered %v\nwant exactly what east had not acked: %v", got, wantMsgs)
	}
}

// subscribeReplicated subscribes to topic through c with a replicated
// Shared subscription sub, from the earliest message, acks answered.
func subscribeReplicated(t *testing.T, c pulsar.Client, topic, sub string) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		EnableBatchIndexAcknowledgment: true, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// produceSingly publishes prefix-0 .. prefix-(n-1) through c, one entry
// each (the tests count backlogs in entries).
func produceSingly(t *testing.T, c pulsar.Client, topic, prefix string, n int) {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range n {
		send(t, p, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)})
	}
}

// ackedEverywhere is the start of several tests: two regions, n messages
// prefix-i published in east, received and acked there by a consumer of
// the replicated subscription sub, west's subscription following to a
// backlog of 0, and east's consumer closed.
func ackedEverywhere(t *testing.T, topic, sub, prefix string, n int) acked {
	t.Helper()
	dev, urls := startReplicatedSubsDev(t)
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	d := acked{topic: tn, east: regionService(t, dev, "east"), west: regionService(t, dev, "west"),
		eastClient: newClient(t, pulsar.ClientOptions{URL: urls["east"]}),
		westClient: newClient(t, pulsar.ClientOptions{URL: urls["west"]})}
	eastCons := subscribeReplicated(t, d.eastClient, topic, sub)
	produceSingly(t, d.eastClient, topic, prefix, n)
	for range n {
		if err := eastCons.Ack(receiveUnacked(t, eastCons)); err != nil {
			t.Fatal(err)
		}
	}
	awaitBacklog(t, d.west, "west", topic, sub, 0)
	eastCons.Close()
	return d
}

// acked is what ackedEverywhere set up.
type acked struct {
	topic                  topology.TopicName
	east, west             *broker.Service
	eastClient, westClient pulsar.Client
}

// TestReplicatedSubscriptionSeekReplaces: east acks everything, west
// follows; then east resets its subscription to the earliest message
// (pulsar-admin's reset-cursor, the consumer's Seek's own path), and west's
// subscription goes back with it rather than keeping its acks by a union
// (and west's older state does not undo the reset in east): a consumer in
// west gets every message again. The consumer is closed before the reset:
// pulsar-client-go sends its tracked acks again after a Seek, which would
// ack a message anew.
func TestReplicatedSubscriptionSeekReplaces(t *testing.T) {
	const topic, sub = "persistent://public/default/replsub-seek", "s"
	d := ackedEverywhere(t, topic, sub, "m", 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp, err := d.east.Topic(ctx, d.topic, false)
	if err != nil {
		t.Fatal(err)
	}
	earliest := int64(0)
	if err := tp.ResetCursor(ctx, sub, nil, &earliest); err != nil {
		t.Fatal(err)
	}
	awaitBacklog(t, d.east, "east", topic, sub, 10)
	awaitBacklog(t, d.west, "west", topic, sub, 10)

	westCons := subscribeReplicated(t, d.westClient, topic, sub)
	produceSingly(t, d.westClient, topic, "sentinel", 1)
	got := drainUntil(t, westCons, "sentinel-0")
	if want := payloads("m", 0, 10); !slices.Equal(got, want) {
		t.Fatalf("after east's reset west delivered %v, want %v", got, want)
	}
}

// TestReplicatedSubscriptionNotInheritedByANewTopic: east deletes the topic
// and creates it again, while west keeps its own copy and its state of the
// subscription, which acked east's first six messages (offsets 0..5 of
// east's first incarnation). The new topic's first six messages have
// offsets 0..5 too, of a new incarnation: west's state must ack none of
// them in east. An ack made in west of one of the new messages does carry.
func TestReplicatedSubscriptionNotInheritedByANewTopic(t *testing.T) {
	const topic, sub = "persistent://public/default/replsub-recreated", "s"
	d := ackedEverywhere(t, topic, sub, "old", 6)
	east, eastClient, westClient := d.east, d.eastClient, d.westClient
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := east.DeleteTopic(ctx, d.topic, true); err != nil {
		t.Fatal(err)
	}
	produceSingly(t, eastClient, topic, "new", 6)

	// West gets the new messages too (after the old ones), and acks the
	// last: a change of its state once east stores all six.
	westCons, err := westClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer westCons.Close()
	for {
		m := receiveUnacked(t, westCons)
		if string(m.Payload()) != "new-5" {
			continue // new-0..4 stay unacked, nacked back on close
		}
		beforeAck := time.Now()
		if err := westCons.Ack(m); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "east to apply west's state taken after its ack of new-5", func() bool {
			ss, ok := subscriptionStats(t, east, topic, sub)
			return ok && ss.ReplicatedStateTaken["west"].UnixMilli() >= beforeAck.UnixMilli()
		})
		break
	}
	westCons.Close()
	if ss, _ := subscriptionStats(t, east, topic, sub); ss.MsgBacklog != 5 {
		t.Fatalf("east's new topic: subscription backlog %d, want 5 (new-0..4: nothing of the old topic's acks, west's ack of new-5)", ss.MsgBacklog)
	}
	eastCons := subscribeReplicated(t, eastClient, topic, sub)
	produceSingly(t, eastClient, topic, "sentinel", 1)
	if got, want := drainUntil(t, eastCons, "sentinel-0"), payloads("new", 0, 5); !slices.Equal(got, want) {
		t.Fatalf("east's new topic delivered %v, want %v", got, want)
	}
}

// TestReplicatedSubscriptionPerPartition: a partitioned topic's
// subscription is replicated partition by partition, each a topic of its
// own with its own state.
func TestReplicatedSubscriptionPerPartition(t *testing.T) {
	n, urls := startReplicatedSubsDev(t)
	const topic, sub, partitions = "persistent://public/default/replsub-partitioned", "s", 2
	east, west := regionService(t, n, "east"), regionService(t, n, "west")
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := east.Global().CreateTopic(ctx, tn, global.TopicPolicies{Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	westClient := newClient(t, pulsar.ClientOptions{URL: urls["west"]})
	eastCons := subscribeReplicated(t, eastClient, topic, sub)
	p, err := eastClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	const total = 20
	for i := range total {
		send(t, p, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: fmt.Appendf(nil, "m-%d", i)})
	}
	unacked := map[string]bool{}
	unackedPer := map[string]int64{}
	for range total {
		m := receiveUnacked(t, eastCons)
		var i int
		fmt.Sscanf(string(m.Payload()), "m-%d", &i)
		if i%2 == 0 {
			unacked[string(m.Payload())] = true
			unackedPer[m.Topic()]++
			continue
		}
		if err := eastCons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range partitions {
		part := fmt.Sprintf("%s-partition-%d", topic, i)
		awaitBacklog(t, west, "west", part, sub, unackedPer[part])
	}
	eastCons.Close()
	westCons := subscribeReplicated(t, westClient, topic, sub)
	var got []string
	for range len(unacked) {
		m := receiveUnacked(t, westCons)
		if !unacked[string(m.Payload())] {
			t.Fatalf("west delivered %s, which east acked", m.Payload())
		}
		got = append(got, string(m.Payload()))
	}
	// Every partition's backlog was exactly its unacked messages, so west
	// has nothing more to give: each one came once.
	slices.Sort(got)
	if want := slices.Sorted(maps.Keys(unacked)); !slices.Equal(got, want) {
		t.Fatalf("west delivered %v, want %v", got, want)
	}
}
