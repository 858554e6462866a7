//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/e2e/plot"
	"github.com/meridian-mq/meridian/global"
)

// The soak of issue 16: three regions for 30 minutes at half the maximum
// publish rate measured at the start of the same run, sampling every
// process's resources, which must stay flat. It is skipped unless asked
// for:
//
//	MERIDIAN_SOAK=1 go test -tags e2e -run 'TestSoak$' -v -timeout 60m ./e2e/
//
// $MERIDIAN_SOAK_DURATION (a Go duration, e.g. 4m) runs it for that long
// instead of 30 minutes, and also asks for it. The warm-up left out of the
// fit is 5 minutes, or a sixth of a shorter run.

const (
	soakEnv         = "MERIDIAN_SOAK"
	soakDurationEnv = "MERIDIAN_SOAK_DURATION"
	// soakMaxGrowth is the most each resource's fitted line may project
	// per hour, as a fraction of its fitted value at the end of the
	// warm-up.
	soakMaxGrowth = 0.05
	// soakSampleEvery is the time between two samples of every process.
	soakSampleEvery = 10 * time.Second
	// soakMaxRateWindow is how long the unpaced publishing that measures
	// the maximum rate runs; its first soakMaxRateSkip are left out (topic
	// loads, the producers' first batches).
	soakMaxRateWindow = 25 * time.Second
	soakMaxRateSkip   = 5 * time.Second
	soakTenant        = "soak"
	soakNamespace     = "soak/all"
)

// soakRegions are the bed's regions; every one produces and consumes.
var soakRegions = []string{"r1", "r2", "r3"}

// soakMsgSize is the soak's payload size: smaller than the other
// scenarios' msgSize, so that at its rate (measured at about 20k msg/s of
// 1 KiB here, every message stored twice in each of three regions) the
// bookies' disks hold a few GB, not tens, before reclamation catches up.
const soakMsgSize = 256

// soakBrokerConf rolls the ledgers over at 64 MB or 1 minute (Pulsar's
// defaults keep a ledger 10 minutes to 4 hours), and soakBookieArgs has
// the bookies collect deleted ledgers every 30 s from 64 MiB journal
// files, so that within the run ledgers are created, consumed, deleted
// and their files reclaimed over and over: the churn a leak would show
// in, and a disk use of a couple of minutes of traffic.
const soakBrokerConf = "managedLedgerMinLedgerRolloverTimeMinutes=0\nmanagedLedgerMaxLedgerRolloverTimeMinutes=1\nmanagedLedgerMaxSizePerLedgerMbytes=64\n"

var soakBookieArgs = []string{"--gc-interval", "30s", "--journal-file-size", fmt.Sprint(64 << 20)}

// soakEtcdArgs keep one minute of etcd's revision history instead of an
// hour: with an hour, the in-use database grows by design through the
// first hour (every write's old revision is kept), so a 30-minute run
// could not tell a leak of keys from history. With a minute, what is in
// use after the warm-up is the live keys and a minute of history.
var soakEtcdArgs = []string{"--auto-compaction-retention", "1m"}

// soakPlan is how long the run lasts and how much of it is warm-up.
type soakPlan struct{ duration, warmUp time.Duration }

// soakPlanFromEnv reads the run's length from the environment; ok is false
// when the soak was not asked for.
func soakPlanFromEnv() (plan soakPlan, ok bool, err error) {
	plan.duration = 30 * time.Minute
	d := os.Getenv(soakDurationEnv)
	switch {
	case d != "":
		plan.duration, err = time.ParseDuration(d)
		if err != nil || plan.duration < time.Minute {
			return plan, true, fmt.Errorf("$%s=%q: want a duration of at least 1m", soakDurationEnv, d)
		}
	case os.Getenv(soakEnv) != "1":
		return plan, false, nil
	}
	plan.warmUp = min(5*time.Minute, plan.duration/6)
	return plan, true, nil
}

// countingProducer publishes numbered soakMsgSize-byte messages, paced by the
// workload's clock pacer (see ProducerConfig.Interval), or as fast as its
// pending-message bound lets it with no interval, and counts receipts
// instead of recording them. The workload's Producer records every send
// (about 200 bytes each in the test process): 30 minutes at thousands of
// msg/s would hold gigabytes, and this run checks no history; it checks
// resources.
type countingProducer struct {
	p             pulsar.Producer
	stop          context.CancelFunc
	wg            sync.WaitGroup
	acked, failed atomic.Int64
	firstErr      atomic.Pointer[string]
	name, region  string
}

