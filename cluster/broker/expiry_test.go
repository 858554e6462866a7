package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"

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

// TestInactiveSubscriptionsExpire: on a namespace with a subscription
// expiration time, a durable subscription that has had no consumer for
// that long is deleted at the next check; one with a consumer stays, and
// so does an idle one on a namespace without the policy. On the fake
// clock: the expiration counts in minutes.
func TestInactiveSubscriptionsExpire(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := startBroker(t, nil, func(c *brokertest.Config) {
		c.Service.Clock = clock
		c.Service.SubscriptionExpiryCheckInterval = time.Minute
	})
	c := newClient(t, r.ServiceURL())
	expiring := "persistent://" + createNamespace(t, r, "subexp", global.Policies{
		Extra: global.Extra{global.ExtraSubscriptionExpirationTime: json.RawMessage("1")}}) + "/t"
	kept := "persistent://" + createNamespace(t, r, "subkept", global.Policies{}) + "/t"
	idle := func(topic, name string) {
		subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name}).Close()
	}
	subscriptions := func(topic string) []string {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			t.Fatal(err)
		}
		return tp.Subscriptions()
	}
	// check lets the check run (its ticker fires) until name is gone.
	check := func(name string) {
		testkit.WaitFor(t, "subscription "+name+" expired", func() bool {
			clock.Advance(time.Minute)
			return !slices.Contains(subscriptions(expiring), name)
		})
	}
	idle(expiring, "idle")
	idle(kept, "idle")
	subscribe(t, c, pulsar.ConsumerOptions{Topic: expiring, SubscriptionName: "busy"})
	check("idle")
	// A second subscription gone idle after the first expired: its
	// expiry is a check that began after the first one ended, and went
	// over every subscription.
	idle(expiring, "later")
	check("later")
	if got := subscriptions(expiring); !slices.Equal(got, []string{"busy"}) {
		t.Errorf("subscriptions of the expiring topic: %v, want [busy]", got)
	}
	if got := subscriptions(kept); !slices.Equal(got, []string{"idle"}) {
		t.Errorf("subscriptions of the topic without the policy: %v, want [idle]", got)
	}
}
