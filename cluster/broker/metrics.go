package broker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/topology"
)

// This file is the broker's metrics: the meridian_* families it records as
// it works (lookup latency, dispatch read sizes; the load manager records
// ownership changes, region leadership, sheds and splits), and the
// Pulsar-named view of its topics (TopicMetrics), which the Prometheus
// collector (PulsarCollector) and the admin API's broker-stats read at
// scrape time from the counters the topics keep anyway for their stats.
// Reading at scrape time keeps the publish path free of metric updates
// but for the managed ledger's write buckets (mledger.WriteStats).

// brokerMetrics are the meridian_* families of one broker's topic service
// (the load manager declares its own: loadmgr/metrics.go). A nil
// *brokerMetrics (metrics disabled) records nothing.
type brokerMetrics struct {
	lookup     prometheus.Histogram
	dispatched prometheus.Histogram
	// clientsMigrated counts the producers and consumers sent to the
	// namespace's active region in another region (migrate.go).
	clientsMigrated *prometheus.CounterVec
	// replicatedStateWrites and replicatedStateFallbacks count the
	// replicated subscriptions' states written to the global store, and the
	// origins a state cut back to their consumed prefix (replsubs.go).
	replicatedStateWrites, replicatedStateFallbacks prometheus.Counter
	// failoverSessionHeld and failovers are automatic region failover's
	// (failover.go).
	failoverSessionHeld prometheus.Gauge
	failovers           *prometheus.CounterVec
}

func newBrokerMetrics(cfg ServiceConfig, policies *global.Cache) (*brokerMetrics, error) {
	if cfg.Metrics.Disabled {
		return nil, nil
	}
	m := &brokerMetrics{
		lookup: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_broker_lookup_seconds",
			Help:    "Time to answer a topic lookup (policy resolution and the bundle's ownership, claimed when free).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		dispatched: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_broker_dispatch_read_entries",
			Help:    "Entries read by one dispatch round of a subscription (new and replayed; at most Dispatch.MaxReadEntries of new ones).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		clientsMigrated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_broker_clients_migrated_total",
			Help: "Producers and consumers (kind) told to go to their namespace's active region in another region (TOPIC_MIGRATED, then closed).",
		}, []string{"kind"}),
		replicatedStateWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_replicated_subscription_writes_total",
			Help: "Replicated subscription states written to the global store (at most one per subscription per replicatedSubscriptionsSnapshotFrequencyMillis, and only when its consumed set changed).",
		}),
		replicatedStateFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_replicated_subscription_fallbacks_total",
			Help: "Origins whose acked ranges in a replicated subscription state passed the bound (ReplicatedSubscriptions.MaxRanges) and fell back to the mark-delete: a failover redelivers their individually acked messages.",
		}),
		failoverSessionHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_failover_session_valid",
			Help: "1 while this broker holds a valid failover session (automatic region failover: without one it dispatches no replicated subscription of an opted-in namespace), else 0.",
		}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_failover_switches_total",
			Help: "Automatic switches of a namespace's active region written by this broker, by namespace, from and to.",
		}, []string{"namespace", "from", "to"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.lookup, m.dispatched, m.clientsMigrated, m.replicatedStateWrites,
			m.replicatedStateFallbacks, m.failoverSessionHeld, m.failovers, newActiveRegionCollector(cfg.Region, policies)} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// lookedUp records a lookup that started at start (deferred at its start).
func (m *brokerMetrics) lookedUp(start time.Time) {
	if m != nil {
		m.lookup.Observe(time.Since(start).Seconds())
	}
}

// migrated counts one producer or consumer sent to another region.
func (m *brokerMetrics) migrated(kind pb.CommandTopicMigrated_ResourceType) {
	if m != nil {
		m.clientsMigrated.WithLabelValues(strings.ToLower(kind.String())).Inc()
	}
}

// replicatedStateWritten counts a replicated subscription's state written,
// in which cut origins fell back to their consumed prefix.
func (m *brokerMetrics) replicatedStateWritten(cut int) {
	if m != nil {
		m.replicatedStateWrites.Inc()
		m.replicatedStateFallbacks.Add(float64(cut))
	}
}