// startCountingProducer creates the producer on client and starts it.
func startCountingProducer(ctx context.Context, client pulsar.Client, region, topic, name string, interval time.Duration) (*countingProducer, error) {
	pending := 1000
	if interval > 0 {
		pending = max(pending, int(time.Second/interval))
	}
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: name, SendTimeout: time.Minute, MaxPendingMessages: pending})
	if err != nil {
		return nil, fmt.Errorf("producer %s on %s: %w", name, topic, err)
	}
	loop, stop := context.WithCancel(ctx)
	cp := &countingProducer{p: p, stop: stop, name: name, region: region}
	receipt := func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if err != nil {
			if cp.failed.Add(1) == 1 {
				s := err.Error()
				cp.firstErr.Store(&s)
			}
			return
		}
		cp.acked.Add(1)
	}
	cp.wg.Go(func() {
		var pace *pacer
		if interval > 0 {
			pace = newPacer(clockwork.NewRealClock(), interval)
			defer pace.stop()
		}
		for n := int64(0); loop.Err() == nil; n++ {
			if pace != nil && !pace.wait(loop) {
				return
			}
			seq := n
			// SendAsync blocks while MaxPendingMessages are pending: that is
			// what bounds the unpaced producer.
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload(Message{Producer: name, N: n}, soakMsgSize), SequenceID: &seq}, receipt)
		}
	})
	return cp, nil
}

// Stop ends the sending, flushes what is pending and closes the producer.
func (cp *countingProducer) Stop(ctx context.Context) error {
	cp.stop()
	cp.wg.Wait()
	err := cp.p.FlushWithCtx(ctx)
	cp.p.Close()
	return err
}

// lagConsumer receives the soak topic in one region, acks every message
// (without waiting for the broker's answer), counts what arrives, and
// keeps, for the current window, the replication lag of each message from
// another region: its arrival here minus its publish time, which the
// producer's client stamps and the replicator keeps (it forwards entries
// with their metadata). Every process of the bed and the test share one
// clock.
type lagConsumer struct {
	region string
	c      pulsar.Consumer
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	received int64
	lags     []time.Duration // this window's, reset by takeWindow
}

func startLagConsumer(ctx context.Context, client pulsar.Client, region, topic string) (*lagConsumer, error) {
	c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "soak", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 5000})
	if err != nil {
		return nil, fmt.Errorf("subscribe in %s to %s: %w", region, topic, err)
	}
	ctx, stop := context.WithCancel(ctx)
	lc := &lagConsumer{region: region, c: c, stop: stop}
	lc.wg.Go(func() {
		for {
			msg, err := c.Receive(ctx)
			if err != nil {
				return // stopped
			}
			lag := time.Since(msg.PublishTime())
			remote := !strings.HasPrefix(msg.ProducerName(), region+"-")
			lc.mu.Lock()
			lc.received++
			if remote {
				lc.lags = append(lc.lags, lag)
			}
			lc.mu.Unlock()
			_ = c.Ack(msg) // a lost ack is redelivered, which this run does not check
		}
	})
	return lc, nil
}

// takeWindow returns the count received so far and the lags since the
// last call.
func (lc *lagConsumer) takeWindow() (received int64, lags []time.Duration) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lags, lc.lags = lc.lags, nil
	return lc.received, lags
}

// receivedSoFar is how many messages the consumer has received.
func (lc *lagConsumer) receivedSoFar() int64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.received
}

// Stop ends the consumer.
func (lc *lagConsumer) Stop() {
	lc.stop()
	lc.wg.Wait()
	lc.c.Close()
}

// The resources sampled from each process; the last only from etcd.
// RSS is judged by its anonymous part (Memory.Anon), where a leak
// shows; the whole is printed and charted beside it, not judged: its
// file pages are the binary's code, paged in as code first runs and
// out when the kernel needs the memory, and etcd's mapped database
// (whose in-use size is judged as dbSizeInUse). The live heap
// (go_gc_heap_live_bytes: what the last GC found reachable) is printed
// too, to tell a leak from the runtime's own slack.
const (
	seriesRSS        = "RSS"
	seriesRSSAnon    = "anonymous RSS"
	seriesLiveHeap   = "live heap"
	seriesGoroutines = "goroutines"
	seriesFDs        = "open files"
	seriesEtcdDB     = "dbSizeInUse"
)

// soakResources are the series in the order they are judged and shown.
var soakResources = []string{seriesRSSAnon, seriesRSS, seriesLiveHeap, seriesGoroutines, seriesFDs, seriesEtcdDB}

// memoryClassNames are soakMemoryClasses' names, in order.
func memoryClassNames() []string {
	var out []string
	for _, class := range soakMemoryClasses {
		out = append(out, class.name)
	}
	return out
}

