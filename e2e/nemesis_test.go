//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// TestNemesis is issue 16's nemesis run: three regions under load and a
// schedule of random faults drawn from a seed (NemesisSchedule), healed
// one by one, then a drain and the full check.
//
// The bed: three regions, each with one etcd member, four bookies (E=3,
// Qw=3, Qa=2: one bookie down or read-only leaves a full ensemble), two
// brokers (lease 4 s) and two replicator workers, and one global etcd
// that every region reaches through its own link; 20 ms one way on every
// broker's links, which carry the replication between regions (the
// test's clients are local to their region: LocalClients). One namespace
// of four bundles, replicated to all three regions, with deduplication
// on and infinite retention (so that the read-back sees every ledger),
// holds four topics. In every region, each topic has a producer (25
// msg/s of 256-byte messages: 100 msg/s per region, 300 msg/s produced
// in all, each stored in three regions) and an Exclusive consumer that
// acks everything, all recorded for the checker.
//
// $MERIDIAN_NEMESIS_SEED replays a seed's schedule (without it the seed
// is drawn from the clock and printed); $MERIDIAN_NEMESIS_DURATION
// shortens the fault phase (default 10m) for development. Run it with
//
//	go test -tags e2e -run 'TestNemesis$' -v -timeout 60m ./e2e/
//
// After the schedule: every process must still be running, the producers
// stop, and the test waits (at most 10 minutes) until every region's
// consumers have acked every acknowledged message of every region, which
// is the replication drained. Then every region's copy of every topic is
// read back and the checker runs with a disruption for each broker fault
// (until nemesisAfterHeal past its heal) and for each bundle hand-off the
// test saw in the ownership keys. It prints the checker's summary and
// each fault with its times and the pauses it caused.
func TestNemesis(t *testing.T) {
	seed := nemesisSeed(t)
	cfg := DefaultNemesisConfig()
	cfg.Duration = nemesisDuration(t)
	faults, err := NemesisSchedule(seed, cfg)
	if err != nil {
		t.Fatalf("nemesis seed %d: %v", seed, err)
	}
	// Registered first, so run last: whatever failed, the seed is in the
	// failure.
	t.Cleanup(func() {
		if t.Failed() {
			t.Errorf("nemesis seed %d failed; replay its schedule with %s=%d", seed, nemesisSeedEnv, seed)
		}
	})
	t.Logf("nemesis seed %d (replay: %s=%d): %d faults over %v (at most %d at once, one per region, %v calm after each in its region):\n%s",
		seed, nemesisSeedEnv, seed, len(faults), cfg.Duration, cfg.MaxConcurrent, cfg.Settle, FormatSchedule(faults))

	ctx, cancel := context.WithTimeout(t.Context(), cfg.Duration+40*time.Minute)
	defer cancel()
	n := startNemesis(ctx, t, seed, cfg)
	applied := n.run(ctx, faults)
	n.checkRunning(ctx)
	h, report := n.finish(ctx, applied)
	t.Logf("nemesis seed %d: checker: %s", seed, report.Summary())
	n.reportFaults(h, applied)
	if !report.OK() {
		t.Errorf("nemesis seed %d: the checker found %d violations (listed above)", seed, len(report.Violations))
	}
}

