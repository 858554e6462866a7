//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// The three-region bed of the geo-replication scenarios and what they
// measure it with (arrivals, lags, link bytes, the read-back), shared by
// the scenarios of this package and, through GeoBed, by the side-by-side
// benchmarks (e2e/sidebyside).

const (
	// wanLatency is every inter-region path's one-way latency.
	wanLatency = 20 * time.Millisecond
	// msgSize is every workload message's payload size.
	msgSize = 1024
	// geoTenant owns the scenarios' namespaces.
	geoTenant = "geo"
)

// geoNamespaces are the scenarios' namespaces and their replication
// clusters.
var geoNamespaces = map[string][]string{
	"all":      {"r1", "r2", "r3"},
	"pair":     {"r1", "r2"},
	"r2-local": {"r2"},
	"r3-local": {"r3"},
}

// geoBed is the three-region bed of the scenarios with a client per
// region. The test's clients bypass the brokers' links (LocalClients): a
// client is on its region's network, and the links carry, delay and are
// cut for only the replicators' traffic between regions.
type geoBed struct {
	*Bed
	clients map[string]pulsar.Client
}

// newGeoBed starts the bed of the meridian binary, shapes every broker's links to wanLatency
// and creates the geo tenant and namespaces.
func newGeoBed(ctx context.Context, tb testing.TB, binary string, bookieArgs ...string) *geoBed {
	tb.Helper()
	var regions []RegionConfig
	for _, name := range []string{"r1", "r2", "r3"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 2, Brokers: 1, Replicators: 2, BookieArgs: bookieArgs})
	}
	bed := StartBed(tb, BedConfig{Binary: binary, Regions: regions, GlobalEtcd: true, LocalClients: true})
	tb.Logf("3 regions (3 region etcds, 1 global etcd, 6 bookies %v, 3 brokers, 6 replicator workers) ready in %v",
		bookieArgs, bed.StartedIn.Round(time.Millisecond))
	g := &geoBed{Bed: bed, clients: map[string]pulsar.Client{}}
	for _, r := range bed.Regions {
		for _, l := range []*Link{r.Brokers[0].Link, r.Brokers[0].WebLink} {
			if err := l.SetShape(Shape{Latency: wanLatency}); err != nil {
				tb.Fatal(err)
			}
		}
		g.clients[r.Name] = NewClient(tb, r.ServiceURL())
	}
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, geoTenant, global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}); err != nil {
		tb.Fatal(err)
	}
	for ns, clusters := range geoNamespaces {
		if _, err := gs.CreateNamespace(ctx, geoTenant, ns, global.Policies{ReplicationClusters: clusters}); err != nil {
			tb.Fatal(err)
		}
		// The brokers see a namespace through their watch of the global
		// store; a producer is refused until they do.
		for _, region := range clusters {
			waitProducer(ctx, tb, g.clients[region], fmt.Sprintf("persistent://%s/%s/probe", geoTenant, ns))
		}
	}
	return g
}