// gaugeOf is a flag as a gauge's value: 1 when set, else 0.
func gaugeOf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// failoverSession records whether the failover session is valid.
func (m *brokerMetrics) failoverSession(valid bool) {
	if m != nil {
		m.failoverSessionHeld.Set(gaugeOf(valid))
	}
}

// failedOver counts one automatic switch of ns from one region to another.
func (m *brokerMetrics) failedOver(ns, from, to string) {
	if m != nil {
		m.failovers.WithLabelValues(ns, from, to).Inc()
	}
}

func (m *brokerMetrics) dispatchRead(entries int) {
	if m != nil && entries > 0 {
		m.dispatched.Observe(float64(entries))
	}
}

// activeRegionCollector serves meridian_namespace_active_region: one
// series per namespace with an active region, labelled with it, read from
// the watched global cache at scrape time (so it shows what this broker's
// lookups follow, also while the global store is unreachable).
type activeRegionCollector struct {
	region   string
	policies *global.Cache
	desc     *prometheus.Desc
}

func newActiveRegionCollector(region string, policies *global.Cache) *activeRegionCollector {
	return &activeRegionCollector{region: region, policies: policies, desc: prometheus.NewDesc(
		"meridian_namespace_active_region",
		"1 for each namespace with an active region (the region that answers its lookups), labelled with it; a namespace without one has no series.",
		[]string{telemetry.LabelCluster, telemetry.LabelNamespace, "active_region"}, nil)}
}

func (c *activeRegionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *activeRegionCollector) Collect(ch chan<- prometheus.Metric) {
	if c.policies == nil {
		return
	}
	for _, tenant := range c.policies.Tenants() {
		for _, ns := range c.policies.Namespaces(tenant) {
			if p, ok := c.policies.Namespace(tenant, ns); ok && p.ActiveRegion != "" {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, c.region, tenant+"/"+ns, p.ActiveRegion)
			}
		}
	}
}

// TopicMetrics is one loaded topic as Pulsar's metrics show it. Counters
// and gauges are as of the sample; rates and the write buckets cover the
// last completed stats period (telemetry.MetricsConfig.StatsPeriod), zero
// until the topic has been loaded for one.
type TopicMetrics struct {
	Topic, Namespace, Bundle string

	Producers, Consumers, Subscriptions int

	RateIn, ThroughputIn, RateOut, ThroughputOut float64
	MsgInCounter, BytesInCounter                 int64
	MsgOutCounter, BytesOutCounter               int64

	StorageSize int64
	// MsgBacklog is the sum of the subscriptions' backlogs, as Pulsar's
	// topic msgBacklog.
	MsgBacklog int64
	// WriteLatency (microseconds) and EntrySize count the appends of the
	// last period, ReadLatency (microseconds) its storage reads (runs of
	// entries read from the bookies, not from the entry cache).
	WriteLatency, EntrySize, ReadLatency telemetry.BucketCounts

	Subs        map[string]SubscriptionMetrics
	Replication map[string]ReplicationMetrics
}

// SubscriptionMetrics is one subscription of a TopicMetrics.
type SubscriptionMetrics struct {
	Backlog, Unacked, Delayed      int64
	Consumers                      int
	RateOut, ThroughputOut         float64
	MsgOutCounter, BytesOutCounter int64
	IgnoredAcks, Expired           int64
	// RateRedeliver, AckRate and RateExpired are the messages redelivered,
	// the message ids acked and the entries expired per second, over the
	// last stats period.
	RateRedeliver, AckRate, RateExpired float64
	// BlockedOnUnacked says dispatch waits on the subscription's
	// unacked-message limit.
	BlockedOnUnacked bool
	// ReplicatedStateAge is, per remote region, the age of its state of
	// this replicated subscription last applied here.
	ReplicatedStateAge map[string]time.Duration
}

