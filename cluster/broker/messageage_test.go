package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestReplicatedMessageAgeCountsFromArrival: message expiry and the
// message_age backlog quota count a message's age from its arrival in this
// region (the broker_timestamp its entry was stored with), not from its
// publish time: a message published ten minutes ago in another region and
// replicated here now is young here, for a subscription that is not
// replicated (a replicated one: TestReplicatedSubscriptionAgesFromPublishTime). Each mechanism's own passes are the
// evidence that it looked: a control topic whose limit is one second
// expires three messages, each sent once the one before it expired. The
// pass that expired the first one visited the control topic after the
// replicated message was stored; the next pass started after it ended, so
// it went over the replicated message whole, and ended before the third
// pass expired the third message.
func TestReplicatedMessageAgeCountsFromArrival(t *testing.T) {
	r, c, stats := startAgingBroker(t)
	for _, mechanism := range agingMechanisms {
		t.Run(mechanism.name, func(t *testing.T) {
			target := "persistent://" + createNamespace(t, r, mechanism.name+"-arrival", mechanism.limited(60)) + "/t"
			control := "persistent://" + createNamespace(t, r, mechanism.name+"-control", mechanism.limited(1)) + "/t"
			for _, topic := range []string{target, control} {
				subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}).Close()
			}
			tenMinutesAgo := uint64(time.Now().Add(-10 * time.Minute).UnixMilli())
			rc := openReplicationProducer(t, r.ServiceURL(), target)
			rc.replicate(1, 0, pb.MessageMetadata_builder{ProducerName: proto.String("orders-app"), SequenceId: proto.Uint64(0),
				PublishTime: proto.Uint64(tenMinutesAgo), ReplicatedFrom: proto.String("us-east")}.Build(), []byte("old"))

			p := createProducer(t, c, pulsar.ProducerOptions{Topic: control, DisableBatching: true})
			for pass := int64(1); pass <= 3; pass++ {
				if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
					t.Fatal(err)
				}
				testkit.WaitFor(t, fmt.Sprintf("the control topic's message %d expired", pass), func() bool { return stats(control).Expired == pass })
			}
			if s := stats(target); s.MsgBacklog != 1 || s.Expired != 0 {
				t.Errorf("the message published ten minutes ago and replicated now, under a limit of a minute: backlog %d, %d expired; want 1 and 0",
					s.MsgBacklog, s.Expired)
			}
		})
	}
}

// TestReplicatedSubscriptionAgesFromPublishTime: a replicated
// subscription's messages age from their publish time, which every
// region's copy carries unchanged, not from their arrival here, so that
// every region expires the same set of them (an expiry's acks travel to
// the other regions like any other): under a limit of a minute, a message
// published ten minutes ago in another region and replicated now expires,
// counted as expired, and one published now stays and is delivered.
func TestReplicatedSubscriptionAgesFromPublishTime(t *testing.T) {
	r, c, stats := startAgingBroker(t)
	addRegion(t, r, "us-east")
	for _, mechanism := range agingMechanisms {
		t.Run(mechanism.name, func(t *testing.T) {
			p := mechanism.limited(60)
			p.ReplicationClusters = []string{brokertest.Region, "us-east"}
			topic := "persistent://" + createNamespace(t, r, mechanism.name+"-replsub", p) + "/t"
			opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReplicateSubscriptionState: true}
			subscribe(t, c, opts).Close()
			rc := openReplicationProducer(t, r.ServiceURL(), topic)
			for i, published := range []time.Time{time.Now().Add(-10 * time.Minute), time.Now()} {
				rc.replicate(1, uint64(i), pb.MessageMetadata_builder{ProducerName: proto.String("orders-app"), SequenceId: proto.Uint64(uint64(i)),
					PublishTime: proto.Uint64(uint64(published.UnixMilli())), ReplicatedFrom: proto.String("us-east")}.Build(), fmt.Appendf(nil, "m%d", i))
			}
			testkit.WaitFor(t, "the message published ten minutes ago expired", func() bool { return stats(topic).Expired == 1 })
			if s := stats(topic); s.MsgBacklog != 1 {
				t.Fatalf("backlog %d once the old message expired, want 1: the message published now", s.MsgBacklog)
			}
			if m := receive(t, subscribe(t, c, opts)); string(m.Payload()) != "m1" {
				t.Fatalf("delivered %q, want the message published now", m.Payload())
			}
		})
	}
}

// startAgingBroker starts a broker that checks message expiry and backlog
// quotas every second, with a client, and returns the stats of a topic's
// subscription "s".
func startAgingBroker(t *testing.T) (*brokertest.Broker, pulsar.Client, func(topic string) broker.SubscriptionStats) {
	r := startBroker(t, nil, func(c *brokertest.Config) {
		c.Service.MessageExpiryCheckInterval = time.Second
		c.Service.BacklogQuotaCheckInterval = time.Second
	})
	stats := func(topic string) broker.SubscriptionStats {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			t.Fatal(err)
		}
		return tp.Stats().Subscriptions["s"]
	}
	return r, newClient(t, r.ServiceURL()), stats
}

// agingMechanisms are the two limits on a message's age, each as the
// namespace policies that set it to a number of seconds: a message TTL,
// and a message_age backlog quota that evicts.
var agingMechanisms = []struct {
	name    string
	limited func(seconds int64) global.Policies
}{
	{"ttl", func(seconds int64) global.Policies { return global.Policies{MessageTTLInSeconds: new(int(seconds))} }},
	{"agequota", func(seconds int64) global.Policies {
		return global.Policies{BacklogQuotaMap: map[global.BacklogQuotaType]global.BacklogQuota{
			global.MessageAge: {LimitSize: -1, LimitTime: seconds, Policy: global.ConsumerBacklogEviction}}}
	}},
}
