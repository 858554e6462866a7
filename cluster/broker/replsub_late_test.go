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
	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// TestReplicatedSubscriptionLateEntryConsumedElsewhere: a message that
// another region consumed, and that reaches this region only after this
// region's sync applied that region's state (replicated late, as after a
// failover, when the region that consumed it comes back), is acked on
// arrival, not delivered. The interval is an hour: only the sync of the
// consumer's attach runs, before the messages arrive, so without the
// check at dispatch the message would be delivered.
func TestReplicatedSubscriptionLateEntryConsumedElsewhere(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) {
		c.Service.ReplicatedSubscriptions = broker.ReplicatedSubscriptionsConfig{Interval: time.Hour, MaxRanges: 10_000}
	})
	addRegion(t, r, "us-east")
	topic := "persistent://" + createNamespace(t, r, "latearrival", global.Policies{ReplicationClusters: []string{brokertest.Region, "us-east"}}) + "/t"
	c := newClient(t, r.ServiceURL())
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReplicateSubscriptionState: true, Type: pulsar.Shared}
	subscribe(t, c, opts).Close()

	// us-east consumed its message at offset 0, which has not reached
	// this region yet.
	east := replsub.Origin{Region: "us-east", Incarnation: 1}
	st := replsub.State{Origins: []replsub.OriginAcks{{Origin: east, Acked: replsub.Ranges{{From: 0, To: 0}}}},
		TakenMillis: time.Now().UnixMilli()}
	b, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.Service().Global().WriteSubscriptionState(ctx, mustTopic(t, topic), "s", "us-east", b, 0); err != nil {
		t.Fatal(err)
	}
	// The attach applies us-east's state (its catch-up waits for the
	// message named, up to its bound, then attaches).
	cons := subscribe(t, c, opts)
	rc := openReplicationProducer(t, r.ServiceURL(), topic)
	for i := range uint64(2) {
		rc.replicate(1, i, pb.MessageMetadata_builder{ProducerName: proto.String("orders-app"), SequenceId: proto.Uint64(i),
			PublishTime: proto.Uint64(uint64(time.Now().UnixMilli())), ReplicatedFrom: proto.String("us-east")}.Build(), fmt.Appendf(nil, "m%d", i))
	}
	if m := receive(t, cons); string(m.Payload()) != "m1" {
		t.Fatalf("delivered %q first, want m1: m0 was consumed in us-east", m.Payload())
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if m, err := cons.Receive(short); err == nil {
		t.Fatalf("delivered %q as well", m.Payload())
	}
}