const (
	// nemesisSeedEnv replays a seed's schedule.
	nemesisSeedEnv = "MERIDIAN_NEMESIS_SEED"
	// nemesisDurationEnv shortens (or lengthens) the fault phase.
	nemesisDurationEnv = "MERIDIAN_NEMESIS_DURATION"
	nemesisTenant      = "nemesis"
	nemesisNamespace   = "all"
	nemesisTopics      = 4
	// nemesisInterval is each producer's time between sends: 25 msg/s.
	nemesisInterval = 40 * time.Millisecond
	nemesisPayload  = 256
	// nemesisTTL is the brokers' ownership lease, given explicitly
	// because BrokerFreeze is drawn against it.
	nemesisTTL = 4 * time.Second
	// nemesisKeepAlive lets the clients notice a frozen broker (see
	// foKeepAlive).
	nemesisKeepAlive = time.Second
	// nemesisRedelivery is the checker's RedeliveryWindow: the cursor
	// persist interval (1 s) plus a round trip, as the other scenarios.
	nemesisRedelivery = 3 * time.Second
	// nemesisReconnect is the checker's ReconnectWindow: how long after a
	// disruption its clients may still be reconnecting on a loaded machine.
	nemesisReconnect = 5 * time.Second
	// nemesisAfterHeal is how long a broker fault counts as a disruption
	// past its heal: the restarted broker may take bundles back (a
	// hand-off), and the clients of the frozen one reconnect.
	nemesisAfterHeal = 10 * time.Second
	// nemesisDrain bounds the wait for the replication to drain, and
	// nemesisDrainPoll is how often it looks (each look copies the whole
	// history).
	nemesisDrain     = 10 * time.Minute
	nemesisDrainPoll = 2 * time.Second
	// nemesisReadBack bounds the read-back of one topic in one region
	// (about 45,000 messages): a reader that stops getting messages
	// fails the run instead of holding it until the test's deadline.
	nemesisReadBack = 5 * time.Minute
	// nemesisSlow is RegionSlow's shape.
	nemesisSlowLatency = 200 * time.Millisecond
	nemesisSlowLoss    = 0.01
	// nemesisOwnersPoll is how often the hand-off watch reads the
	// ownership keys.
	nemesisOwnersPoll = 250 * time.Millisecond
)

// nemesisSeed is $MERIDIAN_NEMESIS_SEED, or one drawn from the clock.
func nemesisSeed(t *testing.T) uint64 {
	env := os.Getenv(nemesisSeedEnv)
	if env == "" {
		return uint64(time.Now().UnixNano())
	}
	seed, err := strconv.ParseUint(env, 10, 64)
	if err != nil {
		t.Fatalf("$%s=%q is not a seed (an unsigned integer): %v", nemesisSeedEnv, env, err)
	}
	return seed
}

// nemesisDuration is $MERIDIAN_NEMESIS_DURATION, or 10 minutes.
func nemesisDuration(t *testing.T) time.Duration {
	env := os.Getenv(nemesisDurationEnv)
	if env == "" {
		return DefaultNemesisConfig().Duration
	}
	d, err := time.ParseDuration(env)
	if err != nil || d <= 0 {
		t.Fatalf("$%s=%q is not a positive duration (e.g. 2m): %v", nemesisDurationEnv, env, err)
	}
	return d
}

// nemesis is the running bed and workload of TestNemesis.
type nemesis struct {
	t       *testing.T
	bed     *Bed
	seed    uint64
	topics  []string
	clients map[string]pulsar.Client // per region, for the consumers and read-backs
	ps      []*Producer
	cs      []*Consumer
	watch   *handoffWatch
	// phase is when the fault phase began: the schedule's offsets are
	// from it.
	phase time.Time
}