// waitProducer waits until a producer on topic can be created.
func waitProducer(ctx context.Context, tb testing.TB, client pulsar.Client, topic string) {
	tb.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			p.Close()
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("no producer on %s: %v (%v)", topic, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// store is region's etcd, dialled directly.
func (g *geoBed) store(ctx context.Context, region string) *meta.Etcd {
	return g.Dial(ctx, g.Region(region).EtcdEndpoints())
}

// startRate sends rate msg/s of msgSize bytes from region to topic, from
// one producer named name, paced by the clock (ProducerConfig.Interval):
// one producer holds 10k msg/s, and batches better than several would.
// It returns the producer in a slice, for stopProducers.
func (g *geoBed) startRate(ctx context.Context, tb testing.TB, rec *Recorder, region, topic, name string, rate int) []*Producer {
	tb.Helper()
	return g.startBatched(ctx, tb, rec, region, topic, name, rate, 0)
}

// startBatched is startRate with the client's batching delay (0: its
// default, 10ms).
func (g *geoBed) startBatched(ctx context.Context, tb testing.TB, rec *Recorder, region, topic, name string, rate int, batching time.Duration) []*Producer {
	tb.Helper()
	p, err := StartProducer(ctx, g.clients[region], rec, ProducerConfig{Region: region, Topic: topic,
		Name: name, Interval: time.Second / time.Duration(rate), PayloadSize: msgSize, BatchingDelay: batching})
	if err != nil {
		tb.Fatal(err)
	}
	return []*Producer{p}
}

// stopProducers stops ps, flushing what they have pending.
func stopProducers(ctx context.Context, tb testing.TB, ps []*Producer) {
	tb.Helper()
	for _, p := range ps {
		if err := p.Stop(ctx); err != nil {
			tb.Logf("flush: %v", err)
		}
	}
}

// arrivals records when each message of a topic first arrived in a
// region, for the lag: a consumer that acks without waiting for the
// broker, so that a fast stream is not held to one ack round trip per
// message. It proves nothing about loss (the read-back does).
type arrivals struct {
	region string
	c      pulsar.Consumer
	stop   context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu sync.Mutex
	at map[Message]time.Time
}

// startArrivals subscribes in region to topic from the earliest position.
func (g *geoBed) startArrivals(ctx context.Context, tb testing.TB, region, topic string) *arrivals {
	tb.Helper()
	c := g.subscribe(ctx, tb, region, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "arrivals",
		Type: pulsar.Exclusive, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 5000})
	KeepForReadBack(ctx, tb, g.clients[region], topic)
	ctx, stop := context.WithCancel(ctx)
	a := &arrivals{region: region, c: c, stop: stop, at: map[Message]time.Time{}}
	a.wg.Go(func() {
		for {
			msg, err := c.Receive(ctx)
			if err != nil {
				return // stopped
			}
			now := time.Now()
			if m, err := parsePayload(msg.Payload()); err == nil {
				a.mu.Lock()
				if _, seen := a.at[m]; !seen {
					a.at[m] = now
				}
				a.mu.Unlock()
			}
			_ = c.Ack(msg)
		}
	})
	tb.Cleanup(a.Stop)
	return a
}

// subscribe subscribes in region with opts. A refused subscription is
// retried for a minute: on a loaded machine a broker whose etcd is slow
// refuses it with ServiceNotReady ("context deadline exceeded").
func (g *geoBed) subscribe(ctx context.Context, tb testing.TB, region string, opts pulsar.ConsumerOptions) pulsar.Consumer {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		c, err := g.clients[region].Subscribe(opts)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatalf("subscribe in %s to %s: %v", region, opts.Topic, err)
		}
		tb.Logf("subscribe in %s to %s: %v; retrying", region, opts.Topic, err)
		sleep(ctx, tb, 500*time.Millisecond)
	}
}

// Stop ends the consumer; calling it again does nothing.
func (a *arrivals) Stop() {
	a.once.Do(func() {
		a.stop()
		a.wg.Wait()
		a.c.Close()
	})
}

// count is how many of ms have arrived.
func (a *arrivals) count(ms []Message) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range ms {
		if _, ok := a.at[m]; ok {
			n++
		}
	}
	return n
}

// firstSince is when the first of ms that arrived at or after since did;
// since itself if none did.
func (a *arrivals) firstSince(ms []Message, since time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := time.Time{}
	for _, m := range ms {
		if at, ok := a.at[m]; ok && !at.Before(since) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if first.IsZero() {
		return since
	}
	return first
}

// arrivedAt returns when m arrived, if it did.
func (a *arrivals) arrivedAt(m Message) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[m]
	return at, ok
}

