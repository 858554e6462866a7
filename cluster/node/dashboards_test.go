package node_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	dto "github.com/prometheus/client_model/go"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// leftOut are the names Pulsar's stock dashboards query that Meridian does
// not serve, each with why: a rule is a name, or a prefix followed by '*'.
// The README's Metrics section lists the same.
var leftOut = []struct{ names, why string }{
	{"node_*", "node_exporter's host series (CPU, memory of the machine), not a Pulsar process's: run node_exporter"},
	{"up", "Prometheus's own per-target series; deploy/prometheus names the scrape jobs broker and bookie, which these panels count"},
	{"caffeine_cache_*", "the Caffeine cache library's series (a JVM library Meridian has no counterpart of)"},
	{"pulsar_lb_directMemory_usage", "JVM direct memory: a Go process has none"},
	{"pulsar_lb_resource_usage", "extensible load manager"},
	{"pulsar_lb_resource_usage_stats", "extensible load manager"},
	{"pulsar_lb_assign_broker_breakdown_total", "extensible load manager"},
	{"pulsar_lb_unload_broker_breakdown_total", "extensible load manager"},
	{"pulsar_lb_bundles_split_breakdown_total", "extensible load manager"},
	{"pulsar_sunit_state_chn_*", "extensible load manager (its service unit state channel)"},
	{"bookie_entries_count", "DbLedgerStorage's entry count: Meridian's index (pebble) keeps no count of its entries"},
	{"bookie_write_cache_size", "DbLedgerStorage's write cache: Meridian's journal is its entry log, no entry waits in a cache"},
	{"bookie_read_cache_size", "DbLedgerStorage's read-ahead cache: Meridian reads entries from the journal files and caches none"},
}

// leftOutReason is why name is left out, or "" when it is not.
func leftOutReason(name string) string {
	for _, l := range leftOut {
		if prefix, ok := strings.CutSuffix(l.names, "*"); ok && strings.HasPrefix(name, prefix) || l.names == name {
			return l.names + ": " + l.why
		}
	}
	return ""
}