// soakMemoryClasses split a process's memory the way the anonymous RSS
// holds it: the Go runtime's, from every process's go_memstats_* series
// (etcd's too), and a bookie's index (pebble's memtables and block cache,
// which the bed's cgo-free build allocates in the Go heap: a part of heap
// objects, shown apart). They are printed, not judged: they say which part grew when the
// anonymous RSS did. Each is computed from the scraped series by its func,
// for the processes of its kind ("" for every process).
var soakMemoryClasses = []struct {
	name, kind string
	series     []string
	value      func(v map[string]float64) float64
}{
	// Allocated objects, the live and the dead not yet swept.
	{"heap objects", "", []string{"go_memstats_heap_alloc_bytes"}, func(v map[string]float64) float64 {
		return v["go_memstats_heap_alloc_bytes"]
	}},
	// Free slots in spans that hold objects: fragmentation.
	{"heap unused", "", []string{"go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes"}, func(v map[string]float64) float64 {
		return v["go_memstats_heap_inuse_bytes"] - v["go_memstats_heap_alloc_bytes"]
	}},
	// Free spans the runtime keeps rather than return to the OS.
	{"heap free", "", []string{"go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes"}, func(v map[string]float64) float64 {
		return v["go_memstats_heap_idle_bytes"] - v["go_memstats_heap_released_bytes"]
	}},
	{"stacks", "", []string{"go_memstats_stack_inuse_bytes"}, func(v map[string]float64) float64 {
		return v["go_memstats_stack_inuse_bytes"]
	}},
	// The runtime's own: span and cache structures, the GC's metadata,
	// the profiler's buckets and the rest.
	{"runtime metadata", "", []string{"go_memstats_mspan_inuse_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_gc_sys_bytes",
		"go_memstats_buck_hash_sys_bytes", "go_memstats_other_sys_bytes"}, func(v map[string]float64) float64 {
		return v["go_memstats_mspan_inuse_bytes"] + v["go_memstats_mcache_inuse_bytes"] + v["go_memstats_gc_sys_bytes"] +
			v["go_memstats_buck_hash_sys_bytes"] + v["go_memstats_other_sys_bytes"]
	}},
	// The block cache in use, and the memtables as allocated (their pages
	// become resident as they fill).
	{"bookie index", "bookie", []string{`meridian_bookie_index_memory_bytes{part="block_cache"}`,
		`meridian_bookie_index_memory_bytes{part="memtables"}`}, func(v map[string]float64) float64 {
		return v[`meridian_bookie_index_memory_bytes{part="block_cache"}`] + v[`meridian_bookie_index_memory_bytes{part="memtables"}`]
	}},
}

// soakSeries are the samples of the run, by process and resource, and the
// load: per region, the publish rate and the lag percentiles of what
// arrived there from the others.
type soakSeries struct {
	resources map[string]map[string][]Sample // process name → resource → samples
	rate      map[string][]Sample            // region → receipts/s
	lagP50    map[string][]Sample            // destination region → ms
	lagP99    map[string][]Sample
	// rounds is how many times every process was sampled; missed counts,
	// by process, the rounds whose sample failed (a scrape that timed out
	// on the loaded machine, say).
	rounds int
	missed map[string]int
}

// soakSampleResult is one process's sample of one round.
type soakSampleResult struct {
	at     time.Time
	values map[string]float64
	err    error
}

// sampleAll samples every process at once, so that a slow scrape does not
// delay the others' samples, and returns the results in procs' order.
func sampleAll(ctx context.Context, procs []bedProcess) []soakSampleResult {
	out := make([]soakSampleResult, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			at := time.Now()
			values, err := sampleProcess(ctx, p)
			out[i] = soakSampleResult{at: at, values: values, err: err}
		})
	}
	wg.Wait()
	return out
}

// sampleProcess reads p's resources: RSS and open files from /proc,
// goroutines (and an etcd member's in-use database size) from its
// /metrics.
func sampleProcess(ctx context.Context, p bedProcess) (map[string]float64, error) {
	pid := p.PID()
	mem, err := ProcMemory(pid)
	if err != nil {
		return nil, err
	}
	fds, err := ProcOpenFiles(pid)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{seriesRSS: float64(mem.RSS), seriesRSSAnon: float64(mem.Anon), seriesFDs: float64(fds)}
	if p.MetricsURL == "" {
		return nil, fmt.Errorf("%s has no /metrics to read goroutines from", p.Name)
	}
	// An etcd member serves etcd's own registry; the others Meridian's
	// (telemetry.NewRegistry), with the live heap.
	series := map[string]string{"go_goroutines": seriesGoroutines}
	if p.kind == "etcd" {
		series["etcd_mvcc_db_total_size_in_use_in_bytes"] = seriesEtcdDB
	} else {
		series["go_gc_heap_live_bytes"] = seriesLiveHeap
	}
	scraped := map[string]bool{}
	for name := range series {
		scraped[name] = true
	}
	for _, class := range soakMemoryClasses {
		if class.kind != "" && class.kind != p.kind {
			continue
		}
		for _, name := range class.series {
			scraped[name] = true
		}
	}
	names := slices.Sorted(maps.Keys(scraped))
	values, err := scrape(ctx, p.MetricsURL, names)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	byName := map[string]float64{}
	for i, name := range names {
		byName[name] = values[i]
	}
	for name, resource := range series {
		out[resource] = byName[name]
	}
	for _, class := range soakMemoryClasses {
		if class.kind == "" || class.kind == p.kind {
			out[class.name] = class.value(byName)
		}
	}
	return out, nil
}

// scrape reads the named unlabelled samples from the /metrics at url,
// within 20 s.
func scrape(ctx context.Context, url string, names []string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	values, err := scrapeMetrics(ctx, strings.TrimSuffix(url, "/metrics"), names...)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(names))
	for i, name := range names {
		out[i] = values[name]
	}
	return out, nil
}