// startNemesis starts the bed, the namespace, the hand-off watch and the
// workload, and returns once every producer has a receipt.
func startNemesis(ctx context.Context, t *testing.T, seed uint64, cfg NemesisConfig) *nemesis {
	t.Helper()
	var regions []RegionConfig
	for _, name := range cfg.Regions {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: cfg.Bookies, Brokers: cfg.Brokers,
			Replicators: cfg.Replicators, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, BookieFailpoints: true,
			BrokerArgs: []string{"--ownership-ttl", nemesisTTL.String()}})
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true, LocalClients: true, Seed: seed})
	t.Logf("%d regions (each 1 etcd, %d bookies E=3 Qw=3 Qa=2, %d brokers, %d replicator workers; 1 global etcd) ready in %v",
		len(regions), cfg.Bookies, cfg.Brokers, cfg.Replicators, bed.StartedIn.Round(time.Millisecond))
	if cfg.OwnershipTTL != nemesisTTL {
		t.Fatalf("nemesis seed %d: the schedule is drawn for a %v lease, the brokers run %v", seed, cfg.OwnershipTTL, nemesisTTL)
	}
	n := &nemesis{t: t, bed: bed, seed: seed, clients: map[string]pulsar.Client{}}
	for _, r := range bed.Regions {
		n.setBrokerShape(r, Shape{Latency: wanLatency})
	}

	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, nemesisTenant, global.TenantInfo{AllowedClusters: cfg.Regions}); err != nil {
		t.Fatal(err)
	}
	bundles, err := global.EvenBundlesData(4)
	if err != nil {
		t.Fatal(err)
	}
	// Retention keeps every ledger the consumers have acked, so that the
	// read-back at the end holds all that each region stored: without it
	// the acked ledgers are trimmed and the read-back sees only the last.
	on, keepAll := true, global.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
	if _, err := gs.CreateNamespace(ctx, nemesisTenant, nemesisNamespace, global.Policies{ReplicationClusters: cfg.Regions,
		DeduplicationEnabled: &on, Bundles: &bundles, RetentionPolicies: &keepAll}); err != nil {
		t.Fatal(err)
	}
	for i := range nemesisTopics {
		n.topics = append(n.topics, fmt.Sprintf("persistent://%s/%s/t%d", nemesisTenant, nemesisNamespace, i))
	}

	n.watch = startHandoffWatch(ctx, t, bed)
	opts := pulsar.ClientOptions{KeepAliveInterval: nemesisKeepAlive}
	rec := bed.Recorder()
	producers := map[string]pulsar.Client{}
	for _, r := range bed.Regions {
		producers[r.Name] = NewClientWith(t, r.AllBrokersURL(), opts)
		n.clients[r.Name] = NewClientWith(t, r.AllBrokersURL(), opts)
		WaitDeduplication(ctx, t, producers[r.Name], fmt.Sprintf("persistent://%s/%s/dedup-probe-%s", nemesisTenant, nemesisNamespace, r.Name))
	}
	for _, r := range bed.Regions {
		for i, topic := range n.topics {
			c, err := StartConsumer(ctx, n.clients[r.Name], rec, ConsumerConfig{Region: r.Name, Topic: topic,
				Subscription: "checker", Type: Exclusive, Name: fmt.Sprintf("%s-c%d", r.Name, i)})
			if err != nil {
				t.Fatal(err)
			}
			n.cs = append(n.cs, c)
		}
	}
	for _, r := range bed.Regions {
		for i, topic := range n.topics {
			p, err := StartProducer(ctx, producers[r.Name], rec, ProducerConfig{Region: r.Name, Topic: topic,
				Name: fmt.Sprintf("%s-p%d", r.Name, i), Interval: nemesisInterval, PayloadSize: nemesisPayload})
			if err != nil {
				t.Fatal(err)
			}
			n.ps = append(n.ps, p)
		}
	}
	rec.WaitAcknowledged(ctx, t, len(n.ps)*10, "the workload's first receipts")
	t.Logf("workload: %d producers at %v msg/s each (%d msg/s per region) of %d-byte messages, %d consumers",
		len(n.ps), int(time.Second/nemesisInterval), nemesisTopics*int(time.Second/nemesisInterval), nemesisPayload, len(n.cs))
	return n
}

// setBrokerShape shapes every link (Pulsar and web) of r's brokers.
func (n *nemesis) setBrokerShape(r *Region, s Shape) {
	n.t.Helper()
	for _, brk := range r.Brokers {
		for _, l := range []*Link{brk.Link, brk.WebLink} {
			if err := l.SetShape(s); err != nil {
				n.t.Fatalf("nemesis seed %d: shaping %s: %v", n.seed, l.Name(), err)
			}
		}
	}
}

// appliedFault is a fault as it ran: when it began and when its heal was
// done (a restart's heal is done once the process is ready).
type appliedFault struct {
	Fault
	began, healed time.Time
}

// run applies the schedule from now on: each fault at its time, each heal
// at its end, heals before beginnings due at the same time. An action
// that takes time (a restart waits for its ready line) delays the ones
// behind it; the log and the report give the times they really ran.
func (n *nemesis) run(ctx context.Context, faults []Fault) []appliedFault {
	n.t.Helper()
	type event struct {
		at   time.Duration
		i    int
		heal bool
	}
	var events []event
	for i, f := range faults {
		events = append(events, event{f.At, i, false}, event{f.End(), i, true})
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.heal != b.heal {
			if a.heal {
				return -1
			}
			return 1
		}
		return 0
	})
	applied := make([]appliedFault, len(faults))
	n.phase = time.Now()
	start := n.phase
	for _, e := range events {
		if d := time.Until(start.Add(e.at)); d > 0 {
			sleep(ctx, n.t, d)
		}
		f := faults[e.i]
		applied[e.i].Fault = f
		if e.heal {
			n.heal(ctx, f)
			applied[e.i].healed = time.Now()
			n.t.Logf("+%v healed %d: %s", time.Since(start).Round(100*time.Millisecond), e.i+1, f)
		} else {
			applied[e.i].began = time.Now()
			n.begin(ctx, f)
			n.t.Logf("+%v began %d: %s", time.Since(start).Round(100*time.Millisecond), e.i+1, f)
		}
	}
	return applied
}

