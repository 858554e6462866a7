package node_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/cluster/meta"
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
	return startReplicatedSubsDevWith(t, broker.ReplicatedSubscriptionsConfig{Interval: replSyncInterval, MaxRanges: 10_000})
}

// startReplicatedSubsDevWith is startReplicatedSubsDev with cfg.
func startReplicatedSubsDevWith(t *testing.T, cfg broker.ReplicatedSubscriptionsConfig) (*node.Node, map[string]string) {
	t.Helper()
	return startDevWith(t, func(r *node.RegionConfig) { r.Broker.Service.ReplicatedSubscriptions = cfg }, "east", "west")
}

func mustTopicName(t *testing.T, topic string) topology.TopicName {
	t.Helper()
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// subscriptionStats returns sub's stats on topic in svc's region, and the
// topic's entries; ok is false while the topic or the subscription is not
// there.
func subscriptionStats(t *testing.T, svc *broker.Service, topic, sub string) (ss broker.SubscriptionStats, entries int64, ok bool) {
	t.Helper()
	tn := mustTopicName(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp, err := svc.Topic(ctx, tn, false)
	if err != nil {
		return broker.SubscriptionStats{}, 0, false
	}
	st := tp.Stats()
	ss, ok = st.Subscriptions[sub]
	return ss, st.Entries, ok
}

// awaitBacklog waits until topic in svc's region stores entries entries
// and sub's backlog is backlog of them. Both are needed: a backlog alone
// may be reached before replication brings the entries, whose acks are yet
// to come.
func awaitBacklog(t *testing.T, svc *broker.Service, region, topic, sub string, entries, backlog int64) {
	t.Helper()
	last := int64(-1)
	testkit.WaitFor(t, fmt.Sprintf("%s's subscription %s to have a backlog of %d of %d entries", region, sub, backlog, entries), func() bool {
		ss, n, ok := subscriptionStats(t, svc, topic, sub)
		if ok && ss.MsgBacklog != last {
			t.Logf("%s: subscription %s backlog %d of %d entries (replicated %v)", region, sub, ss.MsgBacklog, n, ss.Replicated)
			last = ss.MsgBacklog
		}
		return ok && n == entries && ss.MsgBacklog == backlog
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
	lastAck := time.Now()
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
	west := region(t, n, "west").Broker().Service()
	entries := int64(rounds + 2*rounds + len(westOnly)) // east's batches, west's messages
	awaitBacklog(t, west, "west", topic, sub, entries, want)
	t.Logf("east's last ack applied in west %v later (interval %v)", time.Since(lastAck).Round(time.Millisecond), replSyncInterval)
	if ss, _, _ := subscriptionStats(t, west, topic, sub); !ss.Replicated || ss.ReplicatedStateTaken["east"].IsZero() {
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
	tn := mustTopicName(t, topic)
	d := acked{topic: tn, east: region(t, dev, "east").Broker().Service(), west: region(t, dev, "west").Broker().Service(),
		eastClient: newClient(t, pulsar.ClientOptions{URL: urls["east"]}),
		westClient: newClient(t, pulsar.ClientOptions{URL: urls["west"]})}
	eastCons := subscribeReplicated(t, d.eastClient, topic, sub)
	produceSingly(t, d.eastClient, topic, prefix, n)
	for range n {
		if err := eastCons.Ack(receiveUnacked(t, eastCons)); err != nil {
			t.Fatal(err)
		}
	}
	awaitBacklog(t, d.west, "west", topic, sub, int64(n), 0)
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
	awaitBacklog(t, d.east, "east", topic, sub, 10, 10)
	awaitBacklog(t, d.west, "west", topic, sub, 10, 10)

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
// offsets 0..5 too, of a new incarnation: west's state, which creates the
// subscription in east's new topic, must ack none of them there. An ack
// made in west afterwards (of w-0, published there) does carry.
//
// The test waits for east to apply a state west took after that ack: east
// stored its six new messages before, so that sync knew them.
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

	westCons, err := westClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer westCons.Close()
	produceSingly(t, westClient, topic, "w", 1)
	for {
		m := receiveUnacked(t, westCons)
		if string(m.Payload()) != "w-0" {
			continue // east's new messages, if already here: left unacked
		}
		beforeAck := time.Now()
		if err := westCons.Ack(m); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "east to apply west's state taken after its ack of w-0, with w-0 stored", func() bool {
			ss, entries, ok := subscriptionStats(t, east, topic, sub)
			return ok && entries == 7 && ss.MsgBacklog < 7 && ss.ReplicatedStateTaken["west"].UnixMilli() >= beforeAck.UnixMilli()
		})
		break
	}
	westCons.Close()
	if ss, _, _ := subscriptionStats(t, east, topic, sub); ss.MsgBacklog != 6 {
		t.Fatalf("east's new topic: subscription backlog %d, want 6 (new-0..5: nothing of the old topic's acks; w-0 acked in west)", ss.MsgBacklog)
	}
	eastCons := subscribeReplicated(t, eastClient, topic, sub)
	produceSingly(t, eastClient, topic, "sentinel", 1)
	if got, want := drainUntil(t, eastCons, "sentinel-0"), payloads("new", 0, 6); !slices.Equal(got, want) {
		t.Fatalf("east's new topic delivered %v, want %v", got, want)
	}
}

// TestReplicatedSubscriptionPerPartition: a partitioned topic's
// subscription is replicated partition by partition, each a topic of its
// own with its own state.
func TestReplicatedSubscriptionPerPartition(t *testing.T) {
	n, urls := startReplicatedSubsDev(t)
	const topic, sub, partitions = "persistent://public/default/replsub-partitioned", "s", 2
	east, west := region(t, n, "east").Broker().Service(), region(t, n, "west").Broker().Service()
	tn := mustTopicName(t, topic)
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
	unackedPer, entriesPer := map[string]int64{}, map[string]int64{}
	for range total {
		m := receiveUnacked(t, eastCons)
		entriesPer[m.Topic()]++
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
		awaitBacklog(t, west, "west", part, sub, entriesPer[part], unackedPer[part])
	}
	eastCons.Close()
	// Every partition's backlog was exactly its unacked messages, so west
	// has nothing more to give.
	receiveExactly(t, subscribeReplicated(t, westClient, topic, sub), unacked)
}

// receiveExactly receives len(unacked) messages from cons, failing the test
// on one whose payload is not in unacked or comes twice. The caller knows
// that the subscription holds no more (its backlog is exactly unacked), so
// nothing needs to be waited out after the last.
func receiveExactly(t *testing.T, cons pulsar.Consumer, unacked map[string]bool) {
	t.Helper()
	var got []string
	for range len(unacked) {
		m := receiveUnacked(t, cons)
		if !unacked[string(m.Payload())] {
			t.Fatalf("west delivered %.20q (%d bytes), which east acked", m.Payload(), len(m.Payload()))
		}
		got = append(got, string(m.Payload()))
	}
	slices.Sort(got)
	if want := slices.Sorted(maps.Keys(unacked)); !slices.Equal(got, want) {
		t.Fatalf("west delivered %d messages, some twice; want each of the %d east left unacked once", len(got), len(want))
	}
}

// TestReplicatedSubscriptionChunkedMessages: a chunked message is stored
// as one entry per chunk, and pulsar-client-go acks it by acking every
// chunk. East publishes chunked messages among small ones and acks every
// other message; west's subscription follows to exactly the chunks of the
// messages east left unacked (every chunk of an acked message is acked
// there too), and a consumer in west gets those messages whole, and no
// other.
func TestReplicatedSubscriptionChunkedMessages(t *testing.T) {
	n, urls := startReplicatedSubsDev(t)
	const topic, sub, each = "persistent://public/default/replsub-chunked", "s", 6
	east, west := region(t, n, "east").Broker().Service(), region(t, n, "west").Broker().Service()
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	westClient := newClient(t, pulsar.ClientOptions{URL: urls["west"]})
	eastCons := subscribeReplicated(t, eastClient, topic, sub)
	p, err := eastClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true,
		EnableChunking: true, ChunkMaxMessageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// big is payload i of a chunked message: 3,500 bytes, several chunks.
	big := func(i int) string { return fmt.Sprintf("c-%d-", i) + strings.Repeat("x", 3500) }
	for i := range each {
		send(t, p, &pulsar.ProducerMessage{Payload: []byte(big(i))})
		send(t, p, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "s-%d", i)})
	}
	unacked := map[string]bool{}
	for i := range 2 * each {
		m := receiveUnacked(t, eastCons)
		if i%4 < 2 { // c-0, s-0, c-2, s-2, c-4, s-4
			unacked[string(m.Payload())] = true
			continue
		}
		if err := eastCons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	_, entries, _ := subscriptionStats(t, east, topic, sub)
	chunks := (entries - each) / each
	if chunks < 2 || entries != each*(chunks+1) {
		t.Fatalf("east stores %d entries for %d chunked and %d small messages; want several chunks each", entries, each, each)
	}
	want := int64(len(unacked)/2) * (chunks + 1) // each unacked pair: a chunked message and a small one
	awaitBacklog(t, east, "east", topic, sub, entries, want)
	awaitBacklog(t, west, "west", topic, sub, entries, want)

	eastCons.Close()
	// West's backlog was exactly the unacked messages' entries, so nothing
	// more comes; a message that came in part would not match its payload.
	receiveExactly(t, subscribeReplicated(t, westClient, topic, sub), unacked)
}

// storedState reads region's stored state of sub on topic from the global
// store (zero State and false when there is none).
func storedState(t *testing.T, n *node.Node, topic, sub, region string) (replsub.State, bool) {
	t.Helper()
	tn := mustTopicName(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := n.Regions()[0].Store().Get(ctx, meta.GlobalKey("subscription-states", tn.Tenant, tn.Namespace, string(tn.Domain), tn.Local, sub, region))
	if errors.Is(err, meta.ErrNotFound) {
		return replsub.State{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := replsub.Decode(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return st, true
}

// metric reads one series of region's metrics (0 when absent).
func metric(t *testing.T, r *node.Region, name string, match map[string]string) float64 {
	t.Helper()
	gathered, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		families[f.GetName()] = f
	}
	v, _ := value(families, name, match)
	return v
}

// TestReplicatedSubscriptionFallsBackPastTheBound: with a bound of 3 ranges
// per origin, a consumed set of 8 ranges (messages 0..4, then every other
// one up to 18) is stored as its consumed prefix 0..4 alone, what the
// mark-delete says, and the fallback is counted.
func TestReplicatedSubscriptionFallsBackPastTheBound(t *testing.T) {
	n, urls := startReplicatedSubsDevWith(t, broker.ReplicatedSubscriptionsConfig{Interval: replSyncInterval, MaxRanges: 3})
	const topic, sub = "persistent://public/default/replsub-bound", "s"
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	cons := subscribeReplicated(t, eastClient, topic, sub)
	produceSingly(t, eastClient, topic, "m", 20)
	for i := range 20 {
		m := receiveUnacked(t, cons)
		if i < 5 || i%2 == 0 {
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The prefix alone is also the exact state after the first five acks:
	// the fallback is the same state with the fallback counted.
	testkit.WaitFor(t, "east's stored state to be its consumed prefix alone, a fallback counted", func() bool {
		st, ok := storedState(t, n, topic, sub, "east")
		return ok && len(st.Origins) == 1 && slices.Equal(st.Origins[0].Acked, replsub.Ranges{{From: 0, To: 4}}) &&
			metric(t, region(t, n, "east"), "meridian_replicated_subscription_fallbacks_total", nil) >= 1
	})
}

// TestReplicatedSubscriptionCost measures what a replicated subscription
// costs at the default interval (1 s) under 1,000 msg/s with a third of the
// messages left unacked: state writes per second (at most one per
// interval), the size of a state, the markers-per-message ratio, and the
// delay from an ack in east to its state applied in west. It checks the
// bound on writes; the rest it reports.
func TestReplicatedSubscriptionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs traffic for several seconds")
	}
	n, urls := startReplicatedSubsDevWith(t, broker.DefaultReplicatedSubscriptionsConfig())
	const topic, sub, rate, seconds = "persistent://public/default/replsub-cost", "s", 1000, 4
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	cons, err := eastClient.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true, EnableBatchIndexAcknowledgment: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := eastClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	east, west := region(t, n, "east"), region(t, n, "west")
	writesBefore := metric(t, east, "meridian_replicated_subscription_writes_total", nil)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < rate*seconds; {
			<-tick.C
			for range rate / 100 {
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							t.Errorf("send: %v", err)
						}
					})
				i++
			}
		}
	}()
	for i := range rate * seconds {
		m := receiveUnacked(t, cons)
		if i%3 != 0 {
			cons.Ack(m)
		}
	}
	<-done
	lastAck := time.Now()
	elapsed := lastAck.Sub(start)
	writes := metric(t, east, "meridian_replicated_subscription_writes_total", nil) - writesBefore
	// A sync starts an Interval less the last one's duration after the
	// one before, never sooner than half an Interval (syncGap).
	bound := elapsed.Seconds()/(broker.DefaultReplicatedSubscriptionsConfig().Interval.Seconds()/2) + 2
	if writes > bound {
		t.Fatalf("%v state writes in %v, want at most one per half interval (%v)", writes, elapsed, bound)
	}
	// The delay: until west applies a state east took after the last ack
	// (the acks are grouped by the client for up to 100 ms first).
	testkit.WaitFor(t, "west to apply east's state taken after the last ack", func() bool {
		ss, _, ok := subscriptionStats(t, west.Broker().Service(), topic, sub)
		return ok && !ss.ReplicatedStateTaken["east"].Before(lastAck)
	})
	applied := time.Since(lastAck)
	st, _ := storedState(t, n, topic, sub, "east")
	b, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var ranges int
	for _, o := range st.Origins {
		ranges += len(o.Acked)
	}
	age := metric(t, west, "pulsar_subscription_replicated_state_age_seconds", map[string]string{"subscription": sub, "remote_cluster": "east"})
	t.Logf("%d msg/s for %v, a third unacked: %.0f state writes (%.2f/s, %.3f%% of messages), last state %d ranges in %d bytes; "+
		"last ack to applied in west %v; west's state age metric %.2fs",
		rate, elapsed.Round(time.Millisecond), writes, writes/elapsed.Seconds(), 100*writes/float64(rate*seconds), ranges, len(b),
		applied.Round(time.Millisecond), age)
}
