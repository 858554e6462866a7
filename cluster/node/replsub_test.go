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
