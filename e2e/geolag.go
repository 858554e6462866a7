//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// lagRun is one lag measurement on the geo bed (measureLag): r1's
// producer at a fixed rate to a topic of all three regions, and when each
// message first arrived in r2 and r3.
type lagRun struct {
	topic string
	// warmup is from the producer's start to the first message's arrival
	// in both destinations: a new topic's tasks start within a scan.
	warmup time.Duration
	// steady and ran are the measured window: from the first arrival in
	// both destinations, for the time asked.
	steady time.Time
	ran    time.Duration
	all    []Send // every acknowledged send
	sent   []Send // the acknowledged sends of the window
	// lags are, per destination, the window's lags (first arrival minus
	// the send), in sent's order.
	lags map[string][]time.Duration
	// cpu is what the bed's processes, by kind, and the test process
	// used over the window (cpuShares): whether the machine had cores to
	// spare at the rate.
	cpu string
}

// lagDestinations are the regions the lag is measured in.
var lagDestinations = []string{"r2", "r3"}

// startReplicated starts r2's and r3's arrivals of topic and r1's
// producer name of rate msg/s to it, batching for batching (0: the
// client's default), and returns once the first message has reached both
// destinations.
func (g *geoBed) startReplicated(ctx context.Context, tb testing.TB, topic, name string, rate int, batching time.Duration) (*Recorder, map[string]*arrivals, []*Producer) {
	tb.Helper()
	for _, r := range g.Regions {
		KeepForReadBack(ctx, tb, g.clients[r.Name], topic)
	}
	rec := &Recorder{}
	dests := map[string]*arrivals{}
	for _, region := range lagDestinations {
		dests[region] = g.startArrivals(ctx, tb, region, topic)
	}
	ps := g.startBatched(ctx, tb, rec, "r1", topic, name, rate, batching)
	rec.WaitAcknowledged(ctx, tb, 1, "the first send")
	first := messages(ackedSends(rec, topic)[:1])
	for _, a := range dests {
		waitArrived(ctx, tb, a, first, "the first message")
	}
	return rec, dests, ps
}

// measureLag has r1 send rate msg/s of msgSize bytes to topic (of the
// "all" namespace) while r2 and r3 consume it, and measures the lags of
// the messages sent in the each after the first message reached both
// destinations. Then it waits until every acknowledged message has
// arrived in both, checks that the replication went through the links,
// and reads every region's copy back for the checker: nothing lost or
// stored twice.
func (g *geoBed) measureLag(ctx context.Context, tb testing.TB, topic string, rate int, each, batching time.Duration) lagRun {
	tb.Helper()
	before := g.linkBytes()
	began := time.Now()
	// The figures are of the steady state: from when the first message
	// has reached both destinations, since a new topic's tasks start
	// within a scan and replicate its first messages late.
	rec, dests, ps := g.startReplicated(ctx, tb, topic, fmt.Sprintf("r1-lag-%d", rate), rate, batching)
	run := lagRun{topic: topic, steady: time.Now(), lags: map[string][]time.Duration{}}
	run.warmup = run.steady.Sub(began)
	cpuBefore, err := cpuByKind(g.processes())
	if err != nil {
		tb.Fatal(err)
	}
	sleep(ctx, tb, each)
	run.ran = time.Since(run.steady)
	cpuAfter, err := cpuByKind(g.processes())
	if err != nil {
		tb.Fatal(err)
	}
	run.cpu = cpuShares(cpuBefore, cpuAfter, run.ran)
	stopProducers(ctx, tb, ps)
	run.all = ackedSends(rec, topic)
	for _, a := range dests {
		waitArrived(ctx, tb, a, messages(run.all), fmt.Sprintf("%d msg/s", rate))
	}
	for _, s := range run.all {
		if !s.SentAt.Before(run.steady) && s.SentAt.Sub(run.steady) < run.ran {
			run.sent = append(run.sent, s)
		}
	}
	for _, region := range lagDestinations {
		for _, s := range run.sent {
			at, _ := dests[region].arrivedAt(s.Message)
			run.lags[region] = append(run.lags[region], at.Sub(s.SentAt))
		}
	}
	g.checkLinks(tb, before, map[string]int{"r2": len(run.all), "r3": len(run.all)})
	for _, a := range dests {
		a.Stop()
	}
	g.verify(ctx, tb, rec, topic)
	return run
}

// catchUpRun is one catch-up measurement (measureCatchUp).
type catchUpRun struct {
	// backlog is how many messages r1 had acknowledged at the heal that
	// r2 did not hold yet.
	backlog int
	// resumed is from the heal to the first message arriving in r2 after
	// it; caughtUp from the heal to the arrival of the last message r1
	// acknowledged before the heal.
	resumed, caughtUp time.Duration
}