// begin injects f.
func (n *nemesis) begin(ctx context.Context, f Fault) {
	n.t.Helper()
	r := n.region(f)
	switch f.Kind {
	case BrokerKill:
		r.Brokers[f.Target].Kill()
	case BrokerFreeze:
		r.Brokers[f.Target].Pause()
	case BookieKill:
		r.Bookies[f.Target].Kill()
	case WorkerKill:
		r.Replicators[f.Target].Kill()
	case BookieFull:
		n.setFailpoints(ctx, r.Bookies[f.Target], "journal-write=enospc")
	case BookieSlowSync:
		n.setFailpoints(ctx, r.Bookies[f.Target], "journal-fsync=delay:"+f.FsyncDelay.String())
	case RegionCut:
		n.bed.CutRegion(r.Name)
	case RegionSlow:
		n.setBrokerShape(r, Shape{Latency: nemesisSlowLatency, Loss: nemesisSlowLoss})
	case GlobalEtcdDown:
		for _, r := range n.bed.Regions {
			r.GlobalLink.Cut()
		}
	default:
		n.t.Fatalf("nemesis seed %d: no way to inject %s", n.seed, f.Kind)
	}
}

// heal ends f.
func (n *nemesis) heal(ctx context.Context, f Fault) {
	n.t.Helper()
	r := n.region(f)
	switch f.Kind {
	case BrokerKill:
		n.restart(ctx, r.Brokers[f.Target].Process)
	case BrokerFreeze:
		r.Brokers[f.Target].Resume()
	case BookieKill:
		n.restart(ctx, r.Bookies[f.Target])
	case WorkerKill:
		n.restart(ctx, r.Replicators[f.Target])
	case BookieFull, BookieSlowSync:
		n.setFailpoints(ctx, r.Bookies[f.Target], "")
	case RegionCut:
		n.bed.RestoreRegion(r.Name)
	case RegionSlow:
		n.setBrokerShape(r, Shape{Latency: wanLatency})
	case GlobalEtcdDown:
		for _, r := range n.bed.Regions {
			r.GlobalLink.Restore()
		}
	default:
		n.t.Fatalf("nemesis seed %d: no way to heal %s", n.seed, f.Kind)
	}
}

// region is f's region; nil for GlobalEtcdDown.
func (n *nemesis) region(f Fault) *Region {
	if f.Region == "" {
		return nil
	}
	return n.bed.Region(f.Region)
}

// restart starts a killed process again on its data and waits until it
// is ready.
func (n *nemesis) restart(ctx context.Context, p *Process) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	from := p.LogSize()
	p.Start()
	p.WaitReady(ctx, from)
}

// setFailpoints arms spec on bookie b ("" clears).
func (n *nemesis) setFailpoints(ctx context.Context, b *Process, spec string) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := b.SetFailpoints(ctx, spec); err != nil {
		n.t.Fatalf("nemesis seed %d: %v", n.seed, err)
	}
}

// checkRunning fails the test for every process that is not running once
// every fault is healed (one that exited by itself), and starts it again,
// so that the check still shows what the rest kept.
func (n *nemesis) checkRunning(ctx context.Context) {
	n.t.Helper()
	procs := []*Process{n.bed.Global}
	for _, r := range n.bed.Regions {
		procs = append(procs, r.Etcd...)
		procs = append(procs, r.Bookies...)
		for _, b := range r.Brokers {
			procs = append(procs, b.Process)
		}
		procs = append(procs, r.Replicators...)
	}
	for _, p := range procs {
		if !p.running() {
			n.t.Errorf("nemesis seed %d: %s is not running after every fault was healed (%v); its log ends:\n%s",
				n.seed, p.Name, p.ExitErr(), p.LogTail(3000))
			n.restart(ctx, p)
		}
	}
}

