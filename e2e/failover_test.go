//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// The failover bed: one region, one etcd, three bookies (E=3 Qw=3 Qa=2),
// three brokers, and a namespace of foBundles bundles with deduplication
// on, carrying foTopics topics, each with one named producer and one
// Exclusive consumer, all through a service URL that lists every broker.
const (
	foTenant    = "fo"
	foNamespace = "fo/ns"
	foTopics    = 30
	foBundles   = 16
	// foInterval is each producer's time between sends: 20 msg/s per
	// topic, 600 msg/s in all. It is also the resolution of the pauses.
	foInterval = 50 * time.Millisecond
	// foTTL is the brokers' ownership lease (--ownership-ttl), given
	// explicitly because the SIGSTOP target is stated against it.
	foTTL = 4 * time.Second
	// foKeepAlive is the clients' keepalive: pulsar-client-go drops a
	// connection that has carried nothing for two of them, which is how
	// it notices a frozen broker (SIGSTOP) at all; its default, 30s,
	// would hide the broker side of that case behind a minute of client
	// timeout.
	foKeepAlive = time.Second
	// foRedeliveryWindow is the cursor persist interval (1s) plus a
	// round trip, generous for a loaded machine (as TestScenarioRegionFaults).
	foRedeliveryWindow = 3 * time.Second
	// foFlow is how many receipts every topic must have after a moment
	// for the workload to count as flowing again: two seconds of sends.
	foFlow = 40
	// foSettle bounds each wait for the workload to flow again.
	foSettle = 90 * time.Second
)

// failover is a running failover bed and its workload.
type failover struct {
	t         *testing.T
	bed       *Bed
	region    *Region
	store     *meta.Etcd
	rec       *Recorder
	topics    []string
	pc, cc    pulsar.Client
	producers []*Producer
	consumers []*Consumer
}

// startFailover starts the bed (brokers with extraArgs too, and the
// processes logging at logLevel, "" for the bed's default) and the
// workload, and waits until every topic flows.
func startFailover(ctx context.Context, t *testing.T, logLevel string, extraArgs ...string) *failover {
	t.Helper()
	args := append([]string{"--ownership-ttl", foTTL.String()}, extraArgs...)
	bed := StartBed(t, BedConfig{Binary: meridianBin, LogLevel: logLevel, Regions: []RegionConfig{{
		Name: "r1", EtcdMembers: 1, Bookies: 3, Brokers: 3, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, BrokerArgs: args}}})
	f := &failover{t: t, bed: bed, region: bed.Region("r1"), rec: bed.Recorder()}
	t.Logf("scenario: 1 region (1 etcd, 3 bookies, 3 brokers, E=3 Qw=3 Qa=2), %d topics at %d msg/s each (%d msg/s); region up in %v",
		foTopics, int(time.Second/foInterval), foTopics*int(time.Second/foInterval), bed.StartedIn.Round(time.Millisecond))
	f.store = bed.Dial(ctx, f.region.EtcdEndpoints())

	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, foTenant, global.TenantInfo{AllowedClusters: []string{"r1"}}); err != nil {
		t.Fatal(err)
	}
	bundles, err := global.EvenBundlesData(foBundles)
	if err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := gs.CreateNamespace(ctx, foTenant, "ns", global.Policies{ReplicationClusters: []string{"r1"},
		DeduplicationEnabled: &on, Bundles: &bundles}); err != nil {
		t.Fatal(err)
	}

	url := f.region.AllBrokersURL()
	opts := pulsar.ClientOptions{KeepAliveInterval: foKeepAlive}
	f.pc, f.cc = NewClientWith(t, url, opts), NewClientWith(t, url, opts)
	WaitDeduplication(ctx, t, f.pc, "persistent://"+foNamespace+"/dedup-probe")
	for i := range foTopics {
		topic := fmt.Sprintf("persistent://%s/t%02d", foNamespace, i)
		f.topics = append(f.topics, topic)
		c, err := StartConsumer(ctx, f.cc, f.rec, ConsumerConfig{Region: "r1", Topic: topic, Subscription: "checker",
			Type: Exclusive, Name: fmt.Sprintf("c%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		f.consumers = append(f.consumers, c)
	}
	for i, topic := range f.topics {
		p, err := StartProducer(ctx, f.pc, f.rec, ProducerConfig{Region: "r1", Topic: topic,
			Name: fmt.Sprintf("p%02d", i), Interval: foInterval})
		if err != nil {
			t.Fatal(err)
		}
		f.producers = append(f.producers, p)
	}
	f.waitFlow(ctx, time.Time{}, "before the fault")
	return f
}

// waitFlow waits until every topic has foFlow receipts after since.
func (f *failover) waitFlow(ctx context.Context, since time.Time, what string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, foSettle)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		short := 0
		receipts := receiptsByTopic(f.rec.History())
		for _, topic := range f.topics {
			n := len(receipts[topic]) - countUntil(receipts[topic], since)
			if n < foFlow {
				short++
			}
		}
		if short == 0 {
			return
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("%s: %d of %d topics have fewer than %d receipts after %s: %v", what, short, len(f.topics), foFlow,
				since.Format("15:04:05.000"), ctx.Err())
		case <-tick.C:
		}
	}
}