// ReplicationMetrics is a topic's replication with one remote region:
// outbound (this region's task to it) and inbound (its replication
// producer here).
type ReplicationMetrics struct {
	// Connected and Disconnected count the outbound links (this region's
	// tasks to the remote) whose producer there is open, and those whose
	// is not: 1 and 0, or 0 and 1, for one topic; both 0 for a topic that
	// only receives from the remote.
	Connected, Disconnected                      int
	RateIn, ThroughputIn, RateOut, ThroughputOut float64
	RateExpired                                  float64
	Backlog                                      int64
	// DelaySeconds is the age of the oldest entry not yet replicated.
	DelaySeconds int64
}

// topicWindow is what one topic's rates and bucket counts are computed
// from: the counters at the start of the current period and the values of
// the last completed one.
type topicWindow struct {
	at        time.Time
	base      map[string][2]int64 // msgs and bytes by counter key
	baseWrite mledger.WriteStats
	baseRead  telemetry.BucketCounts
	rates     map[string][2]float64
	lastWrite mledger.WriteStats
	lastRead  telemetry.BucketCounts
}

// The keys of a topic's windowed counters.
const (
	windowIn         = "in"
	windowOut        = "out"
	windowSubPrefix  = "s\x00"
	windowReplPrefix = "r\x00"
	// A subscription's acks, redeliveries and expiries, in messages (the
	// pair's bytes are 0).
	windowAckPrefix       = "sa\x00"
	windowRedeliverPrefix = "sr\x00"
	windowExpiredPrefix   = "se\x00"
)

// advance closes the current period at now once it is at least period
// long: rates, lastWrite and lastRead become that period's, and a new one
// starts from cur. The first call only starts a period.
func (w *topicWindow) advance(now time.Time, period time.Duration, cur map[string][2]int64, write mledger.WriteStats, read telemetry.BucketCounts) {
	if w.at.IsZero() {
		w.at, w.base, w.baseWrite, w.baseRead = now, cur, write, read
		return
	}
	dt := now.Sub(w.at)
	if dt < period {
		return
	}
	w.rates = make(map[string][2]float64, len(cur))
	for k, c := range cur {
		b, ok := w.base[k]
		if !ok || c[0] < b[0] || c[1] < b[1] {
			continue // new, or reloaded: no rate yet
		}
		w.rates[k] = [2]float64{float64(c[0]-b[0]) / dt.Seconds(), float64(c[1]-b[1]) / dt.Seconds()}
	}
	w.lastWrite = mledger.WriteStats{Latency: write.Latency.Sub(w.baseWrite.Latency), EntrySize: write.EntrySize.Sub(w.baseWrite.EntrySize)}
	w.lastRead = read.Sub(w.baseRead)
	w.at, w.base, w.baseWrite, w.baseRead = now, cur, write, read
}

// topicMetricsState keeps the windows of the loaded topics. Its map holds
// only topics seen by the last sample, so it is bounded by what is loaded.
type topicMetricsState struct {
	mu      sync.Mutex
	windows map[string]*topicWindow
}