// finish stops the producers, waits for the replication to drain (every
// consumer of every region has acked every acknowledged send), reads
// every region's copy back and runs the checker.
func (n *nemesis) finish(ctx context.Context, applied []appliedFault) (History, Report) {
	n.t.Helper()
	stopped := time.Now()
	stopProducers(ctx, n.t, n.ps)
	rec := n.bed.Recorder()
	drain, cancel := context.WithTimeout(ctx, nemesisDrain)
	defer cancel()
	rec.WaitAllAckedEvery(drain, n.t, nemesisDrainPoll)
	n.t.Logf("drained: every consumer of every region acked every one of the %d acknowledged sends %v after the producers stopped",
		rec.Acknowledged(), time.Since(stopped).Round(time.Millisecond))
	for _, c := range n.cs {
		c.Stop()
	}
	handoffs := n.watch.stop()
	rules := Rules{Regions: map[string][]string{}, RedeliveryWindow: nemesisRedelivery, ReconnectWindow: nemesisReconnect}
	for _, topic := range n.topics {
		rules.Regions[topic] = slices.Sorted(maps.Keys(n.clients))
		for _, r := range n.bed.Regions {
			read, cancel := context.WithTimeout(ctx, nemesisReadBack)
			err := ReadTopic(read, n.clients[r.Name], rec, r.Name, topic)
			cancel()
			if err != nil {
				n.t.Fatalf("nemesis seed %d: reading back %s in %s: %v", n.seed, topic, r.Name, err)
			}
		}
	}
	for _, a := range applied {
		if a.Kind == BrokerKill || a.Kind == BrokerFreeze {
			rules.Disruptions = append(rules.Disruptions, Disruption{Region: a.Region, Start: a.began, End: a.healed.Add(nemesisAfterHeal)})
		}
	}
	rules.Disruptions = append(rules.Disruptions, handoffs...)
	n.t.Logf("checker rules: %d disruptions (%d broker faults, %d bundle hand-offs seen in the ownership keys), redelivery window %v, reconnect window %v",
		len(rules.Disruptions), len(rules.Disruptions)-len(handoffs), len(handoffs), nemesisRedelivery, nemesisReconnect)
	h := rec.History()
	report := n.bed.Verify(h, rules)
	if report.Stored == 0 {
		n.t.Errorf("nemesis seed %d: nothing was read back", n.seed)
	}
	return h, report
}

// handoffWatch polls every region's ownership keys of the namespace and
// records each change of a bundle's owner (or its lease, or its release)
// as a disruption of that region: a hand-off the schedule did not cause
// directly (the shedder moving a bundle to a restarted broker, a lease
// lost in an etcd stall) excuses a redelivery as the scenarios' hand-offs
// do (handedOff). Its goroutine is stopped by stop.
type handoffWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	seen    []Disruption
	errs    int
	lastErr error
}

// bundleHolder is who holds a bundle's ownership key: empty once released.
type bundleHolder struct {
	broker string
	lease  meta.LeaseID
}

func startHandoffWatch(ctx context.Context, t *testing.T, bed *Bed) *handoffWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &handoffWatch{cancel: cancel}
	for _, r := range bed.Regions {
		store := bed.Dial(ctx, r.EtcdEndpoints())
		prefix := meta.Prefix(meta.RegionKey(r.Name, "owners", nemesisTenant, nemesisNamespace))
		w.wg.Go(func() { w.poll(ctx, store, r.Name, prefix) })
	}
	t.Cleanup(func() { w.stop() })
	return w
}

