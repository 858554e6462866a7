package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

func testLogger() *slog.Logger { return brokertest.Logger() }

// newStorage starts an etcd and bookies for brokers, stopped at the end of
// the test.
func newStorage(t testing.TB) *brokertest.Storage {
	t.Helper()
	s, err := brokertest.NewStorage(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// startBroker starts a broker on storage (nil: a fresh one), stopped at the
// end of the test. A test restarts a broker by closing it and starting
// another on the same storage.
func startBroker(t testing.TB, storage *brokertest.Storage, mutate ...func(*brokertest.Config)) *brokertest.Broker {
	t.Helper()
	if storage == nil {
		storage = newStorage(t)
	}
	cfg := brokertest.DefaultConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := brokertest.Start(ctx, storage, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func newClient(t testing.TB, url string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            plog.NewLoggerWithSlog(testLogger()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestProduceConsume(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	ctx := context.Background()
	topic := "persistent://public/default/basic"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 100
	for i := range n {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := cons.Receive(rctx)
		cancel()
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if got := string(m.Payload()); got != fmt.Sprint(i) {
			t.Fatalf("message %d: got %q", i, got)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}
