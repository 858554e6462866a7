//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/global"
)

// TestTestbedThreeRegions starts three regions (an etcd, two bookies, a
// broker and a replicator each) and a global etcd, and runs a workload
// across a proxied 20 ms link: a producer in r1's client network sends
// keyed messages to
// r2's broker through the link in front of it, and in r2 an exclusive
// subscription and a Key_Shared one of two consumers ack everything.
// Halfway, the link is cut for a moment and restored. Then a producer in
// r1 writes to a topic replicated to r2, and a consumer in r2 acks it. It
// shows that:
//   - the bed starts all 16 processes in under a minute (the figure is
//     logged; the test fails only past twice that, so that a loaded
//     machine does not make it flaky);
//   - each region's cluster record names its broker's proxied address, so
//     lookups from other regions go through the links;
//   - every send waited at least a round trip of the link (40 ms);
//   - the link counted at least the payload bytes sent through it, and
//     at least the payload bytes r1 replicated to r2; each region's
//     brokers reached the global etcd through their link;
//   - the checker passes: nothing lost, duplicated or reordered (each
//     key's order) across the cut, the replicated topic complete and in
//     order in both regions, and nothing in a region its topic does not
//     belong in;
//   - a SIGSTOPped broker answers nothing (its /metrics, through its web
//     link) until SIGCONT;
//   - a SIGKILLed broker's advertised addresses refuse connections until
//     it is started again.
//
// Run it with
//
//	go test -tags e2e -race -run TestTestbedThreeRegions -v ./e2e/
func TestTestbedThreeRegions(t *testing.T) {
	const (
		topic       = "persistent://bed/r2only/wan"
		replicated  = "persistent://bed/r1r2/geo"
		messages    = 200
		payloadSize = 1024
		latency     = 20 * time.Millisecond
	)
	var regions []RegionConfig
	for _, name := range []string{"r1", "r2", "r3"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 2, Brokers: 1, Replicators: 1})
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true})
	t.Logf("3 regions (3 region etcds, 1 global etcd, 6 bookies, 3 brokers, 3 replicators) ready in %v", bed.StartedIn.Round(time.Millisecond))
	if bed.StartedIn > 2*time.Minute {
		t.Errorf("the bed took %v to start three regions, want under 60s", bed.StartedIn)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	gs := bed.GlobalStore(ctx)
	for _, r := range bed.Regions {
		c, err := gs.Cluster(ctx, r.Name)
		if err != nil || c.BrokerServiceURL != r.Brokers[0].ServiceURL() || c.ServiceURL != r.Brokers[0].WebURL() {
			t.Fatalf("cluster record of %s: %+v, %v (want the proxied %s and %s)", r.Name, c, err, r.Brokers[0].ServiceURL(), r.Brokers[0].WebURL())
		}
	}
	if _, err := gs.CreateTenant(ctx, "bed", global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := gs.CreateNamespace(ctx, "bed", "r2only", global.Policies{ReplicationClusters: []string{"r2"}, DeduplicationEnabled: &on}); err != nil {
		t.Fatal(err)
	}

	r2 := bed.Region("r2")
	wan := r2.Brokers[0].Link
	if err := wan.SetShape(Shape{Latency: latency}); err != nil {
		t.Fatal(err)
	}
	// r1's clients reach r2 by r2's service URL, which is its broker's
	// link; r2's consumer is redirected there too, by the lookup.
	fromR1 := NewClient(t, r2.ServiceURL())
	inR2 := NewClient(t, r2.ServiceURL())
	WaitDeduplication(ctx, t, fromR1, topic+"-probe")
	before := wan.Bytes()

	rec := bed.Recorder()
	// An exclusive subscription holds the producer's order; a Key_Shared
	// one with two consumers each key's.
	var consumers []*Consumer
	for _, cc := range []ConsumerConfig{
		{Subscription: "exclusive", Type: Exclusive, Name: "r2-exclusive"},
		{Subscription: "by-key", Type: KeyShared, Name: "r2-by-key-0"},
		{Subscription: "by-key", Type: KeyShared, Name: "r2-by-key-1"},
	} {
		cc.Region, cc.Topic = "r2", topic
		c, err := StartConsumer(ctx, inR2, rec, cc)
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	began := time.Now()
	prod, err := StartProducer(ctx, fromR1, rec, ProducerConfig{Region: "r2", Topic: topic,
		Name: "r1-producer", PayloadSize: payloadSize, Keys: 8})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitAcknowledged(ctx, t, messages/2, "before the cut")
	cut := time.Duration(500+bed.Rand.IntN(1000)) * time.Millisecond
	cutAt := time.Now()
	wan.Cut()
	t.Logf("%s: cut the r1->r2 link for %v after %d receipts", cutAt.Format("15:04:05.000"), cut, rec.Acknowledged())
	// The cut's length is part of the fault schedule (drawn from the
	// seed), not a wait for a condition.
	select {
	case <-time.After(cut):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	wan.Restore()
	restoredAt := time.Now()
	rec.WaitAcknowledged(ctx, t, messages, "after the link was restored")
	if err := prod.Stop(ctx); err != nil {
		t.Logf("flush: %v", err)
	}
	workload := time.Since(began)
	rec.WaitAllAcked(ctx, t)
	for _, c := range consumers {
		c.Stop()
	}
	if err := ReadTopic(ctx, inR2, rec, "r2", topic); err != nil {
		t.Fatal(err)
	}

	fastest, acked := time.Duration(1<<62), 0
	for _, s := range rec.History().Sends {
		if s.Acknowledged() {
			acked++
			fastest = min(fastest, s.ReceiptAt.Sub(s.SentAt))
		}
	}
	if fastest < 2*latency {
		t.Errorf("fastest send took %v through a %v link, want at least a round trip, %v", fastest, latency, 2*latency)
	}
	carried := wan.Bytes()
	up, down := carried.Up-before.Up, carried.Down-before.Down
	t.Logf("workload: %d receipts in %v over the %v link (fastest send %v); the link carried %d bytes up, %d down",
		acked, workload.Round(time.Millisecond), latency, fastest.Round(time.Millisecond), up, down)
	if up < int64(acked*payloadSize) {
		t.Errorf("the link carried %d bytes towards r2, less than the %d payload bytes acknowledged", up, acked*payloadSize)
	}
	if down < int64(acked*payloadSize) {
		t.Errorf("the link carried %d bytes from r2, less than the %d payload bytes delivered to r2's consumer", down, acked*payloadSize)
	}
	for _, r := range bed.Regions {
		if b := r.GlobalLink.Bytes(); b.Up == 0 || b.Down == 0 {
			t.Errorf("%s's link to the global etcd carried %+v: its broker does not read the global store through it", r.Name, b)
		}
	}

	// Replication: a producer in r1 writes to r1's broker, on a topic
	// replicated to r2; r1's replicator publishes it to r2's broker at
	// r2's cluster record, through r2's link, and r2's consumer acks it.
	if _, err := gs.CreateNamespace(ctx, "bed", "r1r2", global.Policies{ReplicationClusters: []string{"r1", "r2"}}); err != nil {
		t.Fatal(err)
	}
	inR1 := NewClient(t, bed.Region("r1").ServiceURL())
	before = wan.Bytes()
	geo, err := StartConsumer(ctx, inR2, rec, ConsumerConfig{Region: "r2", Topic: replicated,
		Subscription: "geo", Type: Exclusive, Name: "r2-geo"})
	if err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	local, err := StartProducer(ctx, inR1, rec, ProducerConfig{Region: "r1", Topic: replicated,
		Name: "r1-geo", PayloadSize: payloadSize})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitAcknowledged(ctx, t, acked+messages, "producing in r1")
	if err := local.Stop(ctx); err != nil {
		t.Logf("flush: %v", err)
	}
	rec.WaitAllAcked(ctx, t)
	replicatedIn := time.Since(began)
	geo.Stop()
	for _, rt := range []struct {
		region string
		client pulsar.Client
	}{{"r1", inR1}, {"r2", inR2}} {
		if err := ReadTopic(ctx, rt.client, rec, rt.region, replicated); err != nil {
			t.Fatal(err)
		}
	}
	geoAcked := 0
	for _, s := range rec.History().Sends {
		if s.Topic == replicated && s.Acknowledged() {
			geoAcked++
		}
	}
	carried = wan.Bytes()
	t.Logf("replication: %d messages produced in r1 were acked by r2's consumer %v after the first send; r2's link carried %d bytes up, %d down meanwhile",
		geoAcked, replicatedIn.Round(time.Millisecond), carried.Up-before.Up, carried.Down-before.Down)
	if up := carried.Up - before.Up; up < int64(geoAcked*payloadSize) {
		t.Errorf("r2's link carried %d bytes towards r2 while r1 replicated %d payload bytes to it", up, geoAcked*payloadSize)
	}

	// The cut loses no ack the broker confirmed (it did not crash), but
	// the consumer takes a while to reconnect (the client backs off,
	// doubling from 100ms), and what it acks meanwhile over its old
	// connection's messages may have been dispatched again on the new one.
	bed.Verify(rec.History(), Rules{Regions: map[string][]string{topic: {"r2"}, replicated: {"r1", "r2"}},
		Disruptions:     []Disruption{{Region: "r2", Start: cutAt, End: restoredAt}},
		ReconnectWindow: 5 * time.Second})

	// SIGSTOP and SIGCONT: a paused broker keeps its sockets (the kernel
	// still accepts connections) but answers nothing until resumed.
	paused := bed.Region("r1").Brokers[0]
	metrics := paused.WebURL() + "/metrics"
	if err := get(ctx, metrics, 30*time.Second); err != nil {
		t.Fatalf("before the pause: %v", err)
	}
	paused.Pause()
	if err := get(ctx, metrics, 500*time.Millisecond); err == nil {
		t.Errorf("%s answered %s while SIGSTOPped", paused.Name, metrics)
	}
	paused.Resume()
	if err := get(ctx, metrics, 30*time.Second); err != nil {
		t.Errorf("after SIGCONT: %v", err)
	}

	// SIGKILL: the dead broker's advertised addresses refuse connections,
	// as a dead process's ports do, until it runs again.
	paused.Kill()
	for _, l := range []*Link{paused.Link, paused.WebLink} {
		if c, err := net.Dial("tcp", l.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial %s of the killed %s: %v, want ECONNREFUSED", l.Name(), paused.Name, err)
		}
	}
	from := paused.LogSize()
	paused.Start()
	paused.WaitReady(ctx, from)
	if err := get(ctx, metrics, 30*time.Second); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

// get fetches url within timeout and checks for status 200.
func get(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
