//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsar/backoff"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/drill"
	"github.com/meridian-mq/meridian/global"
)

// The automatic failover scenario's settings: the brokers' failover
// session and pass (--failover-*), and the namespace's delay.
const (
	autoFoSessionTTL = 4 * time.Second
	autoFoInterval   = 500 * time.Millisecond
	autoFoDelay      = 5 * time.Second
)

// foDelivery is one message the failover scenario's consumer received:
// which producer's message, the region whose ledger it came from (the
// region bits of its ledger id), and when.
type foDelivery struct {
	msg    Message
	region string
	at     time.Time
}

// foConsumer receives a replicated subscription and records every
// delivery; its receiver queue holds one message, so a delivery's time is
// close to its dispatch.
type foConsumer struct {
	mu         sync.Mutex
	deliveries []foDelivery
}

func (c *foConsumer) since(t time.Time) []foDelivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []foDelivery
	for _, d := range c.deliveries {
		if !d.at.Before(t) {
			out = append(out, d)
		}
	}
	return out
}

// firstFrom is the first delivery from region at or after t.
func (c *foConsumer) firstFrom(region string, t time.Time) (time.Time, bool) {
	for _, d := range c.since(t) {
		if d.region == region {
			return d.at, true
		}
	}
	return time.Time{}, false
}

// TestRegionFailoverAutomatic runs three regions (20 ms links, one broker
// each) with namespace fo/ns replicated to all three, r1 active, r2 then
// r3 its fallback, and automatic failover after autoFoDelay. A producer and a
// Shared consumer of a replicated subscription, on a service URL listing
// every region's broker with the README's client settings, run at
// 100 msg/s throughout. Three faults of r1, each healed and followed by a
// planned switch back to r1:
//   - every process of r1 SIGKILLed, then restarted;
//   - r1 cut off from the other regions (its broker links), the global
//     store still reachable;
//   - r1 cut off from the global store only.
//
// Each must switch to r2, and r2 must serve the consumer within the delay
// + 5 s plus the switch's wait (a session TTL after a revocation, none
// after an expiry), with r1 having delivered nothing after r2's first
// delivery. At the end every
// acknowledged message has been delivered; it reports the switch and
// serve times and the duplicates.
func TestRegionFailoverAutomatic(t *testing.T) { testRegionFailover(t, 0) }

// TestRegionFailoverAutomaticGlobalMembers is TestRegionFailoverAutomatic
// on a global store laid out as production's should be: one member in
// each region, behind the region's links (BedConfig.GlobalMembers). Four
// faults of r1:
//   - every process of r1 SIGKILLed, its global member included, then
//     restarted;
//   - r1 cut off from the other regions, its global member included
//     (Bed.CutRegion): r1 loses the global store too;
//   - r1's brokers cut off from the other regions, its member still in
//     the global store (Bed.CutBrokers);
//   - r1 cut off from the global store only (Bed.CutGlobal).
//
// Before each, r1's member is made the store's leader: the worst case,
// in which the other two must elect a leader, and the new leader extends
// every lease, r1's sessions' included, by an election timeout (etcd's
// lessor.Promote), so r1's sessions outlive r1 by up to
// globalLeaderLoss. The serve bound grows by that much, and by nothing
// else.
func TestRegionFailoverAutomaticGlobalMembers(t *testing.T) { testRegionFailover(t, 3) }

// globalLeaderLoss bounds what losing the global store's leader adds to
// the time until a switch: an election, which starts within one or two
// election timeouts (etcd randomizes it), the new leader's extension of
// every lease by one more, and the deciders' next pass, which is when they
// see the extended sessions gone. The bed's members keep etcd's default
// election timeout, 1 s.
const globalLeaderLoss = 3*time.Second + autoFoInterval

// startAutoFailoverRegions starts three regions whose brokers decide
// failovers at the test's pace (autoFoSessionTTL, autoFoInterval), with
// tenant's namespace "ns" active in r1, falling back to r2 then r3 after
// autoFoDelay.
func startAutoFailoverRegions(ctx context.Context, t *testing.T, globalMembers int, tenant string) threeRegions {
	t.Helper()
	args := []string{"--failover-session-ttl", autoFoSessionTTL.String(), "--failover-margin", "1s",
		"--failover-interval", autoFoInterval.String(), "--failover-probe-timeout", "1s"}
	policies := global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	policies.SetFallbackRegions([]string{"r2", "r3"})
	policies.SetAutoFailover(&global.AutoFailover{DelaySeconds: int(autoFoDelay / time.Second)})
	return startThreeRegions(ctx, t, globalMembers, args, tenant, policies)
}