// stockDashboardNames reads testdata/pulsar-dashboard-metrics.txt: the
// metric names of Pulsar's stock dashboards, by dashboard.
func stockDashboardNames(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("testdata/pulsar-dashboard-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		dashboard, name, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("testdata line %q: want \"<dashboard> <metric>\"", line)
		}
		out[dashboard] = append(out[dashboard], name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// seriesNames are the names a query can select from families: each
// family's, and a summary's or histogram's _count and _sum (and a
// histogram's _bucket).
func seriesNames(families ...map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, fs := range families {
		for name, f := range fs {
			out[name] = true
			switch f.GetType() {
			case dto.MetricType_SUMMARY:
				out[name+"_count"], out[name+"_sum"] = true, true
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"], out[name+"_sum"], out[name+"_bucket"] = true, true, true
			}
		}
	}
	return out
}

// TestStockDashboardMetrics runs a region as `meridian dev` does (a broker,
// a bookie and a replication worker in one process, replicating to a
// second region) plus a second broker in its own process that joins it,
// sends traffic on a topic of each bundle, and waits for the leader to
// shed bundles to the broker that joined. Then every metric name Pulsar's
// stock overview, topic, messaging, load-balance and BookKeeper dashboards
// query (testdata/pulsar-dashboard-metrics.txt) is served: the Pulsar ones
// by the region's brokers, the BookKeeper ones by the region's endpoint,
// which its bookie registers into; or leftOut names it, with why, and then
// it is not served. Run with -v to see what is left out.
func TestStockDashboardMetrics(t *testing.T) {
	mc := telemetry.MetricsConfig{StatsPeriod: 100 * time.Millisecond}
	fastShedding := func(b *node.BrokerConfig) {
		b.Service.LoadBalance.ReportInterval = 200 * time.Millisecond
		b.Service.LoadBalance.SheddingInterval = time.Second
		b.Service.LoadBalance.MinSheddingThroughput = 0
		b.Service.LoadBalance.AutoBundleSplit = false
	}
	cfg := node.Dev(t.TempDir(), []string{"east", "west"}, 0, 0)
	for i := range cfg.Regions {
		cfg.Regions[i].Metrics = mc
		fastShedding(cfg.Regions[i].Broker)
	}
	n, _ := startRecorded(t, cfg)
	east := region(t, n, "east")

	// A topic in each of public/default's bundles, all owned by the
	// region's first broker.
	var topics []string
	seen := map[string]bool{}
	for i := 0; len(topics) < topology.DefaultBundleCount; i++ {
		name := fmt.Sprintf("persistent://public/default/dash-%d", i)
		tn, err := topology.ParseTopicName(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := east.Broker().Service().Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[b.String()] {
			seen[b.String()] = true
			topics = append(topics, name)
		}
	}
	c := newClient(t, pulsar.ClientOptions{URL: east.Broker().ServiceURL(), OperationTimeout: 30 * time.Second})
	for _, topic := range topics {
		roundTrip(t, c, topic, 5)
	}

	// The second broker joins east; the leader sheds half the bundles to
	// it (the shedder's first rule: a broker with none gets its share).
	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	fastShedding(&b)
	joined := startNode(t, node.Config{Etcd: n.EtcdEndpoints(), Logger: testLogger(), Bootstrap: true,
		Regions: []node.RegionConfig{{Name: "east", Broker: &b, Metrics: mc}}})
	urls := []string{east.Broker().WebURL() + "/metrics", joined.Broker().WebURL() + "/metrics"}
	testkit.WaitFor(t, "the leader to shed bundles to the broker that joined", func() bool {
		for _, url := range urls {
			if v, _ := value(scrape(t, url), "pulsar_lb_unload_bundle_total", nil); v > 0 {
				return true
			}
		}
		return false
	})
	// Traffic again, on both brokers now.
	for _, topic := range topics {
		roundTrip(t, c, topic, 5)
	}

	regionFamilies, joinedFamilies := scrape(t, urls[0]), scrape(t, urls[1])
	var adds uint64
	for _, m := range regionFamilies["bookkeeper_server_ADD_ENTRY"].GetMetric() {
		adds += m.GetSummary().GetSampleCount()
	}
	if adds == 0 {
		t.Error("the region's bookie served no bookkeeper_server_ADD_ENTRY after the traffic")
	}
	if v, _ := value(joinedFamilies, "pulsar_topics_count", map[string]string{"namespace": "public/default"}); v <= 0 {
		t.Errorf("the broker that joined serves pulsar_topics_count %v for public/default, want the topics shed to it", v)
	}

	brokers := seriesNames(regionFamilies, joinedFamilies)
	bookie := seriesNames(regionFamilies)
	names := stockDashboardNames(t)
	for _, dashboard := range []string{"overview", "topic", "messaging", "loadbalance", "bookkeeper"} {
		if len(names[dashboard]) == 0 {
			t.Fatalf("testdata has no names of the %s dashboard", dashboard)
		}
		served := brokers
		if dashboard == "bookkeeper" {
			served = bookie
		}
		for _, name := range names[dashboard] {
			why := leftOutReason(name)
			switch {
			case why != "" && served[name]:
				t.Errorf("%s dashboard: %s is served now; take it off leftOut (%s)", dashboard, name, why)
			case why != "":
				t.Logf("%s dashboard: %s left out (%s)", dashboard, name, why)
			case !served[name]:
				t.Errorf("%s dashboard: %s is not served", dashboard, name)
			}
		}
	}
	for _, l := range leftOut {
		if !slices.ContainsFunc(slices.Concat(names["overview"], names["topic"], names["messaging"], names["loadbalance"], names["bookkeeper"]),
			func(name string) bool { return leftOutReason(name) == l.names+": "+l.why }) {
			t.Errorf("leftOut names %s, which no dashboard queries", l.names)
		}
	}
}
