package broker_test

import (
	"context"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestNonPersistentTopic: a non-persistent topic serves producers and
// consumers, and a consumer sees only what is published while it is
// connected.
func TestNonPersistentTopic(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := "non-persistent://public/default/np"
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, cons); string(m.Payload()) != "after" {
		t.Fatalf("a non-persistent consumer received %q, published before it subscribed", m.Payload())
	}
}
