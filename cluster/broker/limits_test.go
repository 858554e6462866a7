package broker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// TestProducerConsumerLimits: a namespace's max producers per topic, max
// consumers per topic and max consumers per subscription refuse the one
// producer or consumer too many with ProducerBusy or ConsumerBusy, a place
// freed is taken again, and a topic's own limit overrides the namespace's.
func TestProducerConsumerLimits(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	ns := createNamespace(t, r, "limits", global.Policies{Extra: global.Extra{
		global.ExtraMaxProducersPerTopic:        json.RawMessage("1"),
		global.ExtraMaxConsumersPerTopic:        json.RawMessage("2"),
		global.ExtraMaxConsumersPerSubscription: json.RawMessage("1"),
	}})
	refused := func(what string, err error, code string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), code) {
			t.Fatalf("%s: %v, want %s", what, err, code)
		}
	}

	topic := topicIn(t, ns)
	first := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	refused("second producer", err, "ProducerBusy")
	first.Close()
	createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	// A replication producer neither counts nor is refused, as in Pulsar:
	// a region's replicator must not be locked out by local producers.
	openReplicationProducer(t, r.ServiceURL(), topic)

	shared := func(sub string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared}
	}
	a := subscribe(t, c, shared("a"))
	_, err = c.Subscribe(shared("a"))
	refused("second consumer of subscription a", err, "ConsumerBusy")
	subscribe(t, c, shared("b"))
	_, err = c.Subscribe(shared("c"))
	refused("third consumer of the topic", err, "ConsumerBusy")
	a.Close()
	subscribe(t, c, shared("c"))

	// The topic's own limit wins over the namespace's.
	own := topicIn(t, ns, "own")
	createTopic(t, r, own, global.TopicPolicies{Extra: global.Extra{global.ExtraTopicMaxProducers: json.RawMessage("2")}})
	createProducer(t, c, pulsar.ProducerOptions{Topic: own})
	createProducer(t, c, pulsar.ProducerOptions{Topic: own})
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: own})
	refused("third producer under the topic's limit of 2", err, "ProducerBusy")
}

// TestConnectionProducerConsumerLimits: a connection's producers and
// consumers are bounded (MaxProducersPerConnection,
// MaxConsumersPerConnection): the one past either is refused with
// NotAllowed, whatever topic it names, and a place freed is taken again;
// another connection has its own. There was no bound.
func TestConnectionProducerConsumerLimits(t *testing.T) {
	r := startBroker(t, nil, func(cfg *brokertest.Config) {
		cfg.Broker.MaxProducersPerConnection, cfg.Broker.MaxConsumersPerConnection = 2, 2
	})
	c := newClient(t, r.ServiceURL())
	a, b := topicFor(t), topicFor(t)
	first := createProducer(t, c, pulsar.ProducerOptions{Topic: a})
	createProducer(t, c, pulsar.ProducerOptions{Topic: b})
	if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: b}); err == nil || !strings.Contains(err.Error(), "NotAllowed") {
		if p != nil {
			p.Close()
		}
		t.Fatalf("third producer on the connection: %v, want NotAllowed", err)
	}
	first.Close()
	createProducer(t, c, pulsar.ProducerOptions{Topic: b})

	opts := func(sub string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: a, SubscriptionName: sub, Type: pulsar.Shared}
	}
	one := subscribe(t, c, opts("s1"))
	subscribe(t, c, opts("s2"))
	if cons, err := c.Subscribe(opts("s3")); err == nil || !strings.Contains(err.Error(), "NotAllowed") {
		if cons != nil {
			cons.Close()
		}
		t.Fatalf("third consumer on the connection: %v, want NotAllowed", err)
	}
	one.Close()
	subscribe(t, c, opts("s3"))

	// Another client's connection has places of its own.
	other := newClient(t, r.ServiceURL())
	createProducer(t, other, pulsar.ProducerOptions{Topic: a})
	subscribe(t, other, opts("s4"))
}