// testRegionFailover is the automatic failover scenario, on a global store
// of one member outside the regions (globalMembers 0) or of one member in
// each region (3).
func testRegionFailover(t *testing.T, globalMembers int) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	tr := startAutoFailoverRegions(ctx, t, globalMembers, "fo")
	bed, gs, regionOf := tr.bed, tr.gs, tr.regionOf

	const topic = "persistent://fo/ns/orders"
	// The README's client settings for failover, or pulsar-client-go's
	// defaults with $MERIDIAN_E2E_FAILOVER_CLIENT=default.
	clientOpts, consumerBackoff := pulsar.ClientOptions{KeepAliveInterval: 2 * time.Second}, func() backoff.Policy { return &drill.CappedBackoff{Max: time.Second} }
	clientSettings := "keep-alive 2 s, reconnect backoff capped at 1 s"
	if os.Getenv("MERIDIAN_E2E_FAILOVER_CLIENT") == "default" {
		clientOpts, consumerBackoff, clientSettings = pulsar.ClientOptions{}, nil, "pulsar-client-go's defaults"
	}
	client := NewClientWith(t, tr.serviceURL, clientOpts)
	waitProducer(ctx, t, client, topic)
	rec := bed.Recorder()
	c := &foConsumer{}
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		ReplicateSubscriptionState: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize: 1, MessageChannel: make(chan pulsar.ConsumerMessage),
		BackOffPolicyFunc: consumerBackoff})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := cons.Receive(ctx)
			if err != nil {
				return
			}
			d := foDelivery{region: regionOf[ledger.RegionNumberOf(m.ID().LedgerID())], at: time.Now()}
			d.msg, _ = parsePayload(m.Payload())
			c.mu.Lock()
			c.deliveries = append(c.deliveries, d)
			c.mu.Unlock()
			ackRetrying(ctx, cons, m)
		}
	}()
	defer cons.Close()
	p, err := StartProducer(ctx, client, rec, ProducerConfig{Region: "any", Topic: topic, Name: "fo", Interval: 10 * time.Millisecond, PayloadSize: 256})
	if err != nil {
		t.Fatal(err)
	}

	r1 := bed.Region("r1")
	faults := []struct {
		name        string
		fault, heal func()
	}{
		{"SIGKILL of r1", func() {
			for _, p := range r1.Processes() {
				p.Kill()
			}
		}, func() {
			// A replicator restarted at once waits for its previous run's
			// registration to lapse (its lease, renewed to a full TTL by
			// the etcd's restart).
			for _, p := range r1.Processes() {
				p.Restart(ctx)
			}
		}},
		{"r1 cut off from the other regions", func() { bed.CutRegion("r1") }, func() { bed.RestoreRegion("r1") }},
		{"r1 cut off from the global store", func() { bed.CutGlobal("r1") }, func() { bed.RestoreGlobal("r1") }},
	}
	layout, leaderLoss := "one global etcd", time.Duration(0)
	var members map[string]*meta.Etcd
	if globalMembers > 0 {
		faults[0].name = "SIGKILL of r1, its global member included"
		faults[1].name = "r1 cut off, its global member included"
		faults = slices.Insert(faults, 2, faults[1])
		faults[2].name, faults[2].fault = "r1's brokers cut off from the other regions", func() { bed.CutBrokers("r1") }
		layout, leaderLoss = "a global member in each", globalLeaderLoss
		members = map[string]*meta.Etcd{}
		for _, r := range bed.Regions {
			members[r.Name] = bed.Dial(ctx, []string{r.GlobalMember.ClientURL})
		}
	}
	var report []string
	type phase struct {
		name  string
		start time.Time
	}
	phases := []phase{{"before the first fault", time.Time{}}}
	for _, f := range faults {
		start := time.Now()
		waitUntil(ctx, t, 2*time.Minute, "r1 to deliver before: "+f.name, func() bool { _, ok := c.firstFrom("r1", start); return ok })
		if members != nil {
			leadGlobalStore(ctx, t, members, "r1")
		}
		faultAt := time.Now()
		phases = append(phases, phase{f.name, faultAt})
		f.fault()
		var sw global.FailoverSwitch
		waitUntil(ctx, t, 2*time.Minute, "the switch to r2 after: "+f.name, func() bool {
			p, err := gs.Namespace(ctx, "fo", "ns")
			a, _ := p.AutoFailover()
			if err != nil || p.ActiveRegion != "r2" || a.LastSwitch == nil {
				return false
			}
			sw = *a.LastSwitch
			return true
		})
		switchedAt := time.UnixMilli(sw.AtMillis)
		waitUntil(ctx, t, 2*time.Minute, "r2 to deliver after: "+f.name, func() bool { _, ok := c.firstFrom("r2", faultAt); return ok })
		served, _ := c.firstFrom("r2", faultAt)
		var lastR1 time.Time
		for _, d := range c.since(faultAt) {
			if d.region == "r1" {
				lastR1 = d.at
			}
		}
		if !lastR1.IsZero() && !lastR1.Before(served) {
			t.Errorf("%s: r1 delivered at %v, after r2's first delivery at %v", f.name, lastR1, served)
		}
		wait := time.Duration(sw.DispatchWaitMillis) * time.Millisecond
		line := fmt.Sprintf("%s: switched %v after the fault (wait %v), r2 served %v after it",
			f.name, switchedAt.Sub(faultAt).Round(10*time.Millisecond), wait, served.Sub(faultAt).Round(10*time.Millisecond))
		if !lastR1.IsZero() {
			line += fmt.Sprintf(", r1's last delivery %v after the fault and %v before r2's first",
				lastR1.Sub(faultAt).Round(time.Millisecond), served.Sub(lastR1).Round(time.Millisecond))
		}
		t.Log(line)
		report = append(report, line)
		if bound := autoFoDelay + wait + 5*time.Second + leaderLoss; consumerBackoff != nil && served.Sub(faultAt) > bound {
			t.Errorf("%s: r2 served %v after the fault, beyond %v (delay + 5 s + the switch's wait, and the global leader's loss with a member in each region)", f.name, served.Sub(faultAt), bound)
		}

		f.heal()
		// Made active before it holds a failover session again, r1 would
		// be switched away once more after the delay, rightly: its etcd
		// client takes a few seconds to reconnect after a cut.
		waitUntil(ctx, t, 2*time.Minute, "r1's failover session after: "+f.name, func() bool {
			ss, err := gs.FailoverSessions(ctx, "r1")
			return err == nil && len(ss) > 0
		})
		phases = append(phases, phase{"the switch back to r1 after " + f.name, time.Now()})
		if _, _, err := gs.UpdateNamespace(ctx, "fo", "ns", func(p *global.Policies) error {
			p.ActiveRegion = "r1"
			p.SetFallbackRegions([]string{"r2", "r3"})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	back := time.Now()
	waitUntil(ctx, t, 2*time.Minute, "r1 to deliver again", func() bool { _, ok := c.firstFrom("r1", back); return ok })

	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	acked := awaitEveryAcknowledged(ctx, t, rec.History().Sends, func() []Message {
		var got []Message
		for _, d := range c.since(time.Time{}) {
			got = append(got, d.msg)
		}
		return got
	})
	// Each delivery of a message after its first, counted in the phase it
	// fell in: the duplicate window of each fault and each switch back.
	// Those first delivered (and acked) before the phase began are the
	// ones the replicated subscription's last state should have carried.
	type window struct {
		dups, before int
		oldest       time.Duration  // how long before the phase the oldest of those was first delivered
		byRegions    map[string]int // "r1 then r2": the regions of the first delivery and of this one
	}
	first, windows := map[Message]foDelivery{}, make([]window, len(phases))
	for _, d := range c.since(time.Time{}) {
		f, seen := first[d.msg]
		if !seen {
			first[d.msg] = d
			continue
		}
		at := f.at
		i := len(phases) - 1
		for d.at.Before(phases[i].start) {
			i--
		}
		w := &windows[i]
		w.dups++
		if w.byRegions == nil {
			w.byRegions = map[string]int{}
		}
		w.byRegions[f.region+" then "+d.region]++
		if at.Before(phases[i].start) {
			w.before++
			w.oldest = max(w.oldest, phases[i].start.Sub(at))
		}
	}
	total := 0
	for i, ph := range phases {
		w := windows[i]
		line := fmt.Sprintf("delivered again during %s: %d (%.1f s of traffic)", ph.name, w.dups, float64(w.dups)/100)
		if w.before > 0 {
			line += fmt.Sprintf(", %d of them first delivered before it began, the oldest %v before", w.before, w.oldest.Round(time.Millisecond))
		}
		if w.dups > 0 {
			line += fmt.Sprintf(", by region %v", w.byRegions)
		}
		report = append(report, line)
		total += w.dups
	}
	t.Logf("automatic failover, 3 regions, %s, 20 ms links, delay %v, session %v, 100 msg/s, clients: %s:\n\t%s\n\t%d acknowledged messages, 0 lost, %d deliveries again in all",
		layout, autoFoDelay, autoFoSessionTTL, clientSettings, strings.Join(report, "\n\t"), len(acked), total)
}

// leadGlobalStore makes region's member of the global store (one member
// per region; members are clients of each member alone, by region) its
// raft leader: it asks the leader to hand over (etcd's MoveLeader, which
// only the leader takes) until region's member reports that it leads.
func leadGlobalStore(ctx context.Context, t *testing.T, members map[string]*meta.Etcd, region string) {
	t.Helper()
	status := func(name string) (id, leader uint64, err error) {
		eps := members[name].Client().Endpoints()
		st, err := members[name].Client().Status(ctx, eps[0])
		if err != nil {
			return 0, 0, err
		}
		return st.Header.MemberId, st.Leader, nil
	}
	waitUntil(ctx, t, time.Minute, "the global store's leader in "+region, func() bool {
		target, leader, err := status(region)
		if err != nil || target == leader {
			return err == nil
		}
		for name := range members {
			if id, _, err := status(name); err == nil && id == leader {
				mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if _, err := members[name].Client().MoveLeader(mctx, target); err != nil {
					t.Logf("moving the global store's leader from %s to %s: %v", name, region, err)
				}
			}
		}
		return false
	})
}

// threeRegions is the bed of the failover scenarios: regions r1, r2 and
// r3 (1 etcd, 2 bookies, 1 broker, 1 replicator each), wanLatency on
// every link into each region, and a tenant with namespace ns of the
// given policies.
type threeRegions struct {
	bed *Bed
	gs  *global.Store
	// serviceURL lists every region's broker, as failover clients use.
	serviceURL string
	// regionOf names the region of each region number (the high bits of
	// the ledger ids of message ids).
	regionOf map[int]string
}

// startThreeRegions starts the bed with brokerArgs on every broker and,
// with globalMembers 3, a global store of one member per region.
func startThreeRegions(ctx context.Context, t *testing.T, globalMembers int, brokerArgs []string, tenant string, ns global.Policies) threeRegions {
	t.Helper()
	var regions []RegionConfig
	for _, name := range []string{"r1", "r2", "r3"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 2, Brokers: 1, Replicators: 1, BrokerArgs: brokerArgs})
	}
	tr := threeRegions{regionOf: map[int]string{}}
	tr.bed = StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true, GlobalMembers: globalMembers, LocalClients: true})
	var hosts []string
	for _, r := range tr.bed.Regions {
		for _, l := range r.InboundLinks() {
			if err := l.SetShape(Shape{Latency: wanLatency}); err != nil {
				t.Fatal(err)
			}
		}
		hosts = append(hosts, r.Brokers[0].Link.Addr())
	}
	tr.serviceURL = "pulsar://" + strings.Join(hosts, ",")
	tr.gs = tr.bed.GlobalStore(ctx)
	if _, err := tr.gs.CreateTenant(ctx, tenant, global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.gs.CreateNamespace(ctx, tenant, "ns", ns); err != nil {
		t.Fatal(err)
	}
	for _, r := range tr.bed.Regions {
		n, err := tr.gs.RegionNumber(ctx, r.Name)
		if err != nil {
			t.Fatal(err)
		}
		tr.regionOf[n] = r.Name
	}
	return tr
}

// awaitEveryAcknowledged waits until every message of sends whose send
// the broker acknowledged is among the delivered ones, and returns them.
func awaitEveryAcknowledged(ctx context.Context, t *testing.T, sends []Send, delivered func() []Message) map[Message]bool {
	t.Helper()
	acked := map[Message]bool{}
	for _, s := range sends {
		if s.Acknowledged() {
			acked[s.Message] = true
		}
	}
	var lost int
	defer func() {
		if t.Failed() && lost > 0 {
			t.Logf("%d acknowledged messages never delivered", lost)
		}
	}()
	waitUntil(ctx, t, 2*time.Minute, "every acknowledged message delivered", func() bool {
		got := map[Message]bool{}
		for _, m := range delivered() {
			got[m] = true
		}
		lost = 0
		for m := range acked {
			if !got[m] {
				lost++
			}
		}
		return lost == 0
	})
	return acked
}