// TestSoak runs three regions (one etcd member, two bookies, one broker
// and two replicator workers each, plus one global etcd member: 19
// processes) with a namespace replicated over all three, 20 ms one way
// between regions, a producer and a consumer in every region on one
// topic. It measures the maximum rate (all three regions publishing
// unpaced at once: the receipts over 20 s, and what the slowest region's
// consumer received meanwhile; see maxRates), then publishes at half the
// lesser, paced, for the run's duration, sampling every process every
// 10 s. After the warm-up every resource's fitted line must project under
// 5% growth per hour. It draws the curves into docs/img and writes the
// table of slopes into docs/BENCHMARKS.md (WriteDocSection).
func TestSoak(t *testing.T) {
	plan, ok, err := soakPlanFromEnv()
	if !ok {
		t.Skipf("set %s=1 (30 minutes) or %s=<duration> to run the soak", soakEnv, soakDurationEnv)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), plan.duration+20*time.Minute)
	defer cancel()

	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte(soakBrokerConf), 0o644); err != nil {
		t.Fatal(err)
	}
	var regions []RegionConfig
	for _, name := range soakRegions {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 2, Brokers: 1, Replicators: 2,
			BrokerArgs: []string{"--config", conf}, BookieArgs: soakBookieArgs})
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true, LocalClients: true, EtcdArgs: soakEtcdArgs})
	procs := bed.processes()
	counts := processCounts(procs)
	t.Logf("3 regions, %s: %d processes ready in %v", counts, len(procs), bed.StartedIn.Round(time.Millisecond))
	clients := map[string]pulsar.Client{}
	for _, r := range bed.Regions {
		for _, l := range []*Link{r.Brokers[0].Link, r.Brokers[0].WebLink} {
			if err := l.SetShape(Shape{Latency: wanLatency}); err != nil {
				t.Fatal(err)
			}
		}
		clients[r.Name] = NewClient(t, r.ServiceURL())
	}
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, soakTenant, global.TenantInfo{AllowedClusters: soakRegions}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateNamespace(ctx, soakTenant, "all", global.Policies{ReplicationClusters: soakRegions}); err != nil {
		t.Fatal(err)
	}
	for _, region := range soakRegions {
		waitProducer(ctx, t, clients[region], "persistent://"+soakNamespace+"/probe")
	}

	topic := "persistent://" + soakNamespace + "/soak"
	var consumers []*lagConsumer
	for _, region := range soakRegions {
		lc, err := startLagConsumer(ctx, clients[region], region, topic)
		if err != nil {
			t.Fatal(err)
		}
		defer lc.Stop()
		consumers = append(consumers, lc)
	}
	rates := measureMaxRate(ctx, t, clients, topic, consumers)
	maxRate := min(rates.published, rates.delivered)
	half := maxRate / 2
	perRegion := half / float64(len(soakRegions))
	t.Logf("maximum rate: %.0f msg/s of %d bytes published over all regions, %.0f msg/s delivered to every region's consumer; "+
		"the soak runs at half the lesser: %.0f msg/s, %.0f per region", rates.published, soakMsgSize, rates.delivered, half, perRegion)
	if perRegion < 1 {
		t.Fatalf("a maximum rate of %.1f msg/s leaves nothing to soak at", maxRate)
	}

	var producers []*countingProducer
	interval := time.Duration(float64(time.Second) / perRegion)
	for _, region := range soakRegions {
		cp, err := startCountingProducer(ctx, clients[region], region, topic, region+"-soak", interval)
		if err != nil {
			t.Fatal(err)
		}
		producers = append(producers, cp)
	}
	series := runSoak(ctx, t, plan, procs, producers, consumers)
	for _, cp := range producers {
		if err := cp.Stop(ctx); err != nil {
			t.Errorf("%s: flush: %v", cp.name, err)
		}
		if n := cp.failed.Load(); n > 0 {
			t.Errorf("%s: %d sends failed, the first: %s", cp.name, n, *cp.firstErr.Load())
		}
	}
	saveSamples(t, series)
	trends := judgeSoak(t, plan, procs, series)
	drawSoak(t, procs, series)
	writeSoakNote(t, soakNote{plan: plan, rates: rates, half: half, counts: counts, procs: procs, trends: trends, series: series})
}

// processCounts says how many processes of each kind the bed runs.
func processCounts(procs []bedProcess) string {
	n := map[string]int{}
	for _, p := range procs {
		n[p.kind]++
	}
	return fmt.Sprintf("%d etcd members (1 global, 1 per region), %d bookies, %d brokers, %d replicator workers",
		n["etcd"], n["bookie"], n["broker"], n["replicator"])
}

// maxRates are the rates of the unpaced publishing at the start, in
// msg/s: the receipts of every region's producer together, and the
// arrivals at the slowest region's consumer, which receives every
// region's messages. The second is what the whole path (publish,
// replication, delivery) carries, and is the lesser when replication or
// delivery is the bottleneck.
type maxRates struct{ published, delivered float64 }

