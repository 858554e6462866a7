package broker

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/telemetry"
)

// pulsarFamily is one of Pulsar's topic metrics: its name and how to read
// it from a TopicMetrics. Every family is a gauge but those whose name ends
// in _total, which are counters, as in Pulsar's exposition.
type pulsarFamily struct {
	name  string
	help  string
	value func(*TopicMetrics) float64
}

// The topic (or, aggregated, namespace) families, in Pulsar's order.
var topicFamilies = func() []pulsarFamily {
	f := []pulsarFamily{
		{"pulsar_subscriptions_count", "Subscriptions of the topic.", func(t *TopicMetrics) float64 { return float64(t.Subscriptions) }},
		{"pulsar_producers_count", "Producers connected to the topic (replication producers included).", func(t *TopicMetrics) float64 { return float64(t.Producers) }},
		{"pulsar_consumers_count", "Consumers connected to the topic.", func(t *TopicMetrics) float64 { return float64(t.Consumers) }},
		{"pulsar_rate_in", "Messages per second published, over the last stats period.", func(t *TopicMetrics) float64 { return t.RateIn }},
		{"pulsar_rate_out", "Messages per second dispatched, over the last stats period.", func(t *TopicMetrics) float64 { return t.RateOut }},
		{"pulsar_throughput_in", "Bytes per second published, over the last stats period.", func(t *TopicMetrics) float64 { return t.ThroughputIn }},
		{"pulsar_throughput_out", "Bytes per second dispatched, over the last stats period.", func(t *TopicMetrics) float64 { return t.ThroughputOut }},
		{"pulsar_in_messages_total", "Messages published since the topic was loaded.", func(t *TopicMetrics) float64 { return float64(t.MsgInCounter) }},
		{"pulsar_in_bytes_total", "Bytes published since the topic was loaded.", func(t *TopicMetrics) float64 { return float64(t.BytesInCounter) }},
		{"pulsar_out_messages_total", "Messages dispatched since the topics were loaded.", func(t *TopicMetrics) float64 { return float64(t.MsgOutCounter) }},
		{"pulsar_out_bytes_total", "Bytes dispatched since the topics were loaded.", func(t *TopicMetrics) float64 { return float64(t.BytesOutCounter) }},
		{"pulsar_storage_size", "Bytes the topic stores in its ledgers.", func(t *TopicMetrics) float64 { return float64(t.StorageSize) }},
		{"pulsar_msg_backlog", "Messages not yet acknowledged, summed over the subscriptions.", func(t *TopicMetrics) float64 { return float64(t.MsgBacklog) }},
	}
	// buckets adds the families of one set of buckets of ops (appends or
	// storage reads), by what they measure.
	buckets := func(names []string, ops, what, sumUnit string, counts func(*TopicMetrics) telemetry.BucketCounts) {
		for i, name := range names {
			f = append(f, pulsarFamily{name, ops + " of the last stats period whose " + what + " falls in this bucket (bounds as named; not cumulative).",
				func(t *TopicMetrics) float64 { return float64(counts(t).Counts[i]) }})
		}
		base := strings.TrimSuffix(strings.TrimSuffix(names[len(names)-1], "_le_overflow"), "_overflow")
		f = append(f,
			pulsarFamily{base + "_count", ops + " of the last stats period.", func(t *TopicMetrics) float64 { return float64(counts(t).Count) }},
			pulsarFamily{base + "_sum", "Sum of the " + what + "s of the last stats period's " + strings.ToLower(ops) + ", in " + sumUnit + ".",
				func(t *TopicMetrics) float64 { return float64(counts(t).Sum) }})
	}
	buckets(telemetry.WriteLatencyBucketNames, "Appends", "storage write latency", "microseconds", func(t *TopicMetrics) telemetry.BucketCounts { return t.WriteLatency })
	buckets(telemetry.EntrySizeBucketNames, "Appends", "entry size", "bytes", func(t *TopicMetrics) telemetry.BucketCounts { return t.EntrySize })
	// Pulsar serves the entry size's last bucket as
	// pulsar_entry_size_le_overflow; its stock dashboards query
	// pulsar_entry_size_overflow, which Pulsar never served. Both names
	// are served, with the same value.
	overflow := len(telemetry.EntrySizeBucketNames) - 1
	f = append(f, pulsarFamily{"pulsar_entry_size_overflow", "The same count as pulsar_entry_size_le_overflow, under the name Pulsar's stock dashboards query.",
		func(t *TopicMetrics) float64 { return float64(t.EntrySize.Counts[overflow]) }})
	buckets(readLatencyBucketNames, "Storage reads", "storage read latency", "microseconds", func(t *TopicMetrics) telemetry.BucketCounts { return t.ReadLatency })
	return f
}()

