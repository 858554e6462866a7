package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/topology"
)

// TestCloseDrainsToTheOtherBroker: a broker node stopped as SIGTERM stops
// it (Node.Close) hands its bundles to the region's other broker while its
// clients are still connected, so a producer sending meanwhile sees no
// error and goes straight to the other broker, told by CLOSE_PRODUCER: it
// never tries the stopped broker again (no failed reconnect, which a
// producer whose connection dropped first, and that looked the topic up
// through the stopped broker, would count).
func TestCloseDrainsToTheOtherBroker(t *testing.T) {
	etcd := startStandalone(t, func(*node.BrokerConfig) {}) // its embedded etcd, as the region's store
	endpoints := etcd.EtcdEndpoints()
	log := failureLogger(t) // it failed once in about 180 runs, stalled after the drain
	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-drain", "127.0.0.1:0", t.TempDir()
	startNode(t, node.Config{Etcd: endpoints, Logger: log.With("node", "bookie"),
		Regions: []node.RegionConfig{{Name: "drain", Bookies: []bookie.Config{bk}, MetricsAddr: "127.0.0.1:0"}}})
	brokerNode := func(name string) *node.Node {
		b := node.DefaultBrokerConfig("127.0.0.1")
		b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
		b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
		return startNode(t, node.Config{Etcd: endpoints, Logger: log.With("node", name), Bootstrap: true,
			Regions: []node.RegionConfig{{Name: "drain", Broker: &b}}})
	}
	first, second := brokerNode("first"), brokerNode("second")

	const topic = "persistent://public/default/drained"
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, mine, err := first.Broker().Service().Owner(ctx, tn); err != nil || !mine {
		t.Fatalf("claim on the first broker: mine %v, err %v", mine, err)
	}
	reg := prometheus.NewRegistry()
	// The client knows the first broker only: it reaches the second
	// because CLOSE_PRODUCER names it, not by a lookup.
	c := newClient(t, pulsar.ClientOptions{URL: first.Broker().ServiceURL(), OperationTimeout: 30 * time.Second,
		MetricsRegisterer: reg, Logger: plog.NewLoggerWithSlog(log.With("node", "client"))})
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, SendTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const total = 2000
	var receipted, failed atomic.Int64
	var firstErr atomic.Value
	var answered sync.WaitGroup
	go func() {
		for i := range total {
			answered.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer answered.Done()
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						failed.Add(1)
						return
					}
					receipted.Add(1)
				})
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // a stream, not one burst
			}
		}
	}()
	for receipted.Load() < total/3 {
		if ctx.Err() != nil {
			t.Fatalf("only %d receipts", receipted.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close the first broker: %v", err)
	}
	for receipted.Load()+failed.Load() < total {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d sends answered", receipted.Load()+failed.Load(), total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	answered.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d sends failed across the drain, the first: %v", n, firstErr.Load())
	}
	if owner, mine, err := second.Broker().Service().Owner(ctx, tn); err != nil || !mine {
		t.Fatalf("owner after the drain: %+v (mine %v, err %v), want the second broker", owner, mine, err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pulsar_client_producers_reconnect_failure" {
			continue
		}
		for _, m := range f.GetMetric() {
			if n := m.GetCounter().GetValue(); n != 0 {
				t.Fatalf("the producer failed %v reconnects: it was not sent to the other broker", n)
			}
		}
	}
}
