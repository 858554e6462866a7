package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/node"
)

// startDev starts regions in one process on free ports, each with a bookie,
// a broker and a replication worker, and returns their brokers' URLs by
// region.
func startDev(t *testing.T, regions ...string) (*node.Node, map[string]string) {
	t.Helper()
	return startDevWith(t, nil, regions...)
}

// startDevWith is startDev with mutate applied to each region's
// configuration before the start (nil: none).
func startDevWith(t *testing.T, mutate func(*node.RegionConfig), regions ...string) (*node.Node, map[string]string) {
	t.Helper()
	cfg := node.Dev(t.TempDir(), regions, 0, 0)
	freePorts(&cfg)
	for i := range cfg.Regions {
		r := &cfg.Regions[i]
		r.Replicator.ScanInterval = 50 * time.Millisecond
		r.Replicator.CursorPersistInterval = 10 * time.Millisecond
		if mutate != nil {
			mutate(r)
		}
	}
	cfg.Logger = testLogger()
	n := startNode(t, cfg)
	urls := map[string]string{}
	for _, r := range n.Regions() {
		urls[r.Name()] = r.Broker().ServiceURL()
	}
	return n, urls
}

// subscribeIn subscribes to topic in every region of urls, from the
// earliest message, and returns the consumers by region.
func subscribeIn(t *testing.T, urls map[string]string, topic string) map[string]pulsar.Consumer {
	t.Helper()
	consumers := map[string]pulsar.Consumer{}
	for r, url := range urls {
		c := newClient(t, pulsar.ClientOptions{URL: url})
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		consumers[r] = cons
	}
	return consumers
}

// received is what a consumer saw of one message.
type received struct {
	payload, key, from string
}

// receiveAll reads n messages from cons, failing after a minute without
// one, then checks that nothing more comes within quiet.
func receiveAll(t *testing.T, cons pulsar.Consumer, n int, quiet time.Duration) []received {
	t.Helper()
	var got []received
	for len(got) < n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(got), n, err)
		}
		got = append(got, received{string(m.Payload()), m.Key(), m.GetReplicatedFrom()})
		cons.Ack(m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), quiet)
	defer cancel()
	if m, err := cons.Receive(ctx); err == nil {
		t.Fatalf("a message more than the %d expected: %q from %q", n, m.Payload(), m.GetReplicatedFrom())
	}
	return got
}

// TestReplicationAcrossThreeRegions: messages published in every region,
// batched and compressed, with keys, reach every other region exactly once
// and in per-origin order, and none comes back to its origin.
func TestReplicationAcrossThreeRegions(t *testing.T) {
	regions := []string{"east", "west", "south"}
	_, urls := startDev(t, regions...)
	const topic, perRegion = "persistent://public/default/mesh", 200
	consumers := subscribeIn(t, urls, topic)
	for _, r := range regions {
		c := newClient(t, pulsar.ClientOptions{URL: urls[r]})
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, CompressionType: pulsar.LZ4,
			BatchingMaxPublishDelay: 5 * time.Millisecond, BatchingMaxMessages: 50})
		if err != nil {
			t.Fatal(err)
		}
		for i := range perRegion {
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%7),
				Payload: fmt.Appendf(nil, "%s-%d", r, i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
		}
		if err := p.FlushWithCtx(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	for _, r := range regions {
		got := receiveAll(t, consumers[r], perRegion*len(regions), 500*time.Millisecond)
		next := map[string]int{}
		for _, m := range got {
			origin, n, _ := strings.Cut(m.payload, "-")
			switch {
			case origin == r && m.from != "":
				t.Fatalf("region %s: its own message %q came back from %s", r, m.payload, m.from)
			case origin != r && m.from != origin:
				t.Fatalf("region %s: message %q says it came from %q", r, m.payload, m.from)
			case n != fmt.Sprint(next[origin]):
				t.Fatalf("region %s: from %s got %q, want %s-%d (exactly once, in order)", r, origin, m.payload, origin, next[origin])
			case m.key != fmt.Sprintf("k%d", next[origin]%7):
				t.Fatalf("region %s: message %q lost its key (%q)", r, m.payload, m.key)
			}
			next[origin]++
		}
	}
}

// TestReplicationHonoursReplicateTo: a message's ReplicationClusters narrows
// where it goes, and DisableReplication keeps it home.
func TestReplicationHonoursReplicateTo(t *testing.T) {
	regions := []string{"east", "west", "south"}
	_, urls := startDev(t, regions...)
	const topic = "persistent://public/default/narrowed"
	consumers := subscribeIn(t, urls, topic)
	c := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, m := range []*pulsar.ProducerMessage{
		{Payload: []byte("local"), DisableReplication: true},
		{Payload: []byte("west-only"), ReplicationClusters: []string{"west"}},
		{Payload: []byte("everywhere")},
	} {
		if _, err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		"east":  {"local", "west-only", "everywhere"},
		"west":  {"west-only", "everywhere"},
		"south": {"everywhere"},
	}
	for _, r := range regions {
		got := receiveAll(t, consumers[r], len(want[r]), time.Second)
		for i, m := range got {
			if m.payload != want[r][i] {
				t.Fatalf("region %s received %v, want %v", r, got, want[r])
			}
		}
	}
}

// TestReplicationFixedNameProducerRestart: a producer with a fixed name that
// restarts without deduplication starts its sequence ids at 0 again; every
// one of its messages still reaches the other region.
func TestReplicationFixedNameProducerRestart(t *testing.T) {
	_, urls := startDev(t, "east", "west")
	const topic = "persistent://public/default/fixed-name"
	west := newClient(t, pulsar.ClientOptions{URL: urls["west"]})
	cons, err := west.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	east := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	for run := range 2 {
		p, err := east.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "orders-app", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "run%d-%d", run, i)}); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	got := receiveAll(t, cons, 10, 500*time.Millisecond)
	for i, m := range got {
		if want := fmt.Sprintf("run%d-%d", i/5, i%5); m.payload != want {
			t.Fatalf("message %d is %q, want %q", i, m.payload, want)
		}
	}
}