// TopicMetrics samples every topic loaded on this broker, sorted by
// name. Replication backlogs are measured with reads bounded by ctx (a
// failed one leaves that backlog at zero, and is logged).
func (s *Service) TopicMetrics(ctx context.Context) []TopicMetrics {
	topics := s.LoadedTopics()
	var tasks map[string]map[string]mledger.ReplicationTaskState
	var tasksErr error
	if len(topics) > 0 {
		tasks, tasksErr = mledger.AllReplicationTasks(ctx, s.store, s.cfg.Region)
	}
	now := time.Now()
	out := make([]TopicMetrics, 0, len(topics))
	counters := make([]map[string][2]int64, 0, len(topics))
	writes := make([]mledger.WriteStats, 0, len(topics))
	reads := make([]telemetry.BucketCounts, 0, len(topics))
	for _, t := range topics {
		tm, cur := t.metrics(ctx, tasks[t.Name()], tasksErr, now)
		out = append(out, tm)
		counters = append(counters, cur)
		writes = append(writes, t.ml.WriteStats())
		reads = append(reads, t.ml.ReadLatency())
	}
	period := s.cfg.Metrics.Period()
	st := &s.metricsState
	st.mu.Lock()
	defer st.mu.Unlock()
	seen := make(map[string]*topicWindow, len(out))
	for i := range out {
		tm := &out[i]
		w := st.windows[tm.Topic]
		if w == nil {
			w = &topicWindow{}
		}
		seen[tm.Topic] = w
		w.advance(now, period, counters[i], writes[i], reads[i])
		rate := func(k string) (float64, float64) { r := w.rates[k]; return r[0], r[1] }
		tm.RateIn, tm.ThroughputIn = rate(windowIn)
		tm.RateOut, tm.ThroughputOut = rate(windowOut)
		tm.WriteLatency, tm.EntrySize, tm.ReadLatency = w.lastWrite.Latency, w.lastWrite.EntrySize, w.lastRead
		for name, sm := range tm.Subs {
			sm.RateOut, sm.ThroughputOut = rate(windowSubPrefix + name)
			sm.AckRate, _ = rate(windowAckPrefix + name)
			sm.RateRedeliver, _ = rate(windowRedeliverPrefix + name)
			sm.RateExpired, _ = rate(windowExpiredPrefix + name)
			tm.Subs[name] = sm
		}
		for remote, rm := range tm.Replication {
			rm.RateIn, rm.ThroughputIn = rate(windowReplPrefix + remote)
			tm.Replication[remote] = rm
		}
	}
	st.windows = seen
	return out
}

// metrics samples the topic: its TopicMetrics without the windowed values,
// and the counters they are computed from.
func (t *Topic) metrics(ctx context.Context, tasks map[string]mledger.ReplicationTaskState, tasksErr error, now time.Time) (TopicMetrics, map[string][2]int64) {
	st := t.Stats()
	tm := TopicMetrics{
		Topic: t.Name(), Namespace: t.name.NamespaceName(),
		Producers: len(st.Publishers), Subscriptions: len(st.Subscriptions),
		MsgInCounter: st.MsgInCounter, BytesInCounter: st.BytesInCounter,
		MsgOutCounter: st.MsgOutCounter, BytesOutCounter: st.BytesOutCounter,
		StorageSize: st.StorageSize,
		Subs:        make(map[string]SubscriptionMetrics, len(st.Subscriptions)),
		Replication: map[string]ReplicationMetrics{},
	}
	if b, err := t.svc.Bundle(t.name); err == nil {
		tm.Bundle = b.String()
	}
	cur := map[string][2]int64{
		windowIn:  {st.MsgInCounter, st.BytesInCounter},
		windowOut: {st.MsgOutCounter, st.BytesOutCounter},
	}
	for name, ss := range st.Subscriptions {
		tm.Consumers += len(ss.Consumers)
		tm.MsgBacklog += ss.MsgBacklog
		tm.Subs[name] = SubscriptionMetrics{Backlog: ss.MsgBacklog, Unacked: ss.UnackedMessages, Delayed: ss.DelayedMessages,
			Consumers: len(ss.Consumers), MsgOutCounter: ss.MsgOutCounter, BytesOutCounter: ss.BytesOutCounter,
			IgnoredAcks: ss.IgnoredAcks, Expired: ss.Expired, BlockedOnUnacked: ss.BlockedOnUnacked,
			ReplicatedStateAge: ss.ReplicatedStateAges(now)}
		cur[windowSubPrefix+name] = [2]int64{ss.MsgOutCounter, ss.BytesOutCounter}
		cur[windowAckPrefix+name] = [2]int64{ss.AckedCounter, 0}
		cur[windowRedeliverPrefix+name] = [2]int64{ss.RedeliveredCounter, 0}
		cur[windowExpiredPrefix+name] = [2]int64{ss.Expired, 0}
	}
	// Inbound: the replication producers the remote regions connected
	// here, counted per remote (a producer that reconnects keeps its
	// name, so its counters restart: the window skips that period).
	inbound := map[string][2]int64{}
	for _, p := range st.Publishers {
		if remote, ok := strings.CutPrefix(p.ProducerName, ReplicationProducerPrefix); ok {
			c := inbound[remote]
			inbound[remote] = [2]int64{c[0] + p.MsgInCounter, c[1] + p.BytesInCounter}
		}
	}
	for remote, c := range inbound {
		tm.Replication[remote] = ReplicationMetrics{}
		cur[windowReplPrefix+remote] = c
	}
	repl, err := t.replicationStats(ctx, tasks, tasksErr)
	if err != nil {
		t.svc.log.Debug("replication metrics incomplete", "topic", tm.Topic, "err", err)
	}
	for remote, rs := range repl {
		rm := tm.Replication[remote]
		if rs.Task.Connected {
			rm.Connected = 1
		} else {
			rm.Disconnected = 1
		}
		rm.RateOut, rm.ThroughputOut, rm.RateExpired = rs.Task.MsgRateOut, rs.Task.MsgThroughputOut, rs.Task.MsgRateExpired
		rm.Backlog = rs.Backlog.Messages
		if !rs.Backlog.Oldest.IsZero() {
			rm.DelaySeconds = max(0, int64(now.Sub(rs.Backlog.Oldest)/time.Second))
		}
		tm.Replication[remote] = rm
	}
	return tm, cur
}