// measureMaxRate publishes unpaced from every region at once to topic,
// which consumers receive, for soakMaxRateWindow, and measures the rates
// after the first soakMaxRateSkip. Then it waits until every consumer has
// received all of it (a backlog left behind would be drained during the
// soak and look like its load).
func measureMaxRate(ctx context.Context, t *testing.T, clients map[string]pulsar.Client, topic string, consumers []*lagConsumer) maxRates {
	t.Helper()
	var ps []*countingProducer
	for _, region := range soakRegions {
		cp, err := startCountingProducer(ctx, clients[region], region, topic, region+"-max", 0)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, cp)
	}
	acked := func() (n int64) {
		for _, cp := range ps {
			n += cp.acked.Load()
		}
		return n
	}
	slowest := func() int64 {
		least := int64(-1)
		for _, lc := range consumers {
			if n := lc.receivedSoFar(); least < 0 || n < least {
				least = n
			}
		}
		return least
	}
	sleep(ctx, t, soakMaxRateSkip)
	fromAcked, fromReceived, began := acked(), slowest(), time.Now()
	sleep(ctx, t, soakMaxRateWindow-soakMaxRateSkip)
	window := time.Since(began).Seconds()
	rates := maxRates{published: float64(acked()-fromAcked) / window, delivered: float64(slowest()-fromReceived) / window}
	for _, cp := range ps {
		if err := cp.Stop(ctx); err != nil {
			t.Errorf("%s: flush: %v", cp.name, err)
		}
		if n := cp.failed.Load(); n > 0 {
			t.Errorf("%s: %d sends failed, the first: %s", cp.name, n, *cp.firstErr.Load())
		}
	}
	total := acked()
	drained := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for slowest() < total {
		select {
		case <-ctx.Done():
			t.Fatalf("the consumers never received the %d messages of the maximum rate: the slowest has %d: %v", total, slowest(), ctx.Err())
		case <-tick.C:
		}
	}
	for _, lc := range consumers {
		lc.takeWindow() // the burst's lags are not the soak's
	}
	t.Logf("maximum rate: %d messages published in %v; every consumer had them all %v later", total, soakMaxRateWindow, time.Since(drained).Round(time.Second))
	return rates
}

// runSoak samples every process and the load every soakSampleEvery until
// the plan's duration has passed.
func runSoak(ctx context.Context, t *testing.T, plan soakPlan, procs []bedProcess, producers []*countingProducer, consumers []*lagConsumer) soakSeries {
	t.Helper()
	s := soakSeries{resources: map[string]map[string][]Sample{}, missed: map[string]int{}, rate: map[string][]Sample{},
		lagP50: map[string][]Sample{}, lagP99: map[string][]Sample{}}
	began := time.Now()
	lastAcked := map[string]int64{}
	lastAt := began
	tick := time.NewTicker(soakSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("the soak did not finish: %v", ctx.Err())
		case <-tick.C:
		}
		now := time.Now()
		at := now.Sub(began)
		for _, p := range procs {
			select {
			case <-p.Exited():
				t.Fatalf("%s exited during the soak, at %v: %v", p.Name, at.Round(time.Second), p.ExitErr())
			default:
			}
		}
		for i, r := range sampleAll(ctx, procs) {
			p := procs[i]
			if r.err != nil {
				s.missed[p.Name]++
				t.Logf("sample at %v: %v", at.Round(time.Second), r.err)
				continue
			}
			if s.resources[p.Name] == nil {
				s.resources[p.Name] = map[string][]Sample{}
			}
			for name, v := range r.values {
				s.resources[p.Name][name] = append(s.resources[p.Name][name], Sample{At: r.at.Sub(began), Value: v})
			}
		}
		s.rounds++
		var line []string
		for _, cp := range producers {
			acked := cp.acked.Load()
			rate := float64(acked-lastAcked[cp.region]) / now.Sub(lastAt).Seconds()
			lastAcked[cp.region] = acked
			s.rate[cp.region] = append(s.rate[cp.region], Sample{At: at, Value: rate})
			line = append(line, fmt.Sprintf("%s %.0f msg/s", cp.region, rate))
		}
		for _, lc := range consumers {
			received, lags := lc.takeWindow()
			p50, p99 := percentile(lags, 0.5), percentile(lags, 0.99)
			s.lagP50[lc.region] = append(s.lagP50[lc.region], Sample{At: at, Value: float64(p50) / float64(time.Millisecond)})
			s.lagP99[lc.region] = append(s.lagP99[lc.region], Sample{At: at, Value: float64(p99) / float64(time.Millisecond)})
			line = append(line, fmt.Sprintf("into %s lag p50 %s p99 %s (%d received)", lc.region, ms(p50), ms(p99), received))
		}
		lastAt = now
		t.Logf("%v: published %s", at.Round(time.Second), strings.Join(line, ", "))
		if at >= plan.duration {
			return s
		}
	}
}

// soakTrend is one resource of one process, judged.
type soakTrend struct {
	Trend
	err error
}

// movingSeries are the resources of a replicator that follow its tasks:
// a region's workers share its tasks by lease, and a task that moves
// (a lease lost on a slow etcd, say) takes its goroutines and
// connections from one worker to another. They are judged on the sum of
// the region's workers; each worker's own trend is only printed.
var movingSeries = map[string]bool{seriesGoroutines: true, seriesFDs: true}

// replicatorsOf names the sum of region's replicator workers in the
// judgement and the table.
func replicatorsOf(region string) string { return region + "-replicators (sum)" }

