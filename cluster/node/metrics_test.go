package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/testkit"
)

// goldenSeries is one family a running region serves: its type and the
// label names of every series.
type goldenSeries struct {
	name   string
	kind   dto.MetricType
	labels []string
}

var (
	topicLabels = []string{"cluster", "namespace", "topic"}
	subLabels   = []string{"cluster", "namespace", "topic", "subscription"}
	replLabels  = []string{"cluster", "namespace", "topic", "remote_cluster"}
	gauge       = dto.MetricType_GAUGE
	counter     = dto.MetricType_COUNTER
	histogram   = dto.MetricType_HISTOGRAM
)

// golden is what a region with a broker, a bookie and a replicator serves
// after traffic and replication, by Pulsar's names, types and labels
// (PrometheusMetricsGenerator's TopicStats: every family is a gauge but the
// _total counters) and Meridian's own.
var golden = func() []goldenSeries {
	g := []goldenSeries{}
	for _, n := range []string{"pulsar_subscriptions_count", "pulsar_producers_count", "pulsar_consumers_count",
		"pulsar_rate_in", "pulsar_rate_out", "pulsar_throughput_in", "pulsar_throughput_out",
		"pulsar_storage_size", "pulsar_msg_backlog",
		"pulsar_storage_write_latency_count", "pulsar_storage_write_latency_sum",
		"pulsar_entry_size_count", "pulsar_entry_size_sum"} {
		g = append(g, goldenSeries{n, gauge, topicLabels})
	}
	for _, n := range append(slices.Clone(telemetry.WriteLatencyBucketNames), telemetry.EntrySizeBucketNames...) {
		g = append(g, goldenSeries{n, gauge, topicLabels})
	}
	for _, n := range []string{"pulsar_in_messages_total", "pulsar_in_bytes_total"} {
		g = append(g, goldenSeries{n, counter, topicLabels})
	}
	// At topic level Pulsar counts what goes out per subscription.
	for _, n := range []string{"pulsar_out_messages_total", "pulsar_out_bytes_total", "pulsar_subscription_ignored_acks_total"} {
		g = append(g, goldenSeries{n, counter, subLabels})
	}
	for _, n := range []string{"pulsar_subscription_back_log", "pulsar_subscription_msg_rate_out", "pulsar_subscription_unacked_messages",
		"pulsar_subscription_delayed", "pulsar_subscription_msg_throughput_out", "pulsar_subscription_consumers_count"} {
		g = append(g, goldenSeries{n, gauge, subLabels})
	}
	for _, n := range []string{"pulsar_replication_backlog", "pulsar_replication_rate_in", "pulsar_replication_rate_out",
		"pulsar_replication_throughput_in", "pulsar_replication_throughput_out", "pulsar_replication_delay_in_seconds",
		"pulsar_replication_connected_count", "pulsar_replication_disconnected_count", "pulsar_replication_rate_expired"} {
		g = append(g, goldenSeries{n, gauge, replLabels})
	}
	return append(g, meridianGolden...)
}()

// meridianGolden are the meridian_* families of the list.
var meridianGolden = []goldenSeries{
	{"meridian_bookie_journal_sync_seconds", histogram, nil},
	{"meridian_bookie_journal_queue_depth", gauge, nil},
	{"meridian_ledger_add_seconds", histogram, nil},
	{"meridian_etcd_operation_seconds", histogram, []string{"op", "store"}},
	{"meridian_etcd_operation_errors_total", counter, []string{"op", "store"}},
	{"meridian_broker_lookup_seconds", histogram, nil},
	{"meridian_broker_ownership_changes_total", counter, []string{"change"}},
	{"meridian_broker_dispatch_read_entries", histogram, nil},
	{"meridian_broker_region_leader", gauge, nil},
	{"meridian_broker_load_balance_total", counter, []string{"action"}},
	{"meridian_replicator_read_to_receipt_seconds", histogram, []string{"remote_cluster"}},
	{"meridian_bookie_read_only", gauge, nil},
	{"meridian_bookie_index_memory_bytes", gauge, []string{"part"}},
}

// checkGolden fails for every golden family families lacks, or serves
// with another type or other labels.
func checkGolden(t *testing.T, families map[string]*dto.MetricFamily, want []goldenSeries) {
	t.Helper()
	for _, g := range want {
		f := families[g.name]
		if f == nil {
			t.Errorf("%s: not served", g.name)
			continue
		}
		if f.GetType() != g.kind {
			t.Errorf("%s: type %v, want %v", g.name, f.GetType(), g.kind)
		}
		for _, m := range f.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			slices.Sort(names)
			if want := slices.Sorted(slices.Values(g.labels)); !slices.Equal(names, want) {
				t.Errorf("%s: labels %v, want %v", g.name, names, want)
				break
			}
		}
	}
}

