package broker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/cluster/broker/standalone"
)

// region is a standalone region for one test, on free ports.
type region struct {
	*standalone.Standalone
	dir string
}

func testLogger() *slog.Logger {
	if os.Getenv("BROKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func standaloneConfig(dir string) standalone.Config {
	cfg := standalone.DefaultConfig(dir)
	cfg.BrokerAddr, cfg.WebAddr, cfg.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
	cfg.Logger = testLogger()
	return cfg
}

// startRegion starts a standalone region in a fresh directory (or dir, to
// restart one), stopped at the end of the test.
func startRegion(t testing.TB, dir string, mutate ...func(*standalone.Config)) *region {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := standaloneConfig(dir)
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := standalone.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &region{Standalone: s, dir: dir}
	t.Cleanup(func() { s.Close() })
	return r
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
	r := startRegion(t, "")
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