// judgeSoak fits every resource series after the warm-up, prints every
// slope, and fails the test for each that projects soakMaxGrowth or more
// (for a replicator's movingSeries, the region's sum).
func judgeSoak(t *testing.T, plan soakPlan, procs []bedProcess, s soakSeries) map[string]map[string]soakTrend {
	t.Helper()
	out := map[string]map[string]soakTrend{}
	// notJudged is why a series is printed and not judged; "" when it is
	// judged.
	judge := func(name, resource string, samples []Sample, notJudged string) {
		tr, err := TrendSince(samples, plan.warmUp)
		if out[name] == nil {
			out[name] = map[string]soakTrend{}
		}
		out[name][resource] = soakTrend{tr, err}
		if err != nil {
			t.Errorf("%s %s: %v", name, resource, err)
			return
		}
		note := ""
		if notJudged != "" {
			note = " (" + notJudged + ")"
		}
		t.Logf("%s %s: %.4g at %v, %+.4g per hour: %+.2f ± %.2f%%/h (two standard errors) over %d samples%s",
			name, resource, tr.Start, plan.warmUp, tr.PerHour, 100*tr.Growth, 200*tr.GrowthStdErr, tr.Samples, note)
		if notJudged == "" && tr.Growth >= soakMaxGrowth {
			clear := "clear of the noise"
			if tr.Growth-2*tr.GrowthStdErr < soakMaxGrowth {
				clear = "within two standard errors of it"
			}
			t.Errorf("%s %s grows %.2f ± %.2f%% per hour (%+.4g/h from %.4g at %v), the bound is %.0f%%: %s",
				name, resource, 100*tr.Growth, 200*tr.GrowthStdErr, tr.PerHour, tr.Start, plan.warmUp, 100*soakMaxGrowth, clear)
		}
	}
	sums := map[string]map[string][]Sample{} // region's replicators → resource → summed samples
	for _, p := range procs {
		if missed := s.missed[p.Name]; missed*10 > s.rounds {
			t.Errorf("%s: %d of %d samples failed (see the log): too few to judge its trends", p.Name, missed, s.rounds)
		}
		for _, resource := range soakResources {
			samples, ok := s.resources[p.Name][resource]
			if !ok {
				continue
			}
			moving := p.kind == "replicator" && movingSeries[resource]
			notJudged := ""
			switch {
			case resource == seriesRSS:
				notJudged = "with file pages: judged by its anonymous part"
			case resource == seriesLiveHeap:
				notJudged = "printed, to tell a leak from the runtime's slack"
			case moving:
				notJudged = "moves with tasks: judged on the region's sum"
			}
			judge(p.Name, resource, samples, notJudged)
			if moving {
				sum := replicatorsOf(p.region)
				if sums[sum] == nil {
					sums[sum] = map[string][]Sample{}
				}
				sums[sum][resource] = addSamples(sums[sum][resource], samples)
			}
		}
	}
	for _, region := range soakRegions {
		for resource, samples := range sums[replicatorsOf(region)] {
			judge(replicatorsOf(region), resource, samples, "")
		}
	}
	// The memory classes are parts of the anonymous RSS, some near zero,
	// so their slopes are printed in bytes per hour, not relative.
	for _, p := range procs {
		for _, class := range soakMemoryClasses {
			samples, ok := s.resources[p.Name][class.name]
			if !ok {
				continue
			}
			tr, err := TrendSince(samples, plan.warmUp)
			if err != nil && tr.Samples == 0 {
				t.Errorf("%s %s: %v", p.Name, class.name, err)
				continue
			}
			out[p.Name][class.name] = soakTrend{Trend: tr}
			t.Logf("%s %s: %.2f MiB at %v, %+.3f ± %.3f MiB/h (part of the anonymous RSS, not judged)",
				p.Name, class.name, tr.Start/(1<<20), plan.warmUp, tr.PerHour/(1<<20), 2*tr.StdErr/(1<<20))
		}
	}
	return out
}

// addSamples adds b to a sample by sample (the i-th of one round to the
// i-th of the same round), at a's times; a nil a is b.
func addSamples(a, b []Sample) []Sample {
	if a == nil {
		return slices.Clone(b)
	}
	n := min(len(a), len(b))
	out := slices.Clone(a[:n])
	for i := range out {
		out[i].Value += b[i].Value
	}
	return out
}

// saveSamples writes every process's samples as JSON to a file in the
// temporary folder, for a reader who wants to fit them another way; the
// bed's folder is removed after a passing run.
func saveSamples(t *testing.T, s soakSeries) {
	t.Helper()
	out, err := json.Marshal(s.resources)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("meridian-soak-samples-%s.json", time.Now().UTC().Format("20060102T150405")))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("every process's samples (JSON, durations in ns): %s", path)
}

// soakImages are the charts' files, under docs/img, by resource.
var soakImages = []struct{ resource, file, title, unit string }{
	{seriesRSSAnon, "soak-rss-anon.png", "anonymous RSS by process kind (sum)", "MiB"},
	{seriesRSS, "soak-rss.png", "RSS by process kind (sum)", "MiB"},
	{seriesGoroutines, "soak-goroutines.png", "Goroutines by process kind (sum)", "goroutines"},
	{seriesFDs, "soak-fds.png", "Open files by process kind (sum)", "open files"},
	{seriesEtcdDB, "soak-etcd-db.png", "etcd dbSizeInUse by member", "MiB"},
}

// soakDocs is the docs folder, from the e2e package's directory.
const soakDocs = "../docs"