// finish stops the workload, waits for every receipt to be acked by the
// consumers, reads every topic back, and runs the checker under rules.
func (f *failover) finish(ctx context.Context, rules Rules) History {
	f.t.Helper()
	for _, p := range f.producers {
		if err := p.Stop(ctx); err != nil {
			f.t.Logf("flush: %v", err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f.rec.WaitAllAcked(wait, f.t)
	for _, c := range f.consumers {
		c.Stop()
	}
	for _, topic := range f.topics {
		if err := ReadTopic(ctx, f.cc, f.rec, "r1", topic); err != nil {
			f.t.Fatal(err)
		}
	}
	h := f.rec.History()
	f.bed.Verify(h, rules)
	return h
}

// crashed are the checker's rules for a crash (SIGKILL, or a freeze past
// the lease): acks the broker confirmed within foRedeliveryWindow before
// it may be lost with it, so their messages may come once more.
func crashed(d Disruption) Rules {
	return Rules{Disruptions: []Disruption{d}, RedeliveryWindow: foRedeliveryWindow}
}

// handedOff are the checker's rules for hand-offs (SIGTERM drains,
// unloads, sheds) during the disruptions ds: the old owner persists every
// ack it confirmed before it lets the bundle go, so no redelivery of an
// ack confirmed before a hand-off began is excused. But an ack the
// consumer sends while its bundle moves is refused by the old owner and
// confirmed, on the retry, by the new one, which may already have
// dispatched the message again, as unacked; the consumer then receives
// that copy after its ack was confirmed. That copy, once per hand-off, is
// excused for acks confirmed during one.
func handedOff(ds ...Disruption) Rules { return Rules{Disruptions: ds} }

// bundleOwner is one ownership key of the namespace.
type bundleOwner struct {
	BrokerID string
	Lease    meta.LeaseID
	ModRev   int64
}

// owners reads the namespace's ownership keys: the owner of every bundle
// that has one.
func (f *failover) owners(ctx context.Context) map[topology.Bundle]bundleOwner {
	f.t.Helper()
	kvs, _, err := f.store.List(ctx, meta.Prefix(meta.RegionKey("r1", "owners", foTenant, "ns")))
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[topology.Bundle]bundleOwner{}
	for _, kv := range kvs {
		name, err := meta.Name(kv.Key)
		if err != nil {
			f.t.Fatal(err)
		}
		b, err := topology.ParseBundle(name)
		if err != nil {
			f.t.Fatalf("ownership key %s: %v", kv.Key, err)
		}
		var o struct {
			BrokerID string `json:"brokerId"`
		}
		if _, err := meta.DecodeJSON(kv.Value, 1, &o); err != nil {
			f.t.Fatalf("ownership key %s: %v", kv.Key, err)
		}
		out[b] = bundleOwner{BrokerID: o.BrokerID, Lease: kv.Lease, ModRev: kv.ModRevision}
	}
	return out
}

// topicsOf returns the topics whose bundle owners gives to broker id.
func (f *failover) topicsOf(owners map[topology.Bundle]bundleOwner, id string) []string {
	f.t.Helper()
	var out []string
	for _, topic := range f.topics {
		tn, err := topology.ParseTopicName(topic)
		if err != nil {
			f.t.Fatal(err)
		}
		h := topology.TopicHash(tn)
		for b, o := range owners {
			if b.Contains(h) && o.BrokerID == id {
				out = append(out, topic)
			}
		}
	}
	return out
}

// busiest returns the broker that owns the most bundles, and how many.
func (f *failover) busiest(owners map[topology.Bundle]bundleOwner) (*Broker, int) {
	f.t.Helper()
	count := map[string]int{}
	for _, o := range owners {
		count[o.BrokerID]++
	}
	var best *Broker
	for _, b := range f.region.Brokers {
		if best == nil || count[b.ID()] > count[best.ID()] {
			best = b
		}
	}
	if count[best.ID()] == 0 {
		f.t.Fatalf("no broker of the bed owns a bundle: owners %v", owners)
	}
	return best, count[best.ID()]
}

// pickVictim returns the broker that owns the most bundles and the
// topics it serves, saying so in the log: "<doing> <broker>".
func (f *failover) pickVictim(ctx context.Context, doing string) (*Broker, []string) {
	f.t.Helper()
	owners := f.owners(ctx)
	victim, n := f.busiest(owners)
	hit := f.topicsOf(owners, victim.ID())
	f.t.Logf("bundles per broker: %s; %s %s (%d bundles, %d topics)", f.spread(owners), doing, victim.Name, n, len(hit))
	return victim, hit
}

// spread says how many bundles each broker owns, for the log.
func (f *failover) spread(owners map[topology.Bundle]bundleOwner) string {
	count := map[string]int{}
	for _, o := range owners {
		count[o.BrokerID]++
	}
	var parts []string
	for _, b := range f.region.Brokers {
		parts = append(parts, fmt.Sprintf("%s=%d", b.Name, count[b.ID()]))
		delete(count, b.ID())
	}
	for _, id := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("unknown %s=%d", id, count[id]))
	}
	return strings.Join(parts, " ")
}

// receiptsByTopic returns each topic's send receipt times, sorted.
func receiptsByTopic(h History) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, s := range h.Sends {
		if s.Acknowledged() {
			out[s.Topic] = append(out[s.Topic], s.ReceiptAt)
		}
	}
	for _, ts := range out {
		slices.SortFunc(ts, time.Time.Compare)
	}
	return out
}

