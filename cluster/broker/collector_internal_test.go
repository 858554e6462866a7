package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syntheticTopics are namespaces x perNS topics, each with a subscription
// and replication to remotes.
func syntheticTopics(namespaces, perNS int, remotes ...string) []TopicMetrics {
	var out []TopicMetrics
	for n := range namespaces {
		ns := fmt.Sprintf("tenant/ns-%d", n)
		for i := range perNS {
			tm := TopicMetrics{Topic: fmt.Sprintf("persistent://%s/t-%d", ns, i), Namespace: ns,
				Producers: 1, Subscriptions: 1, MsgInCounter: 10, StorageSize: 100, MsgBacklog: 3,
				Subs:        map[string]SubscriptionMetrics{"s": {Backlog: 3}},
				Replication: map[string]ReplicationMetrics{}}
			for _, r := range remotes {
				tm.Replication[r] = ReplicationMetrics{Connected: 1, Backlog: 2, DelaySeconds: int64(i)}
			}
			out = append(out, tm)
		}
	}
	return out
}

// seriesPerFamily collects c and counts the series of each family.
func seriesPerFamily(t *testing.T, c prometheus.Collector) map[string]int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range families {
		out[f.GetName()] = len(f.GetMetric())
	}
	return out
}

// TestNamespaceLevelCardinality: 50 namespaces of 200 topics, aggregated
// to namespace level (exposeTopicLevelMetricsInPrometheus=false), give at
// most 50 series per family, times the remote clusters for
// pulsar_replication_*; the aggregates add up (backlog), and the delay is
// the largest. Topic level gives one series per topic, as a contrast that
// shows the aggregation is what bounds it.
func TestNamespaceLevelCardinality(t *testing.T) {
	topics := syntheticTopics(50, 200, "west", "south")
	sample := func(context.Context) []TopicMetrics { return topics }
	ns := seriesPerFamily(t, newPulsarCollector("east", true, sample, time.Second))
	if len(ns) < len(topicFamilies)+len(replicationFamilies) {
		t.Fatalf("%d families at namespace level, want at least %d", len(ns), len(topicFamilies)+len(replicationFamilies))
	}
	for name, n := range ns {
		limit := 50
		if strings.HasPrefix(name, "pulsar_replication_") {
			limit = 50 * 2
		}
		if n > limit {
			t.Errorf("%s: %d series at namespace level, want at most %d", name, n, limit)
		}
		if strings.HasPrefix(name, "pulsar_subscription_") {
			t.Errorf("%s served at namespace level; Pulsar serves no subscription series there", name)
		}
	}
	if ns["pulsar_topics_count"] != 50 {
		t.Errorf("pulsar_topics_count: %d series, want 50", ns["pulsar_topics_count"])
	}

	c := newPulsarCollector("east", true, sample, time.Second)
	want := `
# HELP pulsar_replication_backlog Messages not yet replicated to the remote cluster.
# TYPE pulsar_replication_backlog gauge
pulsar_replication_backlog{cluster="east",namespace="tenant/ns-0",remote_cluster="south"} 400
pulsar_replication_backlog{cluster="east",namespace="tenant/ns-0",remote_cluster="west"} 400
# HELP pulsar_replication_delay_in_seconds Age of the oldest message not yet replicated to the remote cluster.
# TYPE pulsar_replication_delay_in_seconds gauge
pulsar_replication_delay_in_seconds{cluster="east",namespace="tenant/ns-0",remote_cluster="south"} 199
pulsar_replication_delay_in_seconds{cluster="east",namespace="tenant/ns-0",remote_cluster="west"} 199
`
	topics = syntheticTopics(1, 200, "west", "south")
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "pulsar_replication_backlog", "pulsar_replication_delay_in_seconds"); err != nil {
		t.Error(err)
	}
	topics = nil
	if got := seriesPerFamily(t, newPulsarCollector("east", true, sample, time.Second)); len(got) != 0 {
		t.Errorf("a broker without topics serves %v, want nothing", got)
	}

	topics = syntheticTopics(5, 20, "west")
	perTopic := seriesPerFamily(t, newPulsarCollector("east", false, sample, time.Second))
	if perTopic["pulsar_rate_in"] != 100 || perTopic["pulsar_subscription_back_log"] != 100 || perTopic["pulsar_replication_backlog"] != 100 {
		t.Errorf("topic level: %d rate_in, %d subscription backlog, %d replication backlog series; want 100 each",
			perTopic["pulsar_rate_in"], perTopic["pulsar_subscription_back_log"], perTopic["pulsar_replication_backlog"])
	}
	// As Pulsar does, topic level serves the namespaces' topic counts too.
	if perTopic["pulsar_topics_count"] != 5 {
		t.Errorf("topic level: %d pulsar_topics_count series, want one per namespace (5)", perTopic["pulsar_topics_count"])
	}
}

// TestSubscriptionBacklogNoDelayed: a subscription's backlog without its
// delayed messages is served as Pulsar's back_log_no_delayed.
func TestSubscriptionBacklogNoDelayed(t *testing.T) {
	topics := []TopicMetrics{{Topic: "persistent://tenant/ns/t", Namespace: "tenant/ns",
		Subs: map[string]SubscriptionMetrics{"s": {Backlog: 10, Delayed: 4}}}}
	c := newPulsarCollector("east", false, func(context.Context) []TopicMetrics { return topics }, time.Second)
	want := `
# HELP pulsar_subscription_back_log_no_delayed Messages of the topic the subscription has not acknowledged, less those whose delivery is delayed.
# TYPE pulsar_subscription_back_log_no_delayed gauge
pulsar_subscription_back_log_no_delayed{cluster="east",namespace="tenant/ns",subscription="s",topic="persistent://tenant/ns/t"} 6
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "pulsar_subscription_back_log_no_delayed"); err != nil {
		t.Error(err)
	}
}

// BenchmarkCollect10kTopics is the cost of serving 10,000 topics' series
// once sampled, at topic and at namespace level (the sampling itself is
// measured, with real topics, by cluster/node's BenchmarkScrape10kTopics).
func BenchmarkCollect10kTopics(b *testing.B) {
	topics := syntheticTopics(50, 200, "west")
	for _, nsLevel := range []bool{false, true} {
		b.Run(fmt.Sprintf("namespaceLevel=%v", nsLevel), func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(newPulsarCollector("east", nsLevel, func(context.Context) []TopicMetrics { return topics }, time.Second))
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