// poll reads prefix every nemesisOwnersPoll until ctx ends.
func (w *handoffWatch) poll(ctx context.Context, store meta.Store, region, prefix string) {
	held := map[string]bundleHolder{} // every key ever seen, with its last holder
	last := time.Now()
	tick := time.NewTicker(nemesisOwnersPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		kvs, _, err := store.List(ctx, prefix)
		now := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				w.mu.Lock()
				w.errs, w.lastErr = w.errs+1, err
				w.mu.Unlock()
			}
			continue
		}
		current := map[string]bundleHolder{}
		for _, kv := range kvs {
			var o struct {
				BrokerID string `json:"brokerId"`
			}
			if _, err := meta.DecodeJSON(kv.Value, 1, &o); err != nil {
				w.mu.Lock()
				w.errs, w.lastErr = w.errs+1, fmt.Errorf("ownership key %s: %w", kv.Key, err)
				w.mu.Unlock()
			}
			current[kv.Key] = bundleHolder{o.BrokerID, kv.Lease}
		}
		changed := false
		for key, before := range held {
			if holder := current[key]; holder != before {
				changed = true
				held[key] = holder
			}
		}
		for key, h := range current {
			if _, known := held[key]; !known {
				held[key] = h // a first claim: no client had the bundle before
			}
		}
		if changed {
			w.mu.Lock()
			w.seen = append(w.seen, Disruption{Region: region, Start: last, End: now})
			w.mu.Unlock()
		}
		last = now
	}
}

// stop ends the polls and returns the hand-offs seen; calling it again
// returns them again.
func (w *handoffWatch) stop() []Disruption {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// seriesKey names one series of times in a history: a producer's
// receipts, a subscription's deliveries, or the arrivals in a region of
// one producer's messages from another region.
type seriesKey struct {
	kind, region, name string
}

// nemesisSeries are the history's series, each sorted, and the region
// each producer wrote in.
func nemesisSeries(h History) (map[seriesKey][]time.Time, map[string]string) {
	out := map[seriesKey][]time.Time{}
	home := map[string]string{}
	for _, s := range h.Sends {
		home[s.Producer] = s.Region
		if s.Acknowledged() {
			k := seriesKey{"receipt", s.Region, s.Producer}
			out[k] = append(out[k], s.ReceiptAt)
		}
	}
	for _, d := range h.Deliveries {
		k := seriesKey{"delivery", d.Region, d.Topic}
		out[k] = append(out[k], d.At)
		if from := home[d.Producer]; from != "" && from != d.Region {
			k := seriesKey{"arrival", d.Region, d.Producer}
			out[k] = append(out[k], d.At)
		}
	}
	for _, ts := range out {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	}
	return out, home
}

// reportFaults logs each fault with its times and the pauses it caused,
// as the longest gap whose end falls between its beginning and
// nemesisAfterHeal after its heal: in send receipts of its region's
// producers, in deliveries to its region's consumers, and in the arrival
// elsewhere of its region's messages (replication out of it). A fault of
// the global etcd is measured over every region. Faults that overlap
// share their pauses.
func (n *nemesis) reportFaults(h History, applied []appliedFault) {
	n.t.Helper()
	series, home := nemesisSeries(h)
	start := n.phase
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis seed %d: the faults as they ran (offsets from the start of the fault phase) and the pauses, the longest gap in receipts / deliveries / replicated arrivals ending within the fault or %v after its heal:\n", n.seed, nemesisAfterHeal)
	for i, a := range applied {
		until := a.healed.Add(nemesisAfterHeal)
		in := func(region string) bool { return a.Region == "" || region == a.Region }
		var publish, deliver, replicate time.Duration
		for k, ts := range series {
			gap := maxGap(ts, a.began, until)
			switch {
			case k.kind == "receipt" && in(k.region):
				publish = max(publish, gap)
			case k.kind == "delivery" && in(k.region):
				deliver = max(deliver, gap)
			case k.kind == "arrival" && in(home[k.name]):
				replicate = max(replicate, gap)
			}
		}
		fmt.Fprintf(&b, "  %2d. %-24s %-16s planned +%v for %v; began +%v, healed +%v; pauses: receipts %v, deliveries %v, replicated %v\n",
			i+1, a.Kind, a.TargetName(), a.At.Round(time.Second), a.For.Round(time.Second),
			a.began.Sub(start).Round(100*time.Millisecond), a.healed.Sub(start).Round(100*time.Millisecond),
			publish.Round(time.Millisecond), deliver.Round(time.Millisecond), replicate.Round(time.Millisecond))
	}
	n.watch.mu.Lock()
	if n.watch.errs > 0 {
		fmt.Fprintf(&b, "the hand-off watch failed %d reads of the ownership keys (last: %v)\n", n.watch.errs, n.watch.lastErr)
	}
	n.watch.mu.Unlock()
	n.t.Log(b.String())
}