// countUntil is how many of the sorted times ts are not after t.
func countUntil(ts []time.Time, t time.Time) int {
	n, _ := slices.BinarySearchFunc(ts, t, func(a, b time.Time) int {
		if a.After(b) {
			return 1
		}
		return -1
	})
	return n
}

// pauses returns, per topic of topics, the longest wait between two
// receipts that ends in (from, to): how long the topic stopped taking
// messages after a fault at from.
func pauses(h History, topics []string, from, to time.Time) []time.Duration {
	receipts := receiptsByTopic(h)
	out := make([]time.Duration, 0, len(topics))
	for _, topic := range topics {
		out = append(out, maxGap(receipts[topic], from, to))
	}
	return out
}

// medianMax returns the median and the maximum of ds (zero for none).
func medianMax(ds []time.Duration) (median, maximum time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2], s[len(s)-1]
}

// reportPauses logs the pause of the topics hit by a fault and of the
// others, and whether the hit ones met the targets.
func (f *failover) reportPauses(what string, h History, hit []string, from, to time.Time, targetMedian, targetMax time.Duration) {
	f.t.Helper()
	others := slices.DeleteFunc(slices.Clone(f.topics), func(t string) bool { return slices.Contains(hit, t) })
	med, mx := medianMax(pauses(h, hit, from, to))
	_, omx := medianMax(pauses(h, others, from, to))
	verdict := "met"
	if med > targetMedian || mx > targetMax {
		verdict = "MISSED"
	}
	f.t.Logf("%s: pause in send receipts over the %d topics it hit: median %v, max %v (target median <= %v, max <= %v: %s); the other %d topics: max %v",
		what, len(hit), med.Round(time.Millisecond), mx.Round(time.Millisecond), targetMedian, targetMax, verdict,
		len(others), omx.Round(time.Millisecond))
}

// sendErrors reports every failed send of h as a test error (at most 5).
func sendErrors(t *testing.T, h History) {
	t.Helper()
	n := 0
	for _, s := range h.Sends {
		if s.Err == "" {
			continue
		}
		if n++; n <= 5 {
			t.Errorf("send %s to %s failed at %s: %s", s.Message, s.Topic, s.SentAt.Format("15:04:05.000"), s.Err)
		}
	}
	if n > 5 {
		t.Errorf("… %d failed sends in all", n)
	}
}