// NamespaceMetrics folds topics into one TopicMetrics per namespace, as
// Pulsar's namespace-level aggregation: counts, rates, sizes, backlogs and
// buckets add up, the replication delay is the largest, and subscriptions
// are not kept (Topic and Bundle are empty, Subscriptions still counts
// them). The result is sorted by namespace, with the topics counted in
// topicsCount.
func NamespaceMetrics(topics []TopicMetrics) (namespaces []TopicMetrics, topicsCount map[string]int) {
	byNS := map[string]*TopicMetrics{}
	topicsCount = map[string]int{}
	for _, t := range topics {
		topicsCount[t.Namespace]++
		ns := byNS[t.Namespace]
		if ns == nil {
			ns = &TopicMetrics{Namespace: t.Namespace, Replication: map[string]ReplicationMetrics{}}
			byNS[t.Namespace] = ns
		}
		ns.Producers += t.Producers
		ns.Consumers += t.Consumers
		ns.Subscriptions += t.Subscriptions
		ns.RateIn += t.RateIn
		ns.ThroughputIn += t.ThroughputIn
		ns.RateOut += t.RateOut
		ns.ThroughputOut += t.ThroughputOut
		ns.MsgInCounter += t.MsgInCounter
		ns.BytesInCounter += t.BytesInCounter
		ns.MsgOutCounter += t.MsgOutCounter
		ns.BytesOutCounter += t.BytesOutCounter
		ns.StorageSize += t.StorageSize
		ns.MsgBacklog += t.MsgBacklog
		ns.WriteLatency = ns.WriteLatency.Add(t.WriteLatency)
		ns.EntrySize = ns.EntrySize.Add(t.EntrySize)
		ns.ReadLatency = ns.ReadLatency.Add(t.ReadLatency)
		for remote, r := range t.Replication {
			a := ns.Replication[remote]
			a.Connected += r.Connected
			a.Disconnected += r.Disconnected
			a.RateIn += r.RateIn
			a.ThroughputIn += r.ThroughputIn
			a.RateOut += r.RateOut
			a.ThroughputOut += r.ThroughputOut
			a.RateExpired += r.RateExpired
			a.Backlog += r.Backlog
			a.DelaySeconds = max(a.DelaySeconds, r.DelaySeconds)
			ns.Replication[remote] = a
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byNS)) {
		namespaces = append(namespaces, *byNS[name])
	}
	return namespaces, topicsCount
}

// TopicName returns the topic's parsed name.
func (t *Topic) TopicName() topology.TopicName { return t.name }
