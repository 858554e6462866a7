package broker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/testkit"
)

// fastShedding sheds every second on reports every 200ms, and moves
// bundles of any throughput.
func fastShedding(c *brokertest.Config) {
	fastLoadBalance(c)
	c.Service.LoadBalance.SheddingInterval = time.Second
	c.Service.LoadBalance.MinSheddingThroughput = 0
}

// reportedBundles returns the bundles b's last load report lists.
func reportedBundles(b *brokertest.Broker) []string {
	r, _ := b.Service().LoadManager().LoadReport()
	return r.Bundles
}

// sendTo starts a producer on topic sending perTick messages every tick
// until the end of the test, when it checks that no send failed.
func sendTo(t *testing.T, c pulsar.Client, topic string, perTick int, tick time.Duration) *sender {
	t.Helper()
	return sendWith(t, createProducer(t, c, pulsar.ProducerOptions{Topic: topic}), topic, perTick, tick)
}

// sendWith is sendTo with a producer already created.
func sendWith(t *testing.T, p pulsar.Producer, topic string, perTick int, tick time.Duration) *sender {
	t.Helper()
	s := startSender(p, perTick, tick)
	t.Cleanup(func() {
		close(s.stop)
		s.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Errorf("%s: flush: %v", topic, err)
		}
		if n := s.failed.Load(); n > 0 {
			t.Errorf("%s: %d sends failed; first: %v", topic, n, s.firstErr.Load())
		}
	})
	return s
}

// TestShedToNewBroker: a broker that joins a running region receives its
// share of the bundles within one shedding interval, and no send fails.
func TestShedToNewBroker(t *testing.T) {
	storage := newStorage(t)
	reg := prometheus.NewRegistry()
	first := startBroker(t, storage, fastShedding, withRegistry(reg))
	ns := namespaceOfBundles(t, []*brokertest.Broker{first}, "scaleout", 8)
	c := newClient(t, first.ServiceURL())
	for _, topic := range topicPerBundle(t, first, ns, 8) {
		sendTo(t, c, topic, 2, 10*time.Millisecond)
	}
	var owned int
	testkit.WaitFor(t, "every bundle owned and reported", func() bool {
		owned = len(reportedBundles(first))
		return owned == 8
	})
	joined := startBroker(t, storage, fastShedding)
	started := time.Now()
	testkit.WaitFor(t, "the broker that joined to report its share", func() bool {
		return len(reportedBundles(joined)) >= 4
	})
	t.Logf("the broker that joined reported 4 of 8 bundles %v after it started (shedding interval 1s, reports every 200ms)",
		time.Since(started).Round(time.Millisecond))
	// The leader counts a move once the owner's hand-off has answered, which
	// may come after the new owner has loaded the bundle and reported it.
	testkit.WaitFor(t, "the leader to count at least 4 bundles shed", func() bool {
		return metricValue(t, reg, "meridian_broker_load_balance_total", "action", "shed") >= 4
	})
}

// TestShedOffHotBroker: with one bundle carrying most of the region's
// messages, shedding moves the other bundles off its broker and leaves the
// hot bundle there (issue 14's placement test, second case), with no send
// error.
func TestShedOffHotBroker(t *testing.T) {
	storage := newStorage(t)
	brokers := startBrokers(t, storage, 3, fastShedding)
	ns := namespaceOfBundles(t, brokers, "hot", 16)
	topics := topicPerBundle(t, brokers[0], ns, 16)
	hotBundle, err := brokers[0].Service().Bundle(mustTopic(t, topics[0]))
	if err != nil {
		t.Fatal(err)
	}
	hot := ns + "/" + hotBundle.String()
	c := newClient(t, brokers[0].ServiceURL())
	// Every producer is created before any sends: the load they make starts
	// the shedding, and a producer created while its bundle moves may fail.
	producers := make([]pulsar.Producer, len(topics))
	for i, topic := range topics {
		producers[i] = createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	}
	sendWith(t, producers[0], topics[0], 20, 10*time.Millisecond) // about 2000 messages/s
	for i, topic := range topics[1:] {
		sendWith(t, producers[i+1], topic, 1, 100*time.Millisecond) // about 10 messages/s each
	}
	var owner *brokertest.Broker
	testkit.WaitFor(t, "the hot bundle's broker to shed its other bundles", func() bool {
		owner = nil
		total := 0
		for _, b := range brokers {
			bs := reportedBundles(b)
			total += len(bs)
			if slices.Contains(bs, hot) {
				owner = b
			}
		}
		return total == 16 && owner != nil && len(reportedBundles(owner)) <= 2
	})
	for _, b := range brokers {
		t.Logf("broker %s: %d bundles", b.ID(), len(reportedBundles(b)))
	}
}