// lastLedgers returns the last ledger of each topic's managed ledger.
func (f *failover) lastLedgers(ctx context.Context, topics []string) map[string]int64 {
	f.t.Helper()
	out := map[string]int64{}
	for _, topic := range topics {
		ids := f.ledgerList(ctx, topic)
		out[topic] = ids[len(ids)-1]
	}
	return out
}

// ledgerList returns the ids of topic's ledgers, in the managed ledger's
// order.
func (f *failover) ledgerList(ctx context.Context, topic string) []int64 {
	f.t.Helper()
	kv, err := f.store.Get(ctx, mledger.ListKey("r1", topic))
	if err != nil {
		f.t.Fatalf("managed ledger of %s: %v", topic, err)
	}
	var ml struct {
		Ledgers []struct {
			ID int64 `json:"id"`
		} `json:"ledgers"`
	}
	if err := json.Unmarshal(kv.Value, &ml); err != nil || len(ml.Ledgers) == 0 {
		f.t.Fatalf("managed ledger %s: %s (%v)", kv.Key, kv.Value, err)
	}
	var ids []int64
	for _, l := range ml.Ledgers {
		ids = append(ids, l.ID)
	}
	return ids
}

// ledgerMetadata reads one ledger's metadata.
func (f *failover) ledgerMetadata(ctx context.Context, id int64) ledger.Metadata {
	f.t.Helper()
	kv, err := f.store.Get(ctx, ledger.LedgerKey("r1", id))
	if err != nil {
		f.t.Fatalf("ledger %d: %v", id, err)
	}
	var md ledger.Metadata
	if err := json.Unmarshal(kv.Value, &md); err != nil {
		f.t.Fatalf("ledger %d: %v", id, err)
	}
	return md
}

// TestScenarioFailover runs each fault of issue 14 on a bed of its own (see
// startFailover) and reports the pause it caused in each topic's send
// receipts, median and maximum over the topics the fault hit. The timing
// targets are reported, not enforced (the machine is loaded); what is
// checked in every case is the history: no acknowledged message lost,
// none stored twice, none delivered again after a confirmed ack beyond
// what a crash excuses (a SIGTERM, an unload and a shed are hand-offs,
// which persist the cursors first, so they excuse only what handedOff
// says), and each producer's order. Run it with
//
//	go test -tags e2e -race -run TestScenarioFailover -v ./e2e/
func TestScenarioFailover(t *testing.T) {
	t.Run("sigkill", testFailoverKill)
	t.Run("sigstop", testFailoverFreeze)
	t.Run("rolling-restart", testFailoverRollingRestart)
	t.Run("unload", testFailoverUnload)
	t.Run("scale-out", testFailoverScaleOut)
}

// testFailoverKill SIGKILLs the broker that owns the most bundles. The
// other brokers find its port refusing connections (its link refuses as a
// dead process's port does) and take its bundles over without waiting
// out its lease. Target: median pause at most 1 s, maximum at most 2 s.
func testFailoverKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	f := startFailover(ctx, t, "")
	victim, hit := f.pickVictim(ctx, "killing")

	killed := time.Now()
	victim.Kill()
	f.waitFlow(ctx, killed, "after the SIGKILL")
	recovered := time.Now()
	after := f.owners(ctx)
	if stale := f.topicsOf(after, victim.ID()); len(stale) > 0 {
		t.Errorf("the killed broker still owns the bundles of %d topics", len(stale))
	}
	t.Logf("after the SIGKILL: %s", f.spread(after))

	h := f.finish(ctx, crashed(Disruption{Start: killed, End: recovered}))
	f.reportPauses("SIGKILL of "+victim.Name, h, hit, killed, recovered, time.Second, 2*time.Second)
}

