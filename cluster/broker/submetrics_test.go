package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestSubscriptionRateMetrics: Pulsar's per-subscription series of a
// subscription blocked on its unacked limit (blocked_on_unacked_messages),
// its acks and redeliveries (msg_ack_rate, msg_rate_redeliver), and a
// subscription's expiries (msg_rate_expired), through pulsar-client-go.
// Rates cover the stats period that ends at a scrape, and a period starts
// at the scrape before: each activity below happens after a scrape, so
// the next scrape that closes a period shows it.
func TestSubscriptionRateMetrics(t *testing.T) {
	const limit = 4
	r := startBroker(t, nil, func(c *brokertest.Config) {
		c.Service.Metrics.StatsPeriod = 10 * time.Millisecond
		c.Service.Dispatch.MaxUnackedPerSubscription = limit
		c.Service.MessageExpiryCheckInterval = time.Second
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(broker.NewPulsarCollector(r.Service(), 10*time.Second))
	// scrape gathers the series once, by family, topic and subscription.
	// One scrape per check: each may close a period, after which the
	// rates of the activity before it are gone.
	type series struct{ family, topic, sub string }
	scrape := func() map[series]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[series]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				out[series{f.GetName(), labels["topic"], labels["subscription"]}] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	c := newClient(t, r.ServiceURL())

	topic := topicIn(t, createNamespace(t, r, "submetrics", global.Policies{}))
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		AckWithResponse: true, NackRedeliveryDelay: 10 * time.Millisecond})
	produce(t, createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "m", 2*limit)
	held := make([]pulsar.Message, 0, limit)
	for range limit {
		held = append(held, receive(t, cons))
	}
	testkit.WaitFor(t, "the subscription blocked on its unacked messages", func() bool {
		return scrape()[series{"pulsar_subscription_blocked_on_unacked_messages", topic, "s"}] == 1
	})
	// One message comes again; all are acked.
	cons.Nack(held[0])
	acked := map[string]bool{}
	ack := func(m pulsar.Message) {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		acked[string(m.Payload())] = true
	}
	for _, m := range held[1:] {
		ack(m)
	}
	for len(acked) < 2*limit {
		ack(receive(t, cons))
	}
	testkit.WaitFor(t, "ack and redeliver rates over the period of the acks, and unblocked", func() bool {
		got := scrape()
		return got[series{"pulsar_subscription_msg_ack_rate", topic, "s"}] > 0 &&
			got[series{"pulsar_subscription_msg_rate_redeliver", topic, "s"}] > 0 &&
			got[series{"pulsar_subscription_blocked_on_unacked_messages", topic, "s"}] == 0
	})

	expiring := topicIn(t, createNamespace(t, r, "submetrics-ttl", global.Policies{MessageTTLInSeconds: new(1)}))
	subscribe(t, c, pulsar.ConsumerOptions{Topic: expiring, SubscriptionName: "idle"}).Close()
	if v, served := scrape()[series{"pulsar_subscription_msg_rate_expired", expiring, "idle"}]; !served || v != 0 {
		t.Fatalf("expired rate %v (served: %v) before any expiry, want 0", v, served)
	}
	produce(t, createProducer(t, c, pulsar.ProducerOptions{Topic: expiring, DisableBatching: true}), "m", 3)
	tp, err := r.Service().Topic(context.Background(), mustTopic(t, expiring), false)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the idle subscription's messages expired", func() bool { return tp.Stats().Subscriptions["idle"].Expired == 3 })
	testkit.WaitFor(t, "the expired rate over the period of the expiry", func() bool {
		return scrape()[series{"pulsar_subscription_msg_rate_expired", expiring, "idle"}] > 0
	})
}
