package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/topology"
)

// BenchmarkScrape10kTopics is the time of one /metrics scrape of a broker
// holding 10,000 loaded topics (in-memory bookies; etcd embedded), with
// the Pulsar series at topic level (the most series: Pulsar's default) and
// aggregated to namespace level. Loading the topics takes a while: run it
// with -benchtime 5x.
func BenchmarkScrape10kTopics(b *testing.B) {
	for _, nsLevel := range []bool{false, true} {
		b.Run(fmt.Sprintf("namespaceLevel=%v", nsLevel), func(b *testing.B) {
			url := brokerWithTopics(b, 10_000, telemetry.MetricsConfig{NamespaceLevel: nsLevel})
			b.ResetTimer()
			var size int64
			for b.Loop() {
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("scrape: %s, %v", resp.Status, err)
				}
				size = n
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}

// brokerWithTopics starts a broker on in-memory bookies, loads topics
// topics in public/default on it, and returns its /metrics URL.
func brokerWithTopics(b *testing.B, topics int, mc telemetry.MetricsConfig) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// A node of its own holds the embedded etcd: the in-memory bookie must
	// be registered before the broker waits for it.
	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr = "seed-bookie", "127.0.0.1:0"
	seed, err := node.Start(ctx, node.Config{EmbedEtcd: true, DataDir: b.TempDir(), EtcdClientURL: "http://127.0.0.1:0",
		Logger: testLogger(), Regions: []node.RegionConfig{{Name: "seed", Bookies: []bookie.Config{bk}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { seed.Close() })
	store := metatest.Dial(b, seed.EtcdEndpoints())
	memory := ledgertest.NewCluster("bench-bookie")
	if err := ledgertest.Register(ctx, store, "bench", "bench-bookie", "", false); err != nil {
		b.Fatal(err)
	}
	bc := node.DefaultBrokerConfig("127.0.0.1")
	bc.BrokerAddr, bc.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	bc.Ledgers.EnsembleSize, bc.Ledgers.WriteQuorum, bc.Ledgers.AckQuorum = 1, 1, 1
	n, err := node.Start(ctx, node.Config{Etcd: seed.EtcdEndpoints(), Bootstrap: true, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "bench", Broker: &bc, BookieTransport: memory.Client("bench"), Metrics: mc}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	svc := n.Broker().Service()
	names := make(chan string)
	var loaders sync.WaitGroup
	for range 32 {
		loaders.Go(func() {
			for name := range names {
				tn, err := topology.ParseTopicName(name)
				if err == nil {
					_, err = svc.Topic(ctx, tn, true)
				}
				if err != nil {
					b.Errorf("load %s: %v", name, err)
				}
			}
		})
	}
	for i := range topics {
		names <- fmt.Sprintf("persistent://public/default/scrape-%05d", i)
	}
	close(names)
	loaders.Wait()
	if got := len(svc.Loaded()); got != topics {
		b.Fatalf("%d topics loaded, want %d", got, topics)
	}
	return n.Broker().WebURL() + "/metrics"
}