// value is the value of the series of family name whose labels include
// match, and whether there is one.
func value(families map[string]*dto.MetricFamily, name string, match map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range match {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// adminStats reads a topic's stats from the admin API.
func adminStats(t *testing.T, webURL, topic string) map[string]any {
	t.Helper()
	var out map[string]any
	getJSON(t, webURL+"/admin/v2/persistent/"+strings.TrimPrefix(topic, "persistent://")+"/stats", &out)
	return out
}

// path reads a number at a path of nested JSON objects (0 when absent).
func path(v any, keys ...string) float64 {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	switch n := v.(type) {
	case float64:
		return n
	case bool:
		if n {
			return 1
		}
	case []any:
		return float64(len(n))
	}
	return 0
}

// devWithMetrics is a two-region dev node (east and west replicating
// public/default) whose regions report over a short stats period.
func devWithMetrics(t *testing.T, mc telemetry.MetricsConfig) *node.Node {
	cfg := node.Dev(t.TempDir(), []string{"east", "west"}, 0, 0)
	for i := range cfg.Regions {
		cfg.Regions[i].Metrics = mc
	}
	n, _ := startRecorded(t, cfg)
	return n
}

// TestPulsarMetrics scrapes a running region after traffic and
// replication: every series of the golden list is served with its type and
// labels; the values agree with the admin API's stats of the same topic;
// rates, latency buckets and replication show the traffic; and promlint
// passes on the meridian_* families. (promlint rejects Pulsar's own gauges
// named *_count, so those are checked against the golden list only.)
func TestPulsarMetrics(t *testing.T) {
	n := devWithMetrics(t, telemetry.MetricsConfig{StatsPeriod: 100 * time.Millisecond})
	east, west := region(t, n, "east"), region(t, n, "west")
	topic := "persistent://public/default/metrics"
	c := newClient(t, pulsar.ClientOptions{URL: east.Broker().ServiceURL()})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// Traffic runs until the rates have been seen; the consumer acks
	// every other message, so the subscription has a backlog and unacked
	// messages.
	ctx, stop := context.WithCancel(context.Background())
	var traffic sync.WaitGroup
	traffic.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil && ctx.Err() == nil {
				t.Errorf("send: %v", err)
				return
			}
		}
	})
	traffic.Go(func() {
		for i := 0; ; i++ {
			m, err := cons.Receive(ctx)
			if err != nil {
				return
			}
			if i%2 == 0 {
				cons.Ack(m)
			}
		}
	})
	eastURL, westURL := east.Broker().WebURL()+"/metrics", west.Broker().WebURL()+"/metrics"
	onTopic := map[string]string{"topic": topic}
	toWest := map[string]string{"topic": topic, "remote_cluster": "west"}
	fromEast := map[string]string{"topic": topic, "remote_cluster": "east"}
	testkit.WaitFor(t, "rates, write buckets and replication in both regions", func() bool {
		e, w := scrape(t, eastURL), scrape(t, westURL)
		for _, probe := range []struct {
			f     map[string]*dto.MetricFamily
			name  string
			match map[string]string
		}{
			{e, "pulsar_rate_in", onTopic}, {e, "pulsar_throughput_in", onTopic}, {e, "pulsar_rate_out", onTopic},
			{e, "pulsar_subscription_msg_rate_out", map[string]string{"subscription": "s"}},
			{e, "pulsar_storage_write_latency_count", onTopic}, {e, "pulsar_entry_size_le_128", onTopic},
			{e, "pulsar_replication_connected_count", toWest}, {e, "pulsar_replication_rate_out", toWest},
			{w, "pulsar_replication_rate_in", fromEast}, {w, "pulsar_replication_throughput_in", fromEast},
		} {
			if v, _ := value(probe.f, probe.name, probe.match); v <= 0 {
				return false
			}
		}
		return true
	})
	stop()
	traffic.Wait()

	families := scrape(t, eastURL)
	checkGolden(t, families, golden)
	if v, ok := value(families, "pulsar_replication_disconnected_count", toWest); !ok || v != 0 {
		t.Errorf("pulsar_replication_disconnected_count to west = %v (served %v), want 0", v, ok)
	}

	// The values agree with the admin API's once the traffic has stopped
	// and the last acks are in: both are read until they agree.
	webURL := east.Broker().WebURL()
	var mismatch string
	testkit.WaitFor(t, "the metrics to agree with the admin API's stats", func() bool {
		st := adminStats(t, webURL, topic)
		f := scrape(t, eastURL)
		s := map[string]string{"topic": topic, "subscription": "s"}
		for _, cmp := range []struct {
			name  string
			match map[string]string
			want  float64
		}{
			{"pulsar_in_messages_total", onTopic, path(st, "msgInCounter")},
			{"pulsar_in_bytes_total", onTopic, path(st, "bytesInCounter")},
			{"pulsar_out_messages_total", s, path(st, "subscriptions", "s", "msgOutCounter")},
			{"pulsar_out_bytes_total", s, path(st, "subscriptions", "s", "bytesOutCounter")},
			{"pulsar_storage_size", onTopic, path(st, "storageSize")},
			{"pulsar_producers_count", onTopic, path(st, "publishers")},
			{"pulsar_subscriptions_count", onTopic, float64(len(st["subscriptions"].(map[string]any)))},
			{"pulsar_msg_backlog", onTopic, path(st, "subscriptions", "s", "msgBacklog")},
			{"pulsar_subscription_back_log", s, path(st, "subscriptions", "s", "msgBacklog")},
			{"pulsar_subscription_unacked_messages", s, path(st, "subscriptions", "s", "unackedMessages")},
			{"pulsar_subscription_consumers_count", s, path(st, "subscriptions", "s", "consumers")},
			{"pulsar_replication_backlog", toWest, path(st, "replication", "west", "replicationBacklog")},
			{"pulsar_replication_connected_count", toWest, path(st, "replication", "west", "connected")},
		} {
			got, _ := value(f, cmp.name, cmp.match)
			if got != cmp.want {
				mismatch = fmt.Sprintf("%s = %v, admin API says %v", cmp.name, got, cmp.want)
				return false
			}
		}
		return path(st, "msgInCounter") > 0 && path(st, "subscriptions", "s", "msgBacklog") > 0
	})
	if mismatch != "" {
		t.Logf("last mismatch before agreement: %s", mismatch)
	}

	var names []string
	for _, g := range meridianGolden {
		names = append(names, g.name)
	}
	problems, err := testutil.GatherAndLint(east.Registry(), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestBrokerStatsEndpoints: /admin/v2/broker-stats/metrics and /topics
// answer as pulsaradmin's BrokerStats reads them: a metric set per
// namespace with the broker's dimensions, and the loaded topics' stats by
// namespace, bundle and domain.
func TestBrokerStatsEndpoints(t *testing.T) {
	n, _ := startRecorded(t, node.Standalone(t.TempDir()))
	b := n.Broker()
	c := newClient(t, pulsar.ClientOptions{URL: b.ServiceURL()})
	topic := "persistent://public/default/broker-stats"
	roundTrip(t, c, topic, 5)
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: b.WebURL()})
	if err != nil {
		t.Fatal(err)
	}

	sets, err := adm.BrokerStats().GetMetrics()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(sets, func(s utils.Metrics) bool { return s.Dimensions["namespace"] == "public/default" })
	if i < 0 {
		t.Fatalf("broker-stats/metrics has no set for public/default: %+v", sets)
	}
	got := sets[i]
	if got.Dimensions["cluster"] != "standalone" || got.Dimensions["broker"] != b.BrokerID() ||
		got.Metrics["brk_no_of_subscriptions"] != 1.0 || got.Metrics["brk_storage_size"].(float64) <= 0 {
		t.Errorf("public/default's set: %+v", got)
	}

	text, err := adm.BrokerStats().GetTopics()
	if err != nil {
		t.Fatal(err)
	}
	var topics map[string]map[string]map[string]map[string]struct {
		MsgInCounter int64 `json:"msgInCounter"`
	}
	if err := json.Unmarshal([]byte(text), &topics); err != nil {
		t.Fatalf("broker-stats/topics: %v\n%s", err, text)
	}
	found := false
	for _, domains := range topics["public/default"] {
		if st, ok := domains["persistent"][topic]; ok {
			found = true
			if st.MsgInCounter != 5 {
				t.Errorf("%s: msgInCounter %d, want 5", topic, st.MsgInCounter)
			}
		}
	}
	if !found {
		t.Errorf("broker-stats/topics lacks %s: %s", topic, text)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp := get(t, url)
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestMetricsDisabled: with recording off the broker serves none of
// Pulsar's series and none of the families this switch covers, and still
// serves traffic and the others.
func TestMetricsDisabled(t *testing.T) {
	cfg := node.Standalone(t.TempDir())
	cfg.Regions[0].Metrics.Disabled = true
	n, _ := startRecorded(t, cfg)
	b := n.Broker()
	c := newClient(t, pulsar.ClientOptions{URL: b.ServiceURL()})
	roundTrip(t, c, "persistent://public/default/off", 5)
	families := scrape(t, b.WebURL()+"/metrics")
	for name := range families {
		if strings.HasPrefix(name, "pulsar_") || strings.HasPrefix(name, "meridian_broker_") || strings.HasPrefix(name, "meridian_etcd_") {
			t.Errorf("%s served with metrics disabled", name)
		}
	}
	if families["meridian_bookie_adds_total"] == nil {
		t.Error("the bookie's own series went too")
	}
}

// TestMetricsPulsarConf: broker.conf's exposeTopicLevelMetricsInPrometheus
// and statsUpdateFrequencyInSecs set the region's metrics; Pulsar's
// default (topic level) is the zero value.
func TestMetricsPulsarConf(t *testing.T) {
	for _, tc := range []struct {
		text string
		want telemetry.MetricsConfig
	}{
		{"", telemetry.MetricsConfig{}},
		{"exposeTopicLevelMetricsInPrometheus=true\n", telemetry.MetricsConfig{}},
		{"exposeTopicLevelMetricsInPrometheus=false\nstatsUpdateFrequencyInSecs=15\n",
			telemetry.MetricsConfig{NamespaceLevel: true, StatsPeriod: 15 * time.Second}},
	} {
		b := node.DefaultBrokerConfig("localhost")
		cfg := node.Config{Regions: []node.RegionConfig{{Name: "r", Broker: &b}}}
		if _, err := node.ApplyPulsarConf(strings.NewReader(tc.text), "broker.conf", &cfg); err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if got := cfg.Regions[0].Metrics; got != tc.want {
			t.Errorf("%q: metrics %+v, want %+v", tc.text, got, tc.want)
		}
	}
	b := node.DefaultBrokerConfig("localhost")
	cfg := node.Config{Regions: []node.RegionConfig{{Name: "r", Broker: &b}}}
	if _, err := node.ApplyPulsarConf(strings.NewReader("statsUpdateFrequencyInSecs=0\n"), "broker.conf", &cfg); err == nil {
		t.Error("statsUpdateFrequencyInSecs=0 accepted")
	}
}

// TestPulsarMetricsNamespaceLevel: with exposeTopicLevelMetricsInPrometheus
// off, a running broker serves one series per namespace with labels
// cluster and namespace (pulsar_msg_backlog with remote_cluster="local"),
// pulsar_topics_count, and no subscription series, as Pulsar does.
func TestPulsarMetricsNamespaceLevel(t *testing.T) {
	cfg := node.Standalone(t.TempDir())
	cfg.Regions[0].Metrics.NamespaceLevel = true
	n, _ := startRecorded(t, cfg)
	b := n.Broker()
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: b.WebURL()})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().CreateNamespace("public/other"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, pulsar.ClientOptions{URL: b.ServiceURL()})
	for _, topic := range []string{"public/default/a", "public/default/b", "public/other/c"} {
		roundTrip(t, c, "persistent://"+topic, 3)
	}
	families := scrape(t, b.WebURL()+"/metrics")
	for name, f := range families {
		if strings.HasPrefix(name, "pulsar_subscription_") {
			t.Errorf("%s served at namespace level", name)
		}
		if !strings.HasPrefix(name, "pulsar_") || strings.HasPrefix(name, "pulsar_replication_") || strings.HasPrefix(name, "pulsar_lb_") {
			continue
		}
		want := []string{"cluster", "namespace"}
		if name == "pulsar_msg_backlog" {
			want = append(want, "remote_cluster")
		}
		checkGolden(t, families, []goldenSeries{{name, f.GetType(), want}})
		if len(f.GetMetric()) != 2 {
			t.Errorf("%s: %d series, want one per namespace (2)", name, len(f.GetMetric()))
		}
	}
	for ns, want := range map[string]float64{"public/default": 2, "public/other": 1} {
		if got, _ := value(families, "pulsar_topics_count", map[string]string{"namespace": ns}); got != want {
			t.Errorf("pulsar_topics_count{namespace=%q} = %v, want %v", ns, got, want)
		}
		if got, _ := value(families, "pulsar_in_messages_total", map[string]string{"namespace": ns}); got != 3*want {
			t.Errorf("pulsar_in_messages_total{namespace=%q} = %v, want %v", ns, got, 3*want)
		}
	}
	if _, ok := value(families, "pulsar_msg_backlog", map[string]string{"namespace": "public/default", "remote_cluster": "local"}); !ok {
		t.Error(`pulsar_msg_backlog has no remote_cluster="local" series`)
	}
}