// drawSoak draws one chart per resource (a line per process kind, summed,
// or per etcd member for the database) and the load (rate and lag) into
// docs/img.
func drawSoak(t *testing.T, procs []bedProcess, s soakSeries) {
	t.Helper()
	var kinds []string // in the order Bed.processes lists them
	for _, p := range procs {
		if !slices.Contains(kinds, p.kind) {
			kinds = append(kinds, p.kind)
		}
	}
	for _, img := range soakImages {
		scale := 1.0
		if img.unit == "MiB" {
			scale = 1.0 / (1 << 20)
		}
		var lines []plot.Series
		if img.resource == seriesEtcdDB {
			for _, p := range procs {
				if samples, ok := s.resources[p.Name][img.resource]; ok {
					lines = append(lines, plot.Series{Name: p.Name, Points: points(samples, scale)})
				}
			}
		} else {
			for _, kind := range kinds {
				var sum []Sample
				members := 0
				for _, p := range procs {
					if p.kind != kind {
						continue
					}
					members++
					for i, smp := range s.resources[p.Name][img.resource] {
						if i == len(sum) {
							sum = append(sum, Sample{At: smp.At})
						}
						sum[i].Value += smp.Value
					}
				}
				lines = append(lines, plot.Series{Name: fmt.Sprintf("%s ×%d", kind, members), Points: points(sum, scale)})
			}
		}
		saveChart(t, img.file, plot.Chart{Title: "Soak: " + img.title, XLabel: "minutes", YLabel: img.unit, Series: lines})
	}
	var rate, lag []plot.Series
	for _, region := range soakRegions {
		rate = append(rate, plot.Series{Name: "from " + region, Points: points(s.rate[region], 1)})
		lag = append(lag, plot.Series{Name: "into " + region + " p99", Points: points(s.lagP99[region], 1)})
	}
	saveChart(t, "soak-rate.png", plot.Chart{Title: "Soak: publish rate (receipts) per region", XLabel: "minutes", YLabel: "msg/s", Series: rate})
	saveChart(t, "soak-lag.png", plot.Chart{Title: "Soak: replication lag p99 per destination", XLabel: "minutes", YLabel: "ms", Series: lag})
}

