package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/topology"
)

// TestCreateBesideALookOnlyLoad: a PRODUCER, which may create its topic,
// that arrives while a request that may not (an admin's stats) is loading
// the same missing topic gets its topic, not the other request's
// TopicNotFound. pulsar-client-go gives up on a producer for good on
// TopicNotFound, so a stats poll could strand a producer that a region
// switch had just sent here.
func TestCreateBesideALookOnlyLoad(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	for i := range 20 {
		topic := topicFor(t, fmt.Sprint("-", i))
		name, err := topology.ParseTopicName(topic)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		var polls sync.WaitGroup
		for range 4 {
			polls.Go(func() {
				for ctx.Err() == nil {
					r.Service().Topic(ctx, name, false)
				}
			})
		}
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		stop()
		polls.Wait()
		if err != nil {
			t.Fatalf("producer %d beside loads that may not create: %v", i, err)
		}
		p.Close()
	}
}
