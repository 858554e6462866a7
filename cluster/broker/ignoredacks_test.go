package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/testkit"
)

// TestIgnoredAcks: pulsar-client-go consumers ack ids they were never
// delivered, as a client does after a failover with the acks it still holds
// of the old region's ids. The broker ignores them (a client that asks for
// ack responses gets NotAllowed), counts them in topic stats and in
// pulsar_subscription_ignored_acks_total, and still applies the consumers'
// legitimate acks.
//
// The first ignored id names an entry of the topic delivered to another
// consumer of the Shared subscription, which never acks it: applied, that
// ack would lose the message to the subscription when its consumer leaves.
// The second carries another region's number in its ledger id
// (cluster/ledger's LedgerID).
func TestIgnoredAcks(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true}
	opts.Name = "a"
	a := subscribe(t, c, opts)
	opts.Name = "b"
	b := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 10
	produce(t, p, "m", n)

	tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
	if err != nil {
		t.Fatal(err)
	}
	unacked := map[string]int64{}
	testkit.WaitFor(t, "both consumers given messages", func() bool {
		clear(unacked)
		for _, cs := range tp.Stats().Subscriptions["s"].Consumers {
			unacked[cs.ConsumerName] = cs.UnackedMessages
		}
		return unacked["a"] > 0 && unacked["b"] > 0 && unacked["a"]+unacked["b"] == n
	})
	var ofA, ofB []pulsar.Message
	for range unacked["a"] {
		ofA = append(ofA, receive(t, a))
	}
	for range unacked["b"] {
		ofB = append(ofB, receive(t, b))
	}

	stolen := ofA[0].ID()
	otherRegion := pulsar.NewMessageID(stolen.LedgerID()^(3<<44), stolen.EntryID(), -1, 0)
	for _, id := range []pulsar.MessageID{stolen, otherRegion} {
		if err := b.AckID(id); err == nil || !strings.Contains(err.Error(), "never delivered to this consumer") {
			t.Fatalf("ack of %v, never delivered to consumer b: %v, want NotAllowed", id, err)
		}
	}
	for _, m := range ofB {
		if err := b.Ack(m); err != nil {
			t.Fatalf("ack of %s, delivered to b: %v", m.Payload(), err)
		}
	}
	// a leaves without acking: everything it had comes to b, the message
	// whose id b tried to ack included.
	a.Close()
	want := map[string]bool{}
	for _, m := range ofA {
		want[string(m.Payload())] = true
	}
	for range ofA {
		m := receive(t, b)
		if !want[string(m.Payload())] {
			t.Fatalf("b got %q again, or a message a never had", m.Payload())
		}
		delete(want, string(m.Payload()))
		if err := b.Ack(m); err != nil {
			t.Fatalf("ack of %s, redelivered to b: %v", m.Payload(), err)
		}
	}

	testkit.WaitFor(t, "every legitimate ack applied", func() bool { return tp.Stats().Subscriptions["s"].MsgBacklog == 0 })
	if got := tp.Stats().Subscriptions["s"].IgnoredAcks; got != 2 {
		t.Errorf("topic stats count %d ignored acks, want 2", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(broker.NewPulsarCollector(r.Service(), 5*time.Second))
	if got := metricValue(t, reg, "pulsar_subscription_ignored_acks_total", "subscription", "s"); got != 2 {
		t.Errorf("pulsar_subscription_ignored_acks_total = %v, want 2", got)
	}
}
