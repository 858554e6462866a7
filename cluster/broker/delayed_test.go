package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

// TestDelayedDeliveryClock holds the dispatcher to exact bounds on a fake
// clock: a message delivered at T is not dispatched one millisecond
// before T, and is at T. (testDelayedDelivery checks the behaviour over
// the wall clock, without bounds.)
func TestDelayedDeliveryClock(t *testing.T) {
	start := time.Now().Truncate(time.Millisecond)
	clock := clockwork.NewFakeClockAt(start)
	r := startBroker(t, nil, func(cfg *brokertest.Config) { cfg.Service.Clock = clock })
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})

	const delay = 10 * time.Second
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("later"), DeliverAt: start.Add(delay)}); err != nil {
		t.Fatal(err)
	}
	produce(t, p, "now", 1)
	m := receive(t, cons)
	if string(m.Payload()) != "now0" {
		t.Fatalf("got %q first, want now0", m.Payload())
	}
	cons.Ack(m)

	ctx, cancel := context.WithTimeout(context.Background(), receiveWait)
	defer cancel()
	// The dispatcher waits on the clock for the delayed entry.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the dispatcher does not wait on the clock: %v", err)
	}
	clock.Advance(delay - time.Millisecond)
	expectNothing(t, cons, 300*time.Millisecond)
	clock.Advance(time.Millisecond)
	if m := receive(t, cons); string(m.Payload()) != "later" {
		t.Fatalf("got %q at the delivery time, want later", m.Payload())
	}
}