// measureCatchUp has r1 send rate msg/s to a topic of all three regions
// while r2 and r3 consume it, cuts r2 off both ways (CutRegion) for cut
// once the first message reached both, then restores it and measures,
// while r1 goes on producing, how long r2 takes to hold every message r1
// acknowledged before the heal. The caught-up time is read from the
// arrival times afterwards, so the polling's step is not in it. Then every
// region's copy is read back for the checker.
func (g *geoBed) measureCatchUp(ctx context.Context, tb testing.TB, topic string, rate int, cut time.Duration) catchUpRun {
	tb.Helper()
	rec, dests, ps := g.startReplicated(ctx, tb, topic, fmt.Sprintf("r1-catchup-%d", rate), rate, 0)
	g.CutRegion("r2")
	sleep(ctx, tb, cut)
	pending := messages(ackedSends(rec, topic))
	g.RestoreRegion("r2")
	healAt := time.Now()
	var run catchUpRun
	run.backlog = len(pending) - dests["r2"].count(pending)
	waitArrived(ctx, tb, dests["r2"], pending, "the catch-up")
	for _, m := range pending {
		if at, _ := dests["r2"].arrivedAt(m); at.Sub(healAt) > run.caughtUp {
			run.caughtUp = at.Sub(healAt)
		}
	}
	stopProducers(ctx, tb, ps)
	all := ackedSends(rec, topic)
	run.resumed = dests["r2"].firstSince(messages(all), healAt).Sub(healAt)
	for _, a := range dests {
		waitArrived(ctx, tb, a, messages(all), "after the catch-up")
		a.Stop()
	}
	g.verify(ctx, tb, rec, topic)
	return run
}

// GeoBed is the geo-replication scenarios' bed for programs outside this
// package (the side-by-side benchmarks): three regions (r1, r2, r3) of
// one etcd, two bookies, a broker and two replicator workers each, one
// global etcd, and 20 ms one way on every path between regions. The
// test's clients are in their regions (BedConfig.LocalClients). Its
// measurements run one after another, from the test's goroutine.
type GeoBed struct {
	g    *geoBed
	runs int // names each measurement's topic
}

// StartGeoBed starts the bed of the meridian binary; bookieArgs go to
// every bookie (e.g. "--storage", "memory"). The bed stops with the test.
func StartGeoBed(ctx context.Context, tb testing.TB, binary string, bookieArgs ...string) *GeoBed {
	tb.Helper()
	return &GeoBed{g: newGeoBed(ctx, tb, binary, bookieArgs...)}
}

// Bed is the running bed: its processes and links.
func (b *GeoBed) Bed() *Bed { return b.g.Bed }

// GeoLinkLatency is the one-way latency of every path between the bed's
// regions.
const GeoLinkLatency = wanLatency

// GeoPayloadSize is the payload size of every message the bed's
// measurements send.
const GeoPayloadSize = msgSize

// Lag is what MeasureLag saw.
type Lag struct {
	// Start is when the window began.
	Start time.Time
	// Warmup is from the producer's start to the first message in both
	// destinations; the window starts then.
	Warmup time.Duration
	// Window is how long the measured sends went on.
	Window time.Duration
	// Lags are r2's and r3's lags of the window's messages together
	// (first arrival in the region minus the send), sorted.
	Lags []time.Duration
	// Publish are r1's publish latencies (send to receipt) of the
	// window's messages, sorted.
	Publish []time.Duration
}

// MeasureLag sends rate msg/s of GeoPayloadSize bytes from r1 to a new
// topic of all three regions for window (after the warm-up), and returns
// the lags into r2 and r3. It fails the test if a message is lost, stored
// twice, or replicated around the links.
func (b *GeoBed) MeasureLag(ctx context.Context, tb testing.TB, rate int, window time.Duration) Lag {
	tb.Helper()
	return b.MeasureLagBatched(ctx, tb, rate, window, 0)
}

// MeasureLagBatched is MeasureLag with r1's producer batching for
// batching instead of the client's default 10ms.
func (b *GeoBed) MeasureLagBatched(ctx context.Context, tb testing.TB, rate int, window, batching time.Duration) Lag {
	tb.Helper()
	b.runs++
	run := b.g.measureLag(ctx, tb, fmt.Sprintf("persistent://%s/all/lag-%d-%d", geoTenant, rate, b.runs), rate, window, batching)
	var lags []time.Duration
	for _, l := range run.lags {
		lags = append(lags, l...)
	}
	slices.Sort(lags)
	pub := publishLatencies(run.sent)
	slices.Sort(pub)
	return Lag{Start: run.steady, Warmup: run.warmup, Window: run.ran, Lags: lags, Publish: pub}
}

// CatchUp is what MeasureCatchUp saw.
type CatchUp struct {
	// Backlog is how many messages r1 had acknowledged at the heal that
	// r2 did not hold yet.
	Backlog int
	// Resumed is from the heal to the first message arriving in r2 after
	// it (reconnection and backoff).
	Resumed time.Duration
	// CaughtUp is from the heal to when r2 held every message r1 had
	// acknowledged before it.
	CaughtUp time.Duration
}

// MeasureCatchUp cuts r2 off both ways for cut while r1 sends rate msg/s
// to a new topic of all three regions, and returns how r2 caught up after
// the heal, r1 producing all along. It fails the test if a message is
// lost or stored twice.
func (b *GeoBed) MeasureCatchUp(ctx context.Context, tb testing.TB, rate int, cut time.Duration) CatchUp {
	tb.Helper()
	b.runs++
	run := b.g.measureCatchUp(ctx, tb, fmt.Sprintf("persistent://%s/all/catchup-%d-%d", geoTenant, rate, b.runs), rate, cut)
	return CatchUp{Backlog: run.backlog, Resumed: run.resumed, CaughtUp: run.caughtUp}
}

// Percentile is the p-th percentile (0..1) of ds, which it sorts.
func Percentile(ds []time.Duration, p float64) time.Duration { return percentile(ds, p) }
