package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/meridian-mq/meridian/testkit"
)

// TestDeadLetterInitialSubscription: a dead-letter producer that names an
// initial subscription gets it created before its first message, so a
// consumer of that subscription, even subscribing at the latest position,
// finds the dead letter.
func TestDeadLetterInitialSubscription(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic, dlq := "persistent://public/default/dlq-src", "persistent://public/default/dlq-dead"
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 100 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 1, DeadLetterTopic: dlq, InitialSubscriptionName: "init"}})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("poison")}); err != nil {
		t.Fatal(err)
	}
	cons.Nack(receive(t, cons))
	testkit.WaitFor(t, "the dead-letter topic's initial subscription", func() bool {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, dlq), false)
		return err == nil && tp.Stats().Subscriptions["init"].MsgBacklog == 1
	})
	dead := subscribe(t, c, pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "init"})
	if m := receive(t, dead); string(m.Payload()) != "poison" {
		t.Fatalf("dead letter %q", m.Payload())
	}
}
