package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// TestWriteHops: the path with each hop's time and its latency from the
// one before, a replicated message's origin time read from the reserved
// property, and a note when a batched message cannot show it.
func TestWriteHops(t *testing.T) {
	published := time.Date(2026, 1, 2, 15, 4, 5, 100_000_000, time.UTC)
	storedB := published.Add(31 * time.Millisecond)
	received := published.Add(33 * time.Millisecond)
	cases := []struct {
		msg  fakeMessage
		want string
	}{
		{fakeMessage{published: published, brokerPublished: &storedB, from: "us-east",
			props: map[string]string{wire.PropReplicationOriginTime: "1767366245102"}},
			"hops: producer 2026-01-02T15:04:05.100Z -> us-east 2026-01-02T15:04:05.102Z (+2ms) -> " +
				"local 2026-01-02T15:04:05.131Z (+29ms) -> consumer 2026-01-02T15:04:05.133Z (+2ms)\n"},
		{fakeMessage{published: published, brokerPublished: &storedB},
			"hops: producer 2026-01-02T15:04:05.100Z -> local 2026-01-02T15:04:05.131Z (+31ms) -> " +
				"consumer 2026-01-02T15:04:05.133Z (+2ms)\n"},
		// A producer whose clock is ahead: the latency shows the skew.
		{fakeMessage{published: received.Add(time.Second), brokerPublished: &storedB},
			"hops: producer 2026-01-02T15:04:06.133Z -> local 2026-01-02T15:04:05.131Z (-1.002s) -> " +
				"consumer 2026-01-02T15:04:05.133Z (+2ms)\n"},
		{fakeMessage{published: published, brokerPublished: &storedB, from: "us-east"},
			"hops: producer 2026-01-02T15:04:05.100Z -> local 2026-01-02T15:04:05.131Z (+31ms) -> " +
				"consumer 2026-01-02T15:04:05.133Z (+2ms) (the time us-east stored it is not in a batched message's properties: " +
				"get-message-by-id shows it in X-Meridian-Hop-Trail)\n"},
	}
	for _, c := range cases {
		var b strings.Builder
		writeHops(&b, c.msg, received)
		if b.String() != c.want {
			t.Errorf("writeHops:\n%q\nwant\n%q", b.String(), c.want)
		}
	}
}

// hopRE is one hop of a --hops line: its place and time.
var hopRE = regexp.MustCompile(`(\S+) (` + timeRE + `)`)

// hopsOf reads the one --hops line of consume's output.
func hopsOf(t *testing.T, out string) (places []string, times []time.Time) {
	t.Helper()
	var line string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "hops: ") {
			if line != "" {
				t.Fatalf("two hops lines:\n%s", out)
			}
			line = strings.TrimPrefix(l, "hops: ")
		}
	}
	for _, hop := range strings.Split(line, " -> ") {
		m := hopRE.FindStringSubmatch(hop)
		if m == nil {
			t.Fatalf("hop %q of %q is not \"place time\"", hop, line)
		}
		at, err := time.Parse(messageTimeLayout, m[2])
		if err != nil {
			t.Fatal(err)
		}
		places, times = append(places, m[1]), append(times, at)
	}
	return places, times
}

// TestConsumeHops is the hop test of issue 15: a message produced in
// us-east and consumed in eu-west with `meridian consume --hops` shows the
// producer's time, us-east's and eu-west's broker times and the receipt,
// in causal order; us-east's time is the one us-east stored the message
// with, as consume --hops in us-east shows it.
func TestConsumeHops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two regions")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := node.Dev(t.TempDir(), []string{"us-east", "eu-west"}, 0, 0)
	for i := range cfg.Regions {
		b := cfg.Regions[i].Broker
		b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
		cfg.Regions[i].Replicator.ScanInterval = 50 * time.Millisecond
	}
	cfg.Logger = discardLogger()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	urls := map[string]string{}
	for _, r := range n.Regions() {
		urls[r.Name()] = r.Broker().ServiceURL()
	}

	topic := "persistent://public/default/hops"
	out, err := runClient(ctx, "produce", topic, "--url", urls["us-east"], "-m", "hop")
	if err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	checkProduced(t, out, 1)
	consume := func(region string) (places []string, times []time.Time) {
		out, err := runClient(ctx, "consume", topic, "--url", urls[region], "-s", "hops", "-p", "Earliest", "-n", "1", "--hops")
		if err != nil {
			t.Fatalf("consume in %s: %v\n%s", region, err, out)
		}
		if msgs := parseConsumed(t, strings.ReplaceAll(out, "replicated from:[us-east], ", "")); len(msgs) != 1 || msgs[0].content != "hop" {
			t.Fatalf("consume in %s:\n%s", region, out)
		}
		return hopsOf(t, out)
	}
	places, times := consume("eu-west")
	if want := []string{"producer", "us-east", "local", "consumer"}; strings.Join(places, " ") != strings.Join(want, " ") {
		t.Fatalf("path %v, want %v", places, want)
	}
	for i := 1; i < len(times); i++ {
		if times[i].Before(times[i-1]) {
			t.Errorf("%s at %v before %s at %v: the hops are not in causal order", places[i], times[i], places[i-1], times[i-1])
		}
	}
	localPlaces, localTimes := consume("us-east")
	if strings.Join(localPlaces, " ") != "producer local consumer" {
		t.Fatalf("path in us-east %v", localPlaces)
	}
	if !localTimes[1].Equal(times[1]) || !localTimes[0].Equal(times[0]) {
		t.Errorf("us-east stored the message at %v (published %v), eu-west's trail says %v (published %v)",
			localTimes[1], localTimes[0], times[1], times[0])
	}
}
