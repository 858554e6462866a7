package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
)

// TestSubscribeRate, through pulsar-client-go on a fake clock: a process
// that subscribes and closes in a loop (a new client each time, so its
// consumer keeps id 0, under the same name) is held to the namespace's
// rate of 2 per 10 s, the refusal naming the rate; a consumer under the
// rate, on the same topic, subscribes and receives as ever; once the
// clock has moved on by period/count, the loop may subscribe once more. A
// non-persistent topic of the namespace has no subscribe rate, as on
// Pulsar.
func TestSubscribeRate(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Now())
	r := startBroker(t, nil, func(cfg *brokertest.Config) { cfg.Service.Clock = clock })
	rates := []byte(`{"` + brokertest.Region + `":{"subscribeThrottlingRatePerConsumer":2,"ratePeriodInSecond":10}}`)
	ns := createNamespace(t, r, "subrate", global.Policies{Extra: global.Extra{global.ExtraSubscribeRate: rates}})
	topic := "persistent://" + ns + "/t"

	subscribeTo := func(topic string) error {
		c := newClient(t, r.ServiceURL())
		defer c.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "loop", Name: "looping"})
		if err == nil {
			cons.Close()
		}
		return err
	}
	subscribeOnce := func() error { return subscribeTo(topic) }
	for i := range 2 {
		if err := subscribeOnce(); err != nil {
			t.Fatalf("subscribe %d of 2 in the period: %v", i+1, err)
		}
	}
	err := subscribeOnce()
	if err == nil || !strings.Contains(err.Error(), "NotAllowed") ||
		!strings.Contains(err.Error(), "Subscribe limited by subscribe rate limit per consumer") {
		t.Fatalf("a 3rd subscribe in the period: %v; want NotAllowed naming the subscribe rate", err)
	}
	for i := range 3 {
		if err := subscribeTo("non-persistent://" + ns + "/t"); err != nil {
			t.Fatalf("subscribe %d of 3 to a non-persistent topic: %v", i+1, err)
		}
	}

	c := newClient(t, r.ServiceURL())
	steady := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "steady", Name: "steady"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	produce(t, p, "m", 1)
	if m := receive(t, steady); string(m.Payload()) != "m0" {
		t.Fatalf("steady consumer got %q, want m0", m.Payload())
	}

	clock.Advance(5*time.Second - time.Millisecond)
	if err := subscribeOnce(); err == nil {
		t.Fatal("the loop subscribed again before its bucket held a token")
	}
	clock.Advance(time.Millisecond)
	if err := subscribeOnce(); err != nil {
		t.Fatalf("the loop, period/count later: %v", err)
	}
}

// TestSubscribeRateTopicOverridesNamespace: a topic's subscribeRate that
// limits nothing lifts the namespace's for that topic.
func TestSubscribeRateTopicOverridesNamespace(t *testing.T) {
	r := startBroker(t, nil)
	rates := []byte(`{"` + brokertest.Region + `":{"subscribeThrottlingRatePerConsumer":1,"ratePeriodInSecond":3600}}`)
	ns := createNamespace(t, r, "subrate", global.Policies{Extra: global.Extra{global.ExtraSubscribeRate: rates}})
	topic := "persistent://" + ns + "/free"
	createTopic(t, r, topic, global.TopicPolicies{Extra: global.Extra{
		global.ExtraTopicSubscribeRate: []byte(`{"subscribeThrottlingRatePerConsumer":-1,"ratePeriodInSecond":30}`)}})
	for i := range 3 {
		c := newClient(t, r.ServiceURL())
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Name: "same"})
		if err != nil {
			t.Fatalf("subscribe %d: %v", i, err)
		}
		cons.Close()
		c.Close()
	}
}