// readLatencyBucketNames are pulsar_storage_read_latency_le_0_5 …
// _overflow: the write latency's buckets (telemetry.WriteLatencyBoundsMicros),
// named for the managed ledger's storage reads. Pulsar's stock messaging
// dashboard charts their _count as the storage read rate.
var readLatencyBucketNames = func() []string {
	names := make([]string, len(telemetry.WriteLatencyBucketNames))
	for i, n := range telemetry.WriteLatencyBucketNames {
		names[i] = strings.Replace(n, "_write_", "_read_", 1)
	}
	return names
}()

// namespaceOnly are the topic families Pulsar serves at namespace level
// only: at topic level the same names are per subscription
// (subscriptionFamilies), and one family has one set of labels.
var namespaceOnly = map[string]bool{"pulsar_out_messages_total": true, "pulsar_out_bytes_total": true}

// kindOf is a family's type by Pulsar's rule: counters end in _total,
// every other family is a gauge.
func kindOf(name string) prometheus.ValueType {
	if strings.HasSuffix(name, "_total") {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// subscriptionFamily is one of Pulsar's subscription metrics.
type subscriptionFamily struct {
	name, help string
	value      func(*SubscriptionMetrics) float64
}

var subscriptionFamilies = []subscriptionFamily{
	{"pulsar_subscription_back_log", "Messages of the topic the subscription has not acknowledged.", func(s *SubscriptionMetrics) float64 { return float64(s.Backlog) }},
	{"pulsar_subscription_delayed", "Messages whose delivery is delayed.", func(s *SubscriptionMetrics) float64 { return float64(s.Delayed) }},
	{"pulsar_subscription_back_log_no_delayed", "Messages of the topic the subscription has not acknowledged, less those whose delivery is delayed.",
		func(s *SubscriptionMetrics) float64 { return float64(s.Backlog - s.Delayed) }},
	{"pulsar_subscription_unacked_messages", "Messages delivered and not yet acknowledged.", func(s *SubscriptionMetrics) float64 { return float64(s.Unacked) }},
	{"pulsar_subscription_msg_rate_out", "Messages per second dispatched, over the last stats period.", func(s *SubscriptionMetrics) float64 { return s.RateOut }},
	{"pulsar_subscription_msg_throughput_out", "Bytes per second dispatched, over the last stats period.", func(s *SubscriptionMetrics) float64 { return s.ThroughputOut }},
	{"pulsar_subscription_consumers_count", "Consumers connected to the subscription.", func(s *SubscriptionMetrics) float64 { return float64(s.Consumers) }},
	{"pulsar_out_messages_total", "Messages dispatched to the subscription since the topic was loaded.", func(s *SubscriptionMetrics) float64 { return float64(s.MsgOutCounter) }},
	{"pulsar_out_bytes_total", "Bytes dispatched to the subscription since the topic was loaded.", func(s *SubscriptionMetrics) float64 { return float64(s.BytesOutCounter) }},
	{"pulsar_subscription_msg_rate_redeliver", "Messages per second delivered again (after a negative ack, an ack timeout or a consumer's leaving), over the last stats period.",
		func(s *SubscriptionMetrics) float64 { return s.RateRedeliver }},
	{"pulsar_subscription_msg_ack_rate", "Acknowledgements per second (one per message id acked: an entry, or one message of a batch), over the last stats period.",
		func(s *SubscriptionMetrics) float64 { return s.AckRate }},
	{"pulsar_subscription_msg_rate_expired", "Messages (entries) per second consumed by message expiry, over the last stats period.",
		func(s *SubscriptionMetrics) float64 { return s.RateExpired }},
	{"pulsar_subscription_blocked_on_unacked_messages", "1 while the subscription's dispatch waits for acks under its unacked-message limit, else 0.",
		func(s *SubscriptionMetrics) float64 { return gaugeOf(s.BlockedOnUnacked) }},
	{"pulsar_subscription_total_msg_expired", "Messages (entries) consumed by message expiry since the topic was loaded.", func(s *SubscriptionMetrics) float64 { return float64(s.Expired) }},
	{"pulsar_subscription_ignored_acks_total", "Acked message ids the broker ignored since the topic was loaded: positions never delivered to the consumer that acked them (after a failover, ids of another region).", func(s *SubscriptionMetrics) float64 { return float64(s.IgnoredAcks) }},
}

// replicationFamily is one of Pulsar's replication metrics.
type replicationFamily struct {
	name, help string
	value      func(*ReplicationMetrics) float64
}

var replicationFamilies = []replicationFamily{
	{"pulsar_replication_rate_in", "Messages per second received from the remote cluster, over the last stats period.", func(r *ReplicationMetrics) float64 { return r.RateIn }},
	{"pulsar_replication_rate_out", "Messages per second replicated to the remote cluster (the worker's last publish interval).", func(r *ReplicationMetrics) float64 { return r.RateOut }},
	{"pulsar_replication_throughput_in", "Bytes per second received from the remote cluster, over the last stats period.", func(r *ReplicationMetrics) float64 { return r.ThroughputIn }},
	{"pulsar_replication_throughput_out", "Bytes per second replicated to the remote cluster (the worker's last publish interval).", func(r *ReplicationMetrics) float64 { return r.ThroughputOut }},
	{"pulsar_replication_backlog", "Messages not yet replicated to the remote cluster.", func(r *ReplicationMetrics) float64 { return float64(r.Backlog) }},
	{"pulsar_replication_connected_count", "Replication links to the remote cluster whose producer is connected.", func(r *ReplicationMetrics) float64 { return float64(r.Connected) }},
	{"pulsar_replication_disconnected_count", "Replication links to the remote cluster whose producer is not connected.", func(r *ReplicationMetrics) float64 { return float64(r.Disconnected) }},
	{"pulsar_replication_rate_expired", "Messages per second skipped because their TTL had passed.", func(r *ReplicationMetrics) float64 { return r.RateExpired }},
	{"pulsar_replication_delay_in_seconds", "Age of the oldest message not yet replicated to the remote cluster.", func(r *ReplicationMetrics) float64 { return float64(r.DelaySeconds) }},
}

// PulsarCollector serves the broker's topics as Pulsar's Prometheus series
// (the families and labels of Pulsar's TopicStats and
// NamespaceStatsAggregator), sampled at scrape time (Service.TopicMetrics):
// with labels cluster, namespace and topic, plus subscription or
// remote_cluster where Pulsar has them; or, with
// MetricsConfig.NamespaceLevel, one series per namespace, as Pulsar's
// exposeTopicLevelMetricsInPrometheus=false (with pulsar_msg_backlog
// labelled remote_cluster="local", as Pulsar does there). At both levels
// pulsar_topics_count counts each namespace's topics, as in Pulsar.
type PulsarCollector struct {
	region         string
	namespaceLevel bool
	sample         func(context.Context) []TopicMetrics
	timeout        time.Duration

	// topic holds one Desc per topicFamilies entry; nil for a family not
	// served at this level (namespaceOnly).
	topic, sub, repl []*prometheus.Desc
	// subStateAge is pulsar_subscription_replicated_state_age_seconds, per
	// subscription and remote region (replsubs.go).
	subStateAge *prometheus.Desc
	topicsCount *prometheus.Desc
	// nsBacklogIndex is pulsar_msg_backlog's index in topicFamilies at
	// namespace level, where it carries remote_cluster="local"; else -1.
	nsBacklogIndex int
}

// NewPulsarCollector returns the collector of s's topics; each scrape's
// replication backlog reads are bounded by timeout.
func NewPulsarCollector(s *Service, timeout time.Duration) *PulsarCollector {
	return newPulsarCollector(s.cfg.Region, s.cfg.Metrics.NamespaceLevel, s.TopicMetrics, timeout)
}

// newPulsarCollector returns the collector of the topics sample returns,
// in region.
func newPulsarCollector(region string, namespaceLevel bool, sample func(context.Context) []TopicMetrics, timeout time.Duration) *PulsarCollector {
	c := &PulsarCollector{region: region, namespaceLevel: namespaceLevel, sample: sample, timeout: timeout, nsBacklogIndex: -1}
	base := []string{telemetry.LabelCluster, telemetry.LabelNamespace}
	if !namespaceLevel {
		base = append(base, telemetry.LabelTopic)
	}
	for i, f := range topicFamilies {
		if !namespaceLevel && namespaceOnly[f.name] {
			c.topic = append(c.topic, nil)
			continue
		}
		labels := base
		if namespaceLevel && f.name == "pulsar_msg_backlog" {
			labels = append(labels[:len(labels):len(labels)], telemetry.LabelRemoteCluster)
			c.nsBacklogIndex = i
		}
		c.topic = append(c.topic, prometheus.NewDesc(f.name, f.help, labels, nil))
	}
	for _, f := range subscriptionFamilies {
		c.sub = append(c.sub, prometheus.NewDesc(f.name, f.help, append(base[:len(base):len(base)], telemetry.LabelSubscription), nil))
	}
	c.subStateAge = prometheus.NewDesc("pulsar_subscription_replicated_state_age_seconds",
		"Age of the state of a replicated subscription last applied here from the remote cluster: acks made there since may be redelivered here after a failover.",
		append(base[:len(base):len(base)], telemetry.LabelSubscription, telemetry.LabelRemoteCluster), nil)
	for _, f := range replicationFamilies {
		c.repl = append(c.repl, prometheus.NewDesc(f.name, f.help, append(base[:len(base):len(base)], telemetry.LabelRemoteCluster), nil))
	}
	c.topicsCount = prometheus.NewDesc("pulsar_topics_count", "Topics of the namespace loaded on this broker.", base[:2], nil)
	return c
}

// Describe sends every family's description.
func (c *PulsarCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.topic {
		if d != nil {
			ch <- d
		}
	}
	if !c.namespaceLevel {
		for _, d := range c.sub {
			ch <- d
		}
		ch <- c.subStateAge
	}
	ch <- c.topicsCount
	for _, d := range c.repl {
		ch <- d
	}
}

// Collect samples the topics and sends their series.
func (c *PulsarCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.collect(ch, c.sample(ctx))
}

// collect sends the series of topics.
func (c *PulsarCollector) collect(ch chan<- prometheus.Metric, topics []TopicMetrics) {
	cluster := c.region
	if c.namespaceLevel {
		namespaces, counts := NamespaceMetrics(topics)
		for i := range namespaces {
			ns := &namespaces[i]
			ch <- prometheus.MustNewConstMetric(c.topicsCount, prometheus.GaugeValue, float64(counts[ns.Namespace]), cluster, ns.Namespace)
			c.collectTopic(ch, ns, cluster, ns.Namespace)
		}
		return
	}
	// Pulsar serves the namespaces' topic counts at topic level too.
	counts := map[string]int{}
	for i := range topics {
		counts[topics[i].Namespace]++
	}
	for ns, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.topicsCount, prometheus.GaugeValue, float64(n), cluster, ns)
	}
	for i := range topics {
		t := &topics[i]
		c.collectTopic(ch, t, cluster, t.Namespace, t.Topic)
		for name, s := range t.Subs {
			for j, f := range subscriptionFamilies {
				ch <- prometheus.MustNewConstMetric(c.sub[j], kindOf(f.name), f.value(&s), cluster, t.Namespace, t.Topic, name)
			}
			for remote, age := range s.ReplicatedStateAge {
				ch <- prometheus.MustNewConstMetric(c.subStateAge, prometheus.GaugeValue, age.Seconds(), cluster, t.Namespace, t.Topic, name, remote)
			}
		}
	}
}

// collectTopic sends one topic's (or namespace's) series and its
// replication series, under labels.
func (c *PulsarCollector) collectTopic(ch chan<- prometheus.Metric, t *TopicMetrics, labels ...string) {
	for i, f := range topicFamilies {
		if c.topic[i] == nil {
			continue
		}
		values := labels
		if i == c.nsBacklogIndex {
			values = append(labels[:len(labels):len(labels)], "local")
		}
		ch <- prometheus.MustNewConstMetric(c.topic[i], kindOf(f.name), f.value(t), values...)
	}
	for remote, r := range t.Replication {
		for i, f := range replicationFamilies {
			ch <- prometheus.MustNewConstMetric(c.repl[i], prometheus.GaugeValue, f.value(&r), append(labels[:len(labels):len(labels)], remote)...)
		}
	}
}