// TestTopicSubscriptionAndUnackedLimits: a topic's maxSubscriptionsPerTopic
// refuses a new subscription with NotAllowed but lets a consumer join a
// known one, and its maxUnackedMessagesOnConsumer holds back delivery to a
// Shared consumer that has that many messages unacked until it acks one.
func TestTopicSubscriptionAndUnackedLimits(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	createTopic(t, r, topic, global.TopicPolicies{Extra: global.Extra{
		global.ExtraTopicMaxSubscriptions:     json.RawMessage("1"),
		global.ExtraTopicMaxUnackedOnConsumer: json.RawMessage("3"),
	}})

	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 10}
	cons := subscribe(t, c, opts)
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "other"}); err == nil ||
		!strings.Contains(err.Error(), "NotAllowed") {
		t.Fatalf("a second subscription under a limit of 1: %v, want NotAllowed", err)
	}
	subscribe(t, c, opts).Close() // a known subscription takes consumers

	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p, "m", 5)
	var held []pulsar.Message
	for range 3 {
		held = append(held, receive(t, cons))
	}
	expectNothing(t, cons, 300*time.Millisecond)
	cons.Ack(held[0])
	if m := receive(t, cons); string(m.Payload()) != "m3" {
		t.Fatalf("after an ack got %q, want m3", m.Payload())
	}
}

// TestSubscriptionLimitKeepsExisting: lowering a topic's
// maxSubscriptionsPerTopic below the subscriptions it has refuses new ones
// only. The topic still loads after a restart with all of its
// subscriptions, and their consumers come back.
func TestSubscriptionLimitKeepsExisting(t *testing.T) {
	storage := newStorage(t)
	r := startBroker(t, storage)
	topic := topicFor(t)
	c := newClient(t, r.ServiceURL())
	for _, sub := range []string{"a", "b"} {
		subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub}).Close()
	}
	createTopic(t, r, topic, global.TopicPolicies{Extra: global.Extra{global.ExtraTopicMaxSubscriptions: json.RawMessage("1")}})
	c.Close()
	r.Close()

	r = startBroker(t, storage)
	c = newClient(t, r.ServiceURL())
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "b"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	produce(t, p, "m", 1)
	if m := receive(t, cons); string(m.Payload()) != "m0" {
		t.Fatalf("got %q, want m0", m.Payload())
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "c"}); err == nil ||
		!strings.Contains(err.Error(), "NotAllowed") {
		t.Fatalf("a third subscription under a limit of 1: %v, want NotAllowed", err)
	}
}

// TestAutoSubscriptionCreation: a namespace that disallows auto
// subscription creation refuses a consumer's new durable subscription
// with SubscriptionNotFound and a producer's new initial subscription with
// NotAllowed, as Pulsar does, while a subscription created through the
// admin path, a reader (non-durable) and a non-persistent topic still
// work; a topic's own override wins over the namespace's.
func TestAutoSubscriptionCreation(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	ns := createNamespace(t, r, "nosubs", global.Policies{Extra: global.Extra{
		global.ExtraAutoSubscriptionCreation: json.RawMessage(`{"allowAutoSubscriptionCreation":false}`),
	}})
	topic := topicIn(t, ns)
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "new"}); err == nil ||
		!strings.Contains(err.Error(), "SubscriptionNotFound") {
		t.Fatalf("a new subscription where auto creation is off: %v, want SubscriptionNotFound", err)
	}
	tp, err := r.Service().Topic(t.Context(), mustTopic(t, topic), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.CreateSubscription(t.Context(), "made", nil); err != nil {
		t.Fatal(err)
	}
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "made"})
	reader, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("a reader where auto creation is off: %v", err)
	}
	defer reader.Close()
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	produce(t, p, "m", 1)
	if m := receive(t, cons); string(m.Payload()) != "m0" {
		t.Fatalf("consumer got %q, want m0", m.Payload())
	}
	if m := next(t, reader); string(m.Payload()) != "m0" {
		t.Fatalf("reader got %q, want m0", m.Payload())
	}
	subscribe(t, c, pulsar.ConsumerOptions{Topic: "non-persistent://" + strings.TrimPrefix(topic, "persistent://"), SubscriptionName: "np"})

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("p"),
		InitialSubscriptionName: proto.String("dead"),
	}.Build()}.Build())
	if e := rc.expect(pb.BaseCommand_ERROR).GetError(); e.GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("a producer's new initial subscription where auto creation is off: %v, want NotAllowed", e)
	}

	own := topicIn(t, ns, "own")
	createTopic(t, r, own, global.TopicPolicies{Extra: global.Extra{
		global.ExtraTopicAutoSubscriptionCreation: json.RawMessage(`{"allowAutoSubscriptionCreation":true}`),
	}})
	subscribe(t, c, pulsar.ConsumerOptions{Topic: own, SubscriptionName: "new"})
}