// testFailoverFreeze SIGSTOPs a bundle owner past its lease, then
// SIGCONTs it. Target: its topics serve elsewhere within the lease plus
// 1 s. Checked: the frozen broker's last ledger of each of its topics was
// fenced (CLOSED by the new owner's recovery) before it resumed, and not
// one entry more went into it afterwards; the resumed broker drops its
// bundles (its lease ended); and the read-back holds each producer's
// messages once and in order, so nothing it wrote landed after the new
// owner's first entry.
func testFailoverFreeze(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	f := startFailover(ctx, t, "")
	victim, hit := f.pickVictim(ctx, "freezing")
	oldLedgers := f.lastLedgers(ctx, hit)

	frozen := time.Now()
	victim.Pause()
	first, all := f.waitReowned(ctx, victim)
	t.Logf("SIGSTOP of %s: the first of its bundles had a new owner after %v, all after %v (lease %v)", victim.Name,
		first.Sub(frozen).Round(time.Millisecond), all.Sub(frozen).Round(time.Millisecond), foTTL)
	// Serving elsewhere: every topic it held takes sends again.
	f.waitFlow(ctx, frozen, "while the owner is frozen")
	moved := time.Now()
	h := f.rec.History()
	receipts := receiptsByTopic(h)
	var resumedAfter []time.Duration
	for _, topic := range hit {
		// Served again: the first receipt after the topic's pause (the
		// receipts just after the SIGSTOP were on their way already).
		if _, end := longestGap(receipts[topic], frozen, moved); !end.IsZero() {
			resumedAfter = append(resumedAfter, end.Sub(frozen))
		}
	}
	med, mx := medianMax(resumedAfter)
	verdict := "met"
	if mx > foTTL+time.Second {
		verdict = "MISSED"
	}
	t.Logf("SIGSTOP of %s: its %d topics took sends again elsewhere after median %v, max %v (target <= lease %v + 1s: %s)",
		victim.Name, len(hit), med.Round(time.Millisecond), mx.Round(time.Millisecond), foTTL, verdict)
	for b, o := range f.owners(ctx) {
		if o.BrokerID == victim.ID() {
			t.Errorf("bundle %s is still owned by the frozen broker %s (lease %x) after its topics moved", b, victim.Name, int64(o.Lease))
		}
	}
	fenced := map[int64]ledger.Metadata{}
	for topic, id := range oldLedgers {
		md := f.ledgerMetadata(ctx, id)
		if md.State != ledger.StateClosed {
			t.Errorf("%s: the frozen owner's ledger %d is %v after the topic moved, want CLOSED (fenced by recovery)", topic, id, md.State)
		}
		fenced[id] = md
	}

	from := victim.LogSize()
	victim.Resume()
	resumed := time.Now()
	f.waitLost(ctx, victim)
	t.Logf("the resumed broker counted its lease lost, and unloaded its topics, %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
	f.waitFlow(ctx, resumed, "after the frozen broker resumed")
	tail := victim.LogTail(int(victim.LogSize() - from))
	t.Logf("the resumed broker logged %d lines mentioning fencing", strings.Count(strings.ToLower(tail), "fenced"))

	h = f.finish(ctx, crashed(Disruption{Start: frozen, End: time.Now()}))
	for id, before := range fenced {
		md := f.ledgerMetadata(ctx, id)
		if md.State != before.State || md.LastEntry != before.LastEntry {
			t.Errorf("ledger %d of the frozen owner changed after it resumed: %v last entry %d, was %v last entry %d",
				id, md.State, md.LastEntry, before.State, before.LastEntry)
		}
	}
	for topic, id := range oldLedgers {
		list := f.ledgerList(ctx, topic)
		if i := slices.Index(list, id); i < 0 || i == len(list)-1 {
			t.Errorf("%s: ledgers %v: want the frozen owner's %d followed by the new owner's", topic, list, id)
		}
	}
	f.reportPauses("SIGSTOP of "+victim.Name, h, hit, frozen, moved, foTTL+time.Second, foTTL+time.Second)
}

// waitReowned waits until every bundle the victim owned is owned by
// another broker, and returns when the first and the last of them were
// seen re-owned (polled every 50ms). A bundle is claimed again only on a
// lookup once the victim's lease has ended: the first time shows the
// lease's end, the last one when the clients' retries got there.
func (f *failover) waitReowned(ctx context.Context, victim *Broker) (first, all time.Time) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, foSettle)
	defer cancel()
	var held []topology.Bundle
	for b, o := range f.owners(ctx) {
		if o.BrokerID == victim.ID() {
			held = append(held, b)
		}
	}
	for {
		now := f.owners(ctx)
		moved := 0
		for _, b := range held {
			if o, ok := now[b]; ok && o.BrokerID != victim.ID() {
				moved++
			}
		}
		if moved > 0 && first.IsZero() {
			first = time.Now()
		}
		if moved == len(held) {
			return first, time.Now()
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("the frozen %s's %d bundles: %d re-owned: %v", victim.Name, len(held), moved, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lostSeries counts the times a broker's lease ended under it, each
// after it unloaded every topic it served.
const lostSeries = `meridian_broker_ownership_changes_total{change="lost"}`

// waitLost waits until brk counts a lost lease: it noticed, and dropped
// its bundles.
func (f *failover) waitLost(ctx context.Context, brk *Broker) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		v, err := scrapeMetrics(ctx, brk.WebURL(), lostSeries)
		if err == nil && v[lostSeries] >= 1 {
			return
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("%s never counted its lease lost (%v, last scrape: %v %v)", brk.Name, ctx.Err(), v, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restartPhase is one broker's turn in a rolling restart.
type restartPhase struct {
	broker                     *Broker
	hit                        []string
	term, exited, ready, until time.Time
	// logTerm and logExit are the broker's log size at the SIGTERM and
	// at its exit: what it logged while it stopped lies between.
	logTerm, logExit int64
}

// testFailoverRollingRestart SIGTERMs each broker in turn, restarting it
// on the same id before the next. Target: no send error, and a pause of at
// most 1 s (100 ms is the stretch). The log says where the time goes:
// from the SIGTERM to the exit (the hand-off), to the restarted broker's
// ready line, and when the longest pause of the hit topics began and
// ended, with the broker's own lines of the hand-off.
func testFailoverRollingRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	f := startFailover(ctx, t, "info")
	var phases []*restartPhase
	for _, brk := range f.region.Brokers {
		owners := f.owners(ctx)
		p := &restartPhase{broker: brk, hit: f.topicsOf(owners, brk.ID()), logTerm: brk.LogSize()}
		t.Logf("bundles per broker: %s; SIGTERM to %s (%d topics)", f.spread(owners), brk.Name, len(p.hit))
		p.term = time.Now()
		brk.Terminate()
		wait, cancelWait := context.WithTimeout(ctx, time.Minute)
		if err := brk.Wait(wait); err != nil {
			t.Errorf("%s after SIGTERM: %v", brk.Name, err)
		}
		cancelWait()
		p.exited = time.Now()
		p.logExit = brk.LogSize()
		brk.Start()
		brk.WaitReady(ctx, p.logExit)
		p.ready = time.Now()
		f.waitFlow(ctx, p.ready, "after restarting "+brk.Name)
		p.until = time.Now()
		phases = append(phases, p)
	}
	var handoffs []Disruption
	for _, p := range phases {
		handoffs = append(handoffs, Disruption{Start: p.term, End: p.until})
	}
	h := f.finish(ctx, handedOff(handoffs...))
	sendErrors(t, h)
	receipts := receiptsByTopic(h)
	for _, p := range phases {
		at := func(ts time.Time) string {
			d := ts.Sub(p.term).Round(time.Millisecond)
			if d < 0 {
				return d.String()
			}
			return "+" + d.String()
		}
		t.Logf("%s: SIGTERM at %s, exited %s, restarted and ready %s", p.broker.Name, p.term.Format("15:04:05.000"), at(p.exited), at(p.ready))
		f.reportPauses("rolling restart, "+p.broker.Name, h, p.hit, p.term, p.until, time.Second, time.Second)
		// The hit topic with the longest pause: when it began and ended.
		var worst string
		var start, end time.Time
		for _, topic := range p.hit {
			if s, e := longestGap(receipts[topic], p.term, p.until); e.Sub(s) > end.Sub(start) {
				worst, start, end = topic, s, e
			}
		}
		if worst != "" {
			t.Logf("  longest pause: %s, from %s to %s", worst, at(start), at(end))
		}
		t.Logf("  %s's log from SIGTERM to exit:\n%s", p.broker.Name, logBetween(p.broker.Process, p.logTerm, p.logExit, 20))
	}
}

// logBetween returns the process's log between the offsets from and to,
// at most n lines of it, indented.
func logBetween(p *Process, from, to int64, n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	to = min(to, int64(len(b)))
	if from >= to {
		return "    (nothing)"
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(b[from:to])), "\n") {
		if len(out) == n {
			out = append(out, "    …")
			break
		}
		out = append(out, "    "+line)
	}
	return strings.Join(out, "\n")
}

// testFailoverUnload unloads every owned bundle of the namespace under
// load through the admin REST API, each through another broker than the
// last (any broker must reach the owner). Checked: no send error, and each
// bundle's ownership key changed (the unload reached its owner). The
// pauses are reported.
func testFailoverUnload(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	f := startFailover(ctx, t, "")
	var admins []pulsaradmin.Client
	for _, brk := range f.region.Brokers {
		a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: brk.WebURL()})
		if err != nil {
			t.Fatal(err)
		}
		admins = append(admins, a)
	}
	before := f.owners(ctx)
	t.Logf("bundles per broker: %s; unloading all %d owned bundles", f.spread(before), len(before))
	began := time.Now()
	bundles := slices.SortedFunc(maps.Keys(before), func(a, b topology.Bundle) int { return cmp.Compare(a.Lower, b.Lower) })
	for i, b := range bundles {
		if err := admins[i%len(admins)].Namespaces().UnloadNamespaceBundleWithContext(ctx, foNamespace, b.String()); err != nil {
			t.Errorf("unload %s through %s: %v", b, f.region.Brokers[i%len(admins)].Name, err)
		}
	}
	unloaded := time.Now()
	t.Logf("%d unloads answered in %v", len(bundles), unloaded.Sub(began).Round(time.Millisecond))
	f.waitFlow(ctx, unloaded, "after the unloads")
	settled := time.Now()
	after := f.owners(ctx)
	for _, b := range bundles {
		if o, ok := after[b]; ok && o.ModRev == before[b].ModRev {
			t.Errorf("bundle %s: its ownership key is unchanged (owner %s), so the unload never reached it", b, o.BrokerID)
		}
	}
	t.Logf("after the unloads: %s", f.spread(after))
	h := f.finish(ctx, handedOff(Disruption{Start: began, End: settled}))
	sendErrors(t, h)
	f.reportPauses("unload of every bundle", h, f.topics, began, settled, time.Second, time.Second)
}

// foShedInterval is the shedding interval of the scale-out case: Pulsar's
// shortest (loadBalancerSheddingIntervalMinutes=1).
const foShedInterval = time.Minute

// foShedConf is the brokers' broker.conf in the scale-out case: the
// shortest shedding interval, and no floor on the throughput of a bundle
// worth moving (the workload is a few KiB/s; Pulsar's floor is 1 MB/s).
const foShedConf = `loadBalancerSheddingIntervalMinutes=1
loadBalancerBundleUnloadMinThroughputThreshold=0
`

// testFailoverScaleOut starts a fourth broker in the running region.
// Target: it owns a bundle within one shedding interval of its ready line.
// Checked: it gets one at all (within two intervals and half a minute),
// no send fails while bundles move to it, and the history.
func testFailoverScaleOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte(foShedConf), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFailover(ctx, t, "", "--config", conf)
	t.Logf("bundles per broker: %s; starting a fourth broker", f.spread(f.owners(ctx)))
	began := time.Now()
	brk := f.bed.AddBroker(ctx, f.region)
	ready := time.Now()
	t.Logf("%s ready %v after its start", brk.Name, ready.Sub(began).Round(time.Millisecond))
	deadline := ready.Add(2*foShedInterval + 30*time.Second)
	var got time.Time
	for got.IsZero() {
		if len(f.topicsOf(f.owners(ctx), brk.ID())) > 0 {
			got = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s owns no bundle %v after its ready line: %s", brk.Name, time.Since(ready).Round(time.Second), f.spread(f.owners(ctx)))
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !got.IsZero() {
		verdict := "met"
		if got.Sub(ready) > foShedInterval {
			verdict = "MISSED"
		}
		t.Logf("%s owned its first bundle %v after its ready line (target <= one shedding interval, %v: %s)",
			brk.Name, got.Sub(ready).Round(time.Millisecond), foShedInterval, verdict)
	}
	f.waitFlow(ctx, time.Now(), "after the scale-out")
	t.Logf("after the scale-out: %s", f.spread(f.owners(ctx)))
	h := f.finish(ctx, handedOff(Disruption{Start: ready, End: time.Now()}))
	sendErrors(t, h)
}
