//go:build e2e

package e2e

import (
	"context"
	"errors"
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
	"github.com/meridian-mq/meridian/global"
)

// The automatic failover scenario's settings: the brokers' failover
// session and pass (--failover-*), and the namespace's delay.
const (
	autoFoSessionTTL = 4 * time.Second
	autoFoInterval   = 500 * time.Millisecond
	autoFoDelay      = 5 * time.Second
)

// cappedBackoff is the reconnect backoff the README recommends for
// failover: doubling from 100 ms, at most a second (pulsar-client-go's
// default goes to 60 s).
type cappedBackoff struct{ next time.Duration }

func (b *cappedBackoff) Next() time.Duration {
	b.next = min(2*max(b.next, 50*time.Millisecond), time.Second)
	return b.next
}
func (b *cappedBackoff) IsMaxBackoffReached() bool { return false }
func (b *cappedBackoff) Reset()                    { b.next = 0 }

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
// each) whose global store has one member in each region, as production
// lays it out (BedConfig.GlobalMembers), with namespace fo/ns replicated
// to all three, r1 active, r2 then r3 its fallback, and automatic failover
// after autoFoDelay. A producer and a Shared consumer of a replicated
// subscription, on a service URL listing every region's broker with the
// README's client settings, run at 100 msg/s throughout. Four faults of
// r1, each healed and followed by a planned switch back to r1:
//   - every process of r1 SIGKILLed, its global member included, then
//     restarted;
//   - r1 cut off from the other regions, its global member included
//     (Bed.CutRegion): r1 loses the global store too;
//   - r1's brokers cut off from the other regions, its member still in
//     the global store (Bed.CutBrokers);
//   - r1 cut off from the global store only (Bed.CutGlobal).
//
// Each must switch to r2, and r2 must serve the consumer, with r1 having
// delivered nothing after r2's first delivery. At the end every
// acknowledged message has been delivered; it reports the switch and
// serve times and the duplicates.
func TestRegionFailoverAutomatic(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	args := []string{"--failover-session-ttl", autoFoSessionTTL.String(), "--failover-margin", "1s",
		"--failover-interval", autoFoInterval.String(), "--failover-probe-timeout", "1s"}
	var regions []RegionConfig
	for _, name := range []string{"r1", "r2", "r3"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 2, Brokers: 1, Replicators: 1, BrokerArgs: args})
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true, GlobalMembers: 3, LocalClients: true})
	var hosts []string
	for _, r := range bed.Regions {
		for _, l := range r.InboundLinks() {
			if err := l.SetShape(Shape{Latency: wanLatency}); err != nil {
				t.Fatal(err)
			}
		}
		hosts = append(hosts, r.Brokers[0].Link.Addr())
	}
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, "fo", global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}); err != nil {
		t.Fatal(err)
	}
	policies := global.Policies{ReplicationClusters: []string{"r1", "r2", "r3"}, ActiveRegion: "r1"}
	policies.SetFallbackRegions([]string{"r2", "r3"})
	policies.SetAutoFailover(&global.AutoFailover{DelaySeconds: int(autoFoDelay / time.Second)})
	if _, err := gs.CreateNamespace(ctx, "fo", "ns", policies); err != nil {
		t.Fatal(err)
	}
	regionOf := map[int]string{}
	for _, r := range bed.Regions {
		n, err := gs.RegionNumber(ctx, r.Name)
		if err != nil {
			t.Fatal(err)
		}
		regionOf[n] = r.Name
	}

	const topic = "persistent://fo/ns/orders"
	// The README's client settings for failover, or pulsar-client-go's
	// defaults with $MERIDIAN_E2E_FAILOVER_CLIENT=default.
	clientOpts, consumerBackoff := pulsar.ClientOptions{KeepAliveInterval: 2 * time.Second}, func() backoff.Policy { return &cappedBackoff{} }
	clientSettings := "keep-alive 2 s, reconnect backoff capped at 1 s"
	if os.Getenv("MERIDIAN_E2E_FAILOVER_CLIENT") == "default" {
		clientOpts, consumerBackoff, clientSettings = pulsar.ClientOptions{}, nil, "pulsar-client-go's defaults"
	}
	client := NewClientWith(t, "pulsar://"+strings.Join(hosts, ","), clientOpts)
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
	r1Store := bed.Dial(ctx, r1.EtcdEndpoints())
	r1Processes := func() []*Process {
		out := append([]*Process{}, r1.Etcd...)
		out = append(out, r1.GlobalMember)
		out = append(out, r1.Bookies...)
		out = append(out, r1.Brokers[0].Process)
		return append(out, r1.Replicators...)
	}
	faults := []struct {
		name        string
		fault, heal func()
	}{
		{"SIGKILL of r1", func() {
			for _, p := range r1Processes() {
				p.Kill()
			}
		}, func() {
			for _, p := range r1Processes() {
				if slices.Contains(r1.Replicators, p) {
					// A replicator refuses to start while its previous
					// run's registration stands (its lease, renewed to a
					// full TTL by the etcd's restart, has not expired).
					key := meta.RegionKey("r1", "replicator-workers", p.Name)
					waitUntil(ctx, t, time.Minute, "the killed replicator's registration to expire", func() bool {
						_, err := r1Store.Get(ctx, key)
						return errors.Is(err, meta.ErrNotFound)
					})
				}
				p.Restart(ctx)
			}
		}},
		{"r1 cut off, its global member included", func() { bed.CutRegion("r1") }, func() { bed.RestoreRegion("r1") }},
		{"r1's brokers cut off from the other regions", func() { bed.CutBrokers("r1") }, func() { bed.RestoreRegion("r1") }},
		{"r1 cut off from the global store", func() { bed.CutGlobal("r1") }, func() { bed.RestoreGlobal("r1") }},
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
		line := fmt.Sprintf("%s: switched %v after the fault (wait %v), r2 served %v after it",
			f.name, switchedAt.Sub(faultAt).Round(10*time.Millisecond), time.Duration(sw.DispatchWaitMillis)*time.Millisecond,
			served.Sub(faultAt).Round(10*time.Millisecond))
		if !lastR1.IsZero() {
			line += fmt.Sprintf(", r1's last delivery %v after the fault and %v before r2's first",
				lastR1.Sub(faultAt).Round(time.Millisecond), served.Sub(lastR1).Round(time.Millisecond))
		}
		t.Log(line)
		report = append(report, line)
		if bound := autoFoDelay + autoFoSessionTTL + 5*time.Second; consumerBackoff != nil && served.Sub(faultAt) > bound {
			t.Errorf("%s: r2 served %v after the fault, beyond delay + session TTL + 5 s = %v", f.name, served.Sub(faultAt), bound)
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
	acked := map[Message]bool{}
	for _, s := range rec.History().Sends {
		if s.Acknowledged() {
			acked[s.Message] = true
		}
	}
	var lost []Message
	waitUntil(ctx, t, 2*time.Minute, "every acknowledged message delivered", func() bool {
		got := map[Message]bool{}
		for _, d := range c.since(time.Time{}) {
			got[d.msg] = true
		}
		lost = lost[:0]
		for m := range acked {
			if !got[m] {
				lost = append(lost, m)
			}
		}
		return len(lost) == 0
	})
	// Each delivery of a message after its first, counted in the phase it
	// fell in: the duplicate window of each fault and each switch back.
	seen, dups := map[Message]bool{}, make([]int, len(phases))
	for _, d := range c.since(time.Time{}) {
		if seen[d.msg] {
			i := len(phases) - 1
			for d.at.Before(phases[i].start) {
				i--
			}
			dups[i]++
		}
		seen[d.msg] = true
	}
	total := 0
	for i, ph := range phases {
		report = append(report, fmt.Sprintf("delivered again during %s: %d (%.1f s of traffic)", ph.name, dups[i], float64(dups[i])/100))
		total += dups[i]
	}
	t.Logf("automatic failover, 3 regions, a global member in each, 20 ms links, delay %v, session %v, 100 msg/s, clients: %s:\n\t%s\n\t%d acknowledged messages, 0 lost, %d deliveries again in all",
		autoFoDelay, autoFoSessionTTL, clientSettings, strings.Join(report, "\n\t"), len(acked), total)
}
