package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
)

// BenchmarkPerfProduce runs `meridian perf produce -r RATE -s 1024 -b 1
// --num-messages b.N` as its own process against a region in this process,
// and reports the latency percentiles perf measured, in milliseconds. The
// region keeps its ledgers either on its bookie, which fsyncs to this
// machine's disk, as `meridian standalone` does (storage=disk), or on
// in-memory bookies that answer at once (storage=memory). The memory figures
// are the broker and pulsar-client-go without storage: the floor this client
// and machine put under the disk figures. RATE is MERIDIAN_BENCH_RATE in
// msg/s, default 20000; 0 is as fast as possible (then the rate is the
// figure). Run it with -benchtime 400000x: each run starts a region.
func BenchmarkPerfProduce(b *testing.B) {
	rate := 20000
	if v := os.Getenv("MERIDIAN_BENCH_RATE"); v != "" {
		var err error
		if rate, err = strconv.Atoi(v); err != nil || rate < 0 {
			b.Fatalf("MERIDIAN_BENCH_RATE=%q: want msg/s, 0 or more", v)
		}
	}
	for _, storage := range []string{"memory", "disk"} {
		b.Run("storage="+storage, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
			defer cancel()
			var url string
			if storage == "memory" {
				url = startMemoryRegion(ctx, b, nil)
			} else {
				url = startRegion(ctx, b).ServiceURL()
			}
			dir := b.TempDir()
			jsonPath := filepath.Join(dir, "produce.json")
			b.ResetTimer()
			p := startProcess(b, "perf produce", filepath.Join(dir, "perf.log"), "perf", "produce", "-u", url,
				"-r", strconv.Itoa(rate), "-s", "1024", "-b", "1", "--num-messages", strconv.Itoa(b.N),
				"--json", jsonPath, "persistent://public/default/bench")
			select {
			case <-p.exited:
			case <-ctx.Done():
				b.Fatalf("perf produce did not finish: %v", ctx.Err())
			}
			b.StopTimer()
			if p.exitErr != nil {
				b.Fatalf("perf produce: %v", p.exitErr)
			}
			s := readSummary(b, jsonPath)
			if s.Total.Count != int64(b.N) {
				b.Fatalf("perf produce sent %d messages, want %d", s.Total.Count, b.N)
			}
			b.ReportMetric(s.Total.Rate, "msg/s")
			b.ReportMetric(s.Total.P50, "p50-ms")
			b.ReportMetric(s.Total.P99, "p99-ms")
			b.ReportMetric(s.Total.P999, "p99.9-ms")
		})
	}
}

// startMemoryRegion starts a region whose one bookie is in memory: embedded
// etcd and a broker node (E=Qw=Qa=1) whose ledger client reaches a
// ledgertest bookie, registered as a real one would be, tracing with
// tracing (nil: not tracing). It returns the broker's service URL.
func startMemoryRegion(ctx context.Context, t testing.TB, tracing *telemetry.Tracing) string {
	t.Helper()
	return startMemoryRegionWith(ctx, t, tracing, telemetry.MetricsConfig{}).Broker().ServiceURL()
}

// startMemoryRegionWith is startMemoryRegion with the region's metrics
// configured by mc; it returns the node, which the test's cleanup stops.
func startMemoryRegionWith(ctx context.Context, t testing.TB, tracing *telemetry.Tracing, mc telemetry.MetricsConfig) *node.Node {
	t.Helper()
	ecfg := meta.DefaultEmbedConfig()
	ecfg.Logger = discardLogger()
	etcd := metatest.Start(t, ecfg)
	store := metatest.Dial(t, etcd.Endpoints())

	const region, bookieID = "standalone", "memory-0"
	bookies := ledgertest.NewCluster(bookieID)
	if err := ledgertest.Register(ctx, store, region, bookieID, "", false); err != nil {
		t.Fatalf("register the in-memory bookie: %v", err)
	}
	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	n, err := node.Start(ctx, node.Config{Etcd: etcd.Endpoints(), Bootstrap: true, Logger: discardLogger(), Tracing: tracing,
		Regions: []node.RegionConfig{{Name: region, Broker: &b, BookieTransport: bookies.Client("broker"), Metrics: mc}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