// ackedSends are the acknowledged sends of rec to topic (any, if "") from
// the regions listed (any, if none is).
func ackedSends(rec *Recorder, topic string, from ...string) []Send {
	var out []Send
	for _, s := range rec.History().Sends {
		if (topic == "" || s.Topic == topic) && s.Acknowledged() && (len(from) == 0 || slices.Contains(from, s.Region)) {
			out = append(out, s)
		}
	}
	return out
}

func messages(ss []Send) []Message {
	out := make([]Message, len(ss))
	for i, s := range ss {
		out[i] = s.Message
	}
	return out
}

// waitArrived waits until every one of ms has arrived at a.
func waitArrived(ctx context.Context, tb testing.TB, a *arrivals, ms []Message, what string) {
	tb.Helper()
	if err := awaitArrivals(ctx, a, ms); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// awaitArrivals waits until every one of ms has arrived at a; if ctx ends
// first, the error says how many did.
func awaitArrivals(ctx context.Context, a *arrivals, ms []Message) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for a.count(ms) < len(ms) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d messages arrived in %s: %w", a.count(ms), len(ms), a.region, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// drained waits up to drainWait until each destination of want holds its
// messages, and reports whether all did; each that did not is a test
// error. The caller then runs the checker, which names what is missing as
// lost, rather than waiting on until its context ends.
func drained(ctx context.Context, tb testing.TB, want map[*arrivals][]Message, what string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, drainWait)
	defer cancel()
	ok := true
	for a, ms := range want {
		if err := awaitArrivals(ctx, a, ms); err != nil {
			tb.Errorf("%s, within %v: %v", what, drainWait, err)
			ok = false
		}
	}
	return ok
}

// drainWait bounds the wait for a backlog to drain after a fault heals:
// the 14,741 messages of a 20 s cut drained in 5.9 s on this machine
// (docs/BENCHMARKS.md), so what has not arrived after this long is not
// coming.
const drainWait = 3 * time.Minute

// verify reads topics back in their namespaces' regions and runs the
// checker: no acknowledged message lost, none stored twice, each
// producer's order kept, nothing in a region it does not belong in.
func (g *geoBed) verify(ctx context.Context, tb testing.TB, rec *Recorder, topics ...string) {
	tb.Helper()
	rules := Rules{Regions: map[string][]string{}}
	for _, topic := range topics {
		ns := strings.Split(strings.TrimPrefix(topic, "persistent://"), "/")[1]
		rules.Regions[topic] = geoNamespaces[ns]
		for _, region := range geoNamespaces[ns] {
			if err := ReadTopic(ctx, g.clients[region], rec, region, topic); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if r := g.Verify(rec.History(), rules); r.Stored == 0 {
		tb.Error("nothing was read back")
	}
}

// checkLinks fails the test unless each destination region's broker link
// carried at least the payload bytes replicated to it since before.
func (g *geoBed) checkLinks(tb testing.TB, before map[string]Bytes, replicated map[string]int) {
	tb.Helper()
	for region, n := range replicated {
		up := g.Region(region).Brokers[0].Link.Bytes().Up - before[region].Up
		tb.Logf("%s's link carried %d bytes in for %d replicated messages (%d payload bytes)", region, up, n, n*msgSize)
		if up < int64(n*msgSize) {
			tb.Errorf("%s's link carried %d bytes towards it, less than the %d payload bytes replicated to it: replication bypassed the link", region, up, n*msgSize)
		}
	}
}

func (g *geoBed) linkBytes() map[string]Bytes {
	out := map[string]Bytes{}
	for _, r := range g.Regions {
		out[r.Name] = r.Brokers[0].Link.Bytes()
	}
	return out
}

// percentile is the p-th percentile (0..1) of ds, which it sorts.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// publishLatencies are the receipt times of the acknowledged sends.
func publishLatencies(ss []Send) []time.Duration {
	out := make([]time.Duration, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.ReceiptAt.Sub(s.SentAt))
	}
	return out
}

// sleep waits d, a part of a fault schedule (not a wait for a condition).
func sleep(ctx context.Context, tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		tb.Fatal(ctx.Err())
	}
}