func saveChart(t *testing.T, file string, c plot.Chart) {
	t.Helper()
	path := filepath.Join(soakDocs, "img", file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.SavePNG(path); err != nil {
		t.Error(err)
		return
	}
	t.Logf("wrote %s", path)
}

// points turns samples into a chart's points: minutes, value × scale.
func points(samples []Sample, scale float64) []plot.Point {
	out := make([]plot.Point, len(samples))
	for i, s := range samples {
		out[i] = plot.Point{X: s.At.Minutes(), Y: s.Value * scale}
	}
	return out
}

// soakNote is what the soak's section of docs/BENCHMARKS.md reports.
type soakNote struct {
	plan   soakPlan
	rates  maxRates
	half   float64
	counts string
	procs  []bedProcess
	trends map[string]map[string]soakTrend
	series soakSeries
}

// writeSoakNote writes the run's figures and the table of slopes into
// docs/BENCHMARKS.md, between its <!-- soak --> markers.
func writeSoakNote(t *testing.T, n soakNote) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`MERIDIAN_SOAK=1 go test -tags e2e -run 'TestSoak$' -v -timeout 60m ./e2e/`")
	fmt.Fprintf(&b, " (`MERIDIAN_SOAK_DURATION=5m` shortens it). This run: %v, of which the first %v are warm-up left out of the fit.\n\n", n.plan.duration, n.plan.warmUp)
	fmt.Fprintf(&b, "Three regions, %s (%d processes), 20 ms one way between regions, one namespace replicated over all three, "+
		"one producer and one consumer per region on one topic, %d-byte messages. Ledgers roll over at 64 MB or 1 minute and bookies "+
		"collect deleted ledgers every 30 s from 64 MiB journal files, so ledgers are created, consumed and deleted throughout the run; "+
		"etcd keeps 1 minute of revision history (`--auto-compaction-retention 1m`; the default hour would make dbSizeInUse grow by design "+
		"through a 30-minute run).\n\n", n.counts, len(n.procs), soakMsgSize)
	fmt.Fprintf(&b, "Maximum rate, measured at the start with every region publishing unpaced at once for %v (the last %v counted): "+
		"**%.0f msg/s** published (receipts, all regions together), **%.0f msg/s** delivered to the slowest region's consumer "+
		"(each consumer receives every region's messages). The soak publishes at half the lesser: **%.0f msg/s** (%.0f per region), "+
		"paced by the clock, once every consumer has received the whole burst.\n\n",
		soakMaxRateWindow, soakMaxRateWindow-soakMaxRateSkip, n.rates.published, n.rates.delivered, n.half, n.half/float64(len(soakRegions)))
	missed := 0
	for _, m := range n.series.missed {
		missed += m
	}
	fmt.Fprintf(&b, "Samples: %d rounds of %d processes, %d process samples missed (a scrape past its 20 s timeout on the loaded machine).\n\n",
		n.series.rounds, len(n.procs), missed)
	fmt.Fprintf(&b, "Load over the run (after the warm-up, mean of the %v windows): %s.\n\n", soakSampleEvery, loadSummary(n.plan, n.series))
	fmt.Fprintf(&b, "Every process sampled every %v: anonymous RSS (/proc/PID/status RssAnon: the heap, stacks and runtime, "+
		"where a leak shows), RSS (VmRSS, shown, not judged: its file pages are the binary's code, paged in as it first runs, "+
		"and etcd's mapped database), the live heap of Meridian's own processes (go_gc_heap_live_bytes, what the last GC found "+
		"reachable; shown, not judged), goroutines (go_goroutines on its /metrics), "+
		"open files (/proc/PID/fd) and, for etcd, etcd_mvcc_db_total_size_in_use_in_bytes (dbSizeInUse). Each cell is the fitted "+
		"value at the end of the warm-up and the projected growth per hour (slope × 1 h / that value) ± two standard errors of the slope "+
		"(from the scatter about the line, widened for the residuals' lag-1 autocorrelation); the bound is %.0f%% per hour. "+
		"A replicator's goroutines and open files follow its tasks, which move between the region's workers by lease, so they are "+
		"judged on the region's sum (the rows \"(sum)\"); each worker's own figure is shown as well.\n\n",
		soakSampleEvery, 100*soakMaxGrowth)
	b.WriteString("| process | anonymous RSS | RSS (not judged) | live heap (not judged) | goroutines | open files | dbSizeInUse |\n|---|---|---|---|---|---|---|\n")
	var rows []string
	for _, p := range n.procs {
		rows = append(rows, p.Name)
	}
	for _, region := range soakRegions {
		rows = append(rows, replicatorsOf(region))
	}
	for _, proc := range rows {
		row := []string{proc}
		for _, name := range soakResources {
			tr, ok := n.trends[proc][name]
			switch {
			case !ok:
				row = append(row, "")
			case tr.err != nil:
				row = append(row, "no fit")
			case name == seriesRSS || name == seriesRSSAnon || name == seriesLiveHeap || name == seriesEtcdDB:
				row = append(row, fmt.Sprintf("%.1f MiB, %+.2f ± %.2f%%/h", tr.Start/(1<<20), 100*tr.Growth, 200*tr.GrowthStdErr))
			default:
				row = append(row, fmt.Sprintf("%.0f, %+.2f ± %.2f%%/h", tr.Start, 100*tr.Growth, 200*tr.GrowthStdErr))
			}
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	b.WriteString("\nWhere the anonymous RSS went: the Go runtime's own accounts of its memory (go_memstats_* on each /metrics), " +
		"fitted the same way, each cell the value at the end of the warm-up and the slope ± two standard errors, in MiB per hour. " +
		"Heap objects are the allocated objects (the live and the dead not yet swept); heap unused, the free slots of spans that hold " +
		"objects (fragmentation); heap free, the free spans the runtime keeps rather than return to the OS; runtime metadata, its span, " +
		"cache, GC and profiler structures; bookie index, pebble's block cache in use and memtables as allocated " +
		"(meridian_bookie_index_memory_bytes), which the bed's build without cgo allocates in the Go heap, so they are also counted in heap objects.\n\n")
	b.WriteString("| process | anonymous RSS |")
	for _, class := range soakMemoryClasses {
		b.WriteString(" " + class.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(soakMemoryClasses)) + "\n")
	for _, p := range n.procs {
		row := []string{p.Name}
		for _, name := range append([]string{seriesRSSAnon}, memoryClassNames()...) {
			if tr, ok := n.trends[p.Name][name]; ok && tr.Samples > 0 {
				row = append(row, fmt.Sprintf("%.1f, %+.2f ± %.2f", tr.Start/(1<<20), tr.PerHour/(1<<20), 2*tr.StdErr/(1<<20)))
			} else {
				row = append(row, "")
			}
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
	}
	b.WriteString("\n![anonymous RSS](img/soak-rss-anon.png)\n![RSS](img/soak-rss.png)\n![goroutines](img/soak-goroutines.png)\n![open files](img/soak-fds.png)\n" +
		"![etcd dbSizeInUse](img/soak-etcd-db.png)\n![publish rate](img/soak-rate.png)\n![replication lag](img/soak-lag.png)\n")
	path := filepath.Join(soakDocs, "BENCHMARKS.md")
	if err := WriteDocSection(path, "soak", b.String()); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the soak's section of %s", path)
}

// loadSummary is the mean publish rate per region and the mean of the
// windows' lag p50 and p99 per destination, after the warm-up.
func loadSummary(plan soakPlan, s soakSeries) string {
	mean := func(samples []Sample) float64 {
		sum, n := 0.0, 0
		for _, smp := range samples {
			if smp.At >= plan.warmUp {
				sum += smp.Value
				n++
			}
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	var parts []string
	for _, region := range soakRegions {
		parts = append(parts, fmt.Sprintf("%s publishes %.0f msg/s", region, mean(s.rate[region])))
	}
	for _, region := range soakRegions {
		parts = append(parts, fmt.Sprintf("lag into %s p50 %.0f ms, p99 %.0f ms", region, mean(s.lagP50[region]), mean(s.lagP99[region])))
	}
	return strings.Join(parts, "; ")
}
