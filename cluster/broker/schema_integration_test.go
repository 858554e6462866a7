package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/global"
)

const (
	userV1 = `{"type":"record","name":"User","namespace":"test","fields":[
		{"name":"id","type":"int"},{"name":"name","type":"string"}]}`
	// v2 adds a field with a default: FULL compatible with v1.
	userV2 = `{"type":"record","name":"User","namespace":"test","fields":[
		{"name":"id","type":"int"},{"name":"name","type":"string"},
		{"name":"email","type":"string","default":""}]}`
	// bad changes the type of a field: compatible in no direction.
	userBad = `{"type":"record","name":"User","namespace":"test","fields":[
		{"name":"id","type":"string"},{"name":"name","type":"string"}]}`
	// noDefault adds a field without a default: v1 data cannot be read
	// with it (not backward compatible, so not FULL).
	userNoDefault = `{"type":"record","name":"User","namespace":"test","fields":[
		{"name":"id","type":"int"},{"name":"name","type":"string"},
		{"name":"age","type":"int"}]}`
)

type userV1Value struct {
	ID   int    `json:"id" avro:"id"`
	Name string `json:"name" avro:"name"`
}

type userV2Value struct {
	ID    int    `json:"id" avro:"id"`
	Name  string `json:"name" avro:"name"`
	Email string `json:"email" avro:"email"`
}

// TestSchemas runs pulsar-client-go producers and consumers with AVRO and
// JSON schemas; the broker's default compatibility strategy is FULL.
func TestSchemas(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())

	for _, kind := range []struct {
		name string
		make func(def string) pulsar.Schema
	}{
		{"avro", func(def string) pulsar.Schema { return pulsar.NewAvroSchema(def, nil) }},
		{"json", func(def string) pulsar.Schema { return pulsar.NewJSONSchema(def, nil) }},
	} {
		t.Run(kind.name, func(t *testing.T) {
			topic := topicFor(t)
			cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: kind.make(userV1)})
			p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, Schema: kind.make(userV1)})
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Value: userV1Value{ID: 7, Name: "ada"}}); err != nil {
				t.Fatal(err)
			}
			var got userV1Value
			if err := receive(t, cons).GetSchemaValue(&got); err != nil || got != (userV1Value{7, "ada"}) {
				t.Fatalf("decoded %+v, %v", got, err)
			}

			for name, def := range map[string]string{"field type changed": userBad, "field without default": userNoDefault} {
				bad, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: kind.make(def)})
				if err == nil {
					bad.Close()
					t.Fatalf("%s: an incompatible schema was accepted", name)
				}
				if !strings.Contains(err.Error(), "IncompatibleSchema") {
					t.Fatalf("%s: %v, want IncompatibleSchema", name, err)
				}
			}

			p2 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, Schema: kind.make(userV2)})
			if _, err := p2.Send(context.Background(), &pulsar.ProducerMessage{Value: userV2Value{ID: 8, Name: "bob", Email: "b@x"}}); err != nil {
				t.Fatal(err)
			}
			// The v1 consumer reads a v2 message: the new field is dropped.
			if err := receive(t, cons).GetSchemaValue(&got); err != nil || got != (userV1Value{8, "bob"}) {
				t.Fatalf("decoded %+v, %v", got, err)
			}
			// Both versions keep producing.
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Value: userV1Value{ID: 9, Name: "cy"}}); err != nil {
				t.Fatal(err)
			}
			if err := receive(t, cons).GetSchemaValue(&got); err != nil || got != (userV1Value{9, "cy"}) {
				t.Fatalf("decoded %+v, %v", got, err)
			}
			// A consumer with an incompatible schema is refused.
			if bad, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "bad", Schema: kind.make(userBad)}); err == nil {
				bad.Close()
				t.Fatal("a consumer with an incompatible schema was accepted")
			}
		})
	}
}

// TestAutoTopicCreationOff: with autoTopicCreationOverride allow=false, a
// producer or consumer on a missing topic fails with TopicNotFound, and
// one on a topic that exists works.
func TestAutoTopicCreationOff(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	ns := createNamespace(t, r, "noauto", global.Policies{
		AutoTopicCreationOverride: &global.AutoTopicCreation{Allow: false, Type: global.NonPartitioned},
	})
	topic := topicIn(t, ns)
	start := time.Now()
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err == nil {
		t.Fatal("producer created on a missing topic with auto-creation off")
	}
	if !errors.Is(err, pulsar.ErrTopicNotfound) && !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("producer on a missing topic: %v, want TopicNotFound", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the refusal took %v: retried instead of final", time.Since(start))
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}); err == nil {
		t.Fatal("consumer subscribed to a missing topic with auto-creation off")
	} else if !strings.Contains(err.Error(), "TopicNotFound") && !errors.Is(err, pulsar.ErrTopicNotfound) {
		t.Fatalf("consumer on a missing topic: %v, want TopicNotFound", err)
	}
	// A partitioned topic created explicitly is usable.
	created := topicIn(t, ns, "-created")
	createPartitioned(t, r, created, 2)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: created})
	produce(t, p, "m", 1)
	// In public/default, auto-creation is on.
	createProducer(t, c, pulsar.ProducerOptions{Topic: topicFor(t)})
}
