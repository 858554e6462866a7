package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestMessageTTLExpiresSubscriptions: on a namespace with a message TTL,
// every subscription consumes what was stored longer ago than the TTL,
// whether a consumer is connected or not, and counts it as expired, as
// Pulsar's expiry monitor does; a namespace without a TTL keeps its
// backlog.
func TestMessageTTLExpiresSubscriptions(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Service.MessageExpiryCheckInterval = time.Second })
	c := newClient(t, r.ServiceURL())
	kept := "persistent://" + createNamespace(t, r, "ttl-none", global.Policies{}) + "/t"
	expiring := "persistent://" + createNamespace(t, r, "ttl-1s", global.Policies{MessageTTLInSeconds: new(1)}) + "/t"
	// "idle" has no consumer; "held" has one that receives and never acks.
	for _, topic := range []string{kept, expiring} {
		subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "idle"}).Close()
	}
	held := subscribe(t, c, pulsar.ConsumerOptions{Topic: expiring, SubscriptionName: "held"})
	send := func(topic string, n int) {
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		for range n {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stats := func(topic, sub string) broker.SubscriptionStats {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			t.Fatal(err)
		}
		return tp.Stats().Subscriptions[sub]
	}
	waitExpired := func(want int64) {
		testkit.WaitFor(t, fmt.Sprintf("both subscriptions of the TTL topic to have expired %d messages", want), func() bool {
			for _, sub := range []string{"idle", "held"} {
				if s := stats(expiring, sub); s.MsgBacklog != 0 || s.Expired != want {
					return false
				}
			}
			return true
		})
	}

	send(kept, 10)
	send(expiring, 10)
	receive(t, held)
	waitExpired(10)
	// A second expiry, which starts after the first one ended: since then
	// expiry has gone over every loaded topic at least once.
	send(expiring, 5)
	waitExpired(15)
	if s := stats(kept, "idle"); s.MsgBacklog != 10 || s.Expired != 0 {
		t.Errorf("the topic without a TTL: backlog %d, %d expired; want 10 and 0", s.MsgBacklog, s.Expired)
	}
}
