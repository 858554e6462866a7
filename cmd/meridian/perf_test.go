package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/node"
)

// runPerf runs `meridian perf args...` through the root command, writing
// its stdout to out.
func runPerf(ctx context.Context, out io.Writer, args ...string) error {
	cmd := newRootCommand()
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"perf"}, args...))
	return cmd.ExecuteContext(ctx)
}

// lineWriter hands each line written to it to a channel, so that a test
// can wait for a line rather than poll.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	all   strings.Builder
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 10000)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line) // incomplete: wait for the rest
			return len(p), nil
		}
		w.lines <- strings.TrimSuffix(line, "\n")
	}
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

func readSummary(t testing.TB, path string) perfSummary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--json file: %v", err)
	}
	var s perfSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("--json file does not parse: %v\n%s", err, b)
	}
	return s
}

// checkSummary checks what holds of every summary: the windows add up to
// the total, and within each, p50 <= p95 <= p99 <= p99.9 <= max.
func checkSummary(t *testing.T, name string, s perfSummary) {
	t.Helper()
	var n int64
	for i, w := range append(s.Windows, s.Total) {
		if !(w.P50 <= w.P95 && w.P95 <= w.P99 && w.P99 <= w.P999 && w.P999 <= w.Max) {
			t.Errorf("%s window %d: percentiles out of order: %+v", name, i, w)
		}
		if w.Count > 0 && w.Max <= 0 {
			t.Errorf("%s window %d: %d messages but max latency %v", name, i, w.Count, w.Max)
		}
		if i < len(s.Windows) {
			n += w.Count
		}
	}
	if n != s.Total.Count {
		t.Errorf("%s: windows add up to %d messages, total says %d", name, n, s.Total.Count)
	}
}

// startRegion starts a standalone region in-process on port 0 and returns
// its broker.
func startRegion(ctx context.Context, t testing.TB) *node.Broker {
	t.Helper()
	cfg := node.Standalone(t.TempDir())
	b := cfg.Regions[0].Broker
	b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
	cfg.Logger = discardLogger()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n.Broker()
}

// storedCount reads topic from the start and counts its messages.
func storedCount(ctx context.Context, t *testing.T, c pulsar.Client, topic string) int64 {
	t.Helper()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int64
	for r.HasNext() {
		if _, err := r.Next(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

var totalRE = regexp.MustCompile(`\((\d+) in total\)$`)

// TestPerfProduceConsume runs perf consume, then a 2-second perf produce
// at 2000 msg/s to the same topic, against an in-process region. The
// producer's count is exactly what the topic holds; the consumer, stopped
// once its running total reaches that count, received exactly that many;
// a second subscription from the earliest message drains the same count
// with --num-messages.
func TestPerfProduceConsume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a region")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	region := startRegion(ctx, t)
	url := region.ServiceURL()
	topic := "persistent://public/default/perf"
	dir := t.TempDir()

	consOut := newLineWriter()
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	consJSON := filepath.Join(dir, "consume.json")
	consDone := make(chan error, 1)
	go func() {
		consDone <- runPerf(consCtx, consOut, "consume", "-u", url, "-s", "perf-sub", "-t", "Shared",
			"--interval", "200ms", "--json", consJSON, topic)
	}()
	waitLine := func(what string, ok func(string) bool) {
		t.Helper()
		for {
			select {
			case line := <-consOut.lines:
				if ok(line) {
					return
				}
			case err := <-consDone:
				t.Fatalf("perf consume ended before %s: %v\n%s", what, err, consOut.String())
			case <-ctx.Done():
				t.Fatalf("perf consume: no %s: %v\n%s", what, ctx.Err(), consOut.String())
			}
		}
	}
	waitLine("ready line", func(l string) bool { return strings.HasPrefix(l, "perf consume ready:") })

	prodJSON := filepath.Join(dir, "produce.json")
	var prodOut bytes.Buffer
	began := time.Now()
	if err := runPerf(ctx, &prodOut, "produce", "-u", url, "--duration", "2s", "-r", "2000",
		"--interval", "500ms", "--json", prodJSON, topic); err != nil {
		t.Fatalf("perf produce: %v\n%s", err, prodOut.String())
	}
	t.Logf("perf produce took %v:\n%s", time.Since(began).Round(time.Millisecond), prodOut.String())
	prod := readSummary(t, prodJSON)
	checkSummary(t, "produce", prod)
	produced := prod.Total.Count
	// 2 s at 2000 msg/s; a loaded machine may fall short, never over.
	if produced < 1000 || produced > 4000+2 {
		t.Errorf("produced %d messages in 2s at 2000 msg/s", produced)
	}
	if !strings.Contains(prodOut.String(), fmt.Sprintf("produce summary: %d messages", produced)) {
		t.Errorf("the printed summary does not say %d messages:\n%s", produced, prodOut.String())
	}
	c := newPulsarClient(t, url, 10*time.Second)
	defer c.Close()
	if stored := storedCount(ctx, t, c, topic); stored != produced {
		t.Errorf("perf produce reported %d messages, the topic holds %d", produced, stored)
	}

	waitLine(fmt.Sprintf("running total of %d", produced), func(l string) bool {
		m := totalRE.FindStringSubmatch(l)
		if m == nil {
			return false
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n >= produced
	})
	stopCons()
	if err := <-consDone; err != nil {
		t.Fatalf("perf consume: %v", err)
	}
	cons := readSummary(t, consJSON)
	checkSummary(t, "consume", cons)
	if cons.Total.Count != produced {
		t.Errorf("perf consume received %d messages, perf produce sent %d\n%s", cons.Total.Count, produced, consOut.String())
	}

	var drainOut bytes.Buffer
	drainJSON := filepath.Join(dir, "drain.json")
	if err := runPerf(ctx, &drainOut, "consume", "-u", url, "-s", "drain", "--subscription-position", "Earliest",
		"--num-messages", strconv.FormatInt(produced, 10), "--json", drainJSON, topic); err != nil {
		t.Fatalf("perf consume --num-messages: %v\n%s", err, drainOut.String())
	}
	if d := readSummary(t, drainJSON); d.Total.Count != produced {
		t.Errorf("draining from the earliest message received %d, want %d", d.Total.Count, produced)
	}

	// --listener-name reaches the broker's lookup: this broker has no
	// listener of that name, so no producer is made.
	var listenerOut bytes.Buffer
	if err := runPerf(ctx, &listenerOut, "produce", "-u", url, "--listener-name", "nosuch", "--operation-timeout", "2s",
		"--duration", "1s", topic); err == nil {
		t.Errorf("perf produce through a listener the broker lacks succeeded:\n%s", listenerOut.String())
	}
}

// TestPerfProduceSIGTERM runs perf produce as a process until SIGTERM: it
// exits 0, writes its summary with a count equal to what the topic holds,
// and its latency leaves out the rate limiter's wait (at 10 msg/s, 100 ms
// between sends, which pulsar-perf-go would count).
func TestPerfProduceSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a region and a process")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	region := startRegion(ctx, t)
	url := region.ServiceURL()
	topic := "persistent://public/default/perf-sigterm"
	c := newPulsarClient(t, url, 10*time.Second)
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "produce.json")
	p := startProcess(t, "perf produce", filepath.Join(dir, "perf.log"),
		"perf", "produce", "-u", url, "-r", "10", "--json", jsonPath, topic)
	p.waitReady(ctx, t)
	for range 3 { // the process is producing
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cons.Ack(m)
	}
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v (want exit status 0)", err)
	}
	s := readSummary(t, jsonPath)
	checkSummary(t, "produce", s)
	if s.Total.Count < 3 {
		t.Errorf("summary counts %d messages, the consumer received 3", s.Total.Count)
	}
	if stored := storedCount(ctx, t, c, topic); stored != s.Total.Count {
		t.Errorf("summary counts %d messages, the topic holds %d", s.Total.Count, stored)
	}
	t.Logf("%d messages at 10 msg/s until SIGTERM: p50 %.3f ms, max %.3f ms", s.Total.Count, s.Total.P50, s.Total.Max)
	if s.Total.P50 >= 50 {
		t.Errorf("p50 latency %.1f ms at 10 msg/s: the rate limiter's 100 ms wait is counted", s.Total.P50)
	}
}

// TestPerfPercentiles is the workload on which pulsar-perf-go's quantile
// sketch reports the maximum as p99: 200k latencies of 1-4 ms, 0.1% of them
// at 20-30 ms. The true p99 is 4.0 ms.
func TestPerfPercentiles(t *testing.T) {
	m := newMeter()
	const n, slow = 200_000, 200
	for i := range n - slow {
		m.record(time.Millisecond+time.Duration(i)*3*time.Millisecond/(n-slow), 100)
	}
	for i := range slow {
		m.record(20*time.Millisecond+time.Duration(i)*10*time.Millisecond/slow, 100)
	}
	h, bytes := m.swap(newHistogram())
	s := statsOf(h, bytes, time.Now(), 10*time.Second)
	if s.Count != n || s.Rate != n/10 || bytes != n*100 {
		t.Errorf("count %d rate %v bytes %d", s.Count, s.Rate, bytes)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", s.P50, 2.5}, {"p95", s.P95, 3.85}, {"p99", s.P99, 3.97}, {"p99.9", s.P999, 4.0}, {"max", s.Max, 29.95}} {
		if c.got < c.want*0.99 || c.got > c.want*1.01 {
			t.Errorf("%s = %.3f ms, want %.3f", c.name, c.got, c.want)
		}
	}
	if h2, _ := m.swap(newHistogram()); h2.TotalCount() != 0 {
		t.Errorf("a new window holds %d values", h2.TotalCount())
	}
}

// TestPerfFlagErrors: bad input fails before anything runs, or, for a
// service URL where nothing listens, within the operation timeout, with a
// message that says what to fix.
func TestPerfFlagErrors(t *testing.T) {
	nothing := fmt.Sprintf("pulsar://127.0.0.1:%d", freePorts(t, 1)[0])
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"produce"}, "no topic"},
		{[]string{"consume"}, "no topic"},
		{[]string{"produce", "-r", "-1", "t"}, "--rate -1"},
		{[]string{"produce", "-s", "0", "t"}, "--size 0"},
		{[]string{"produce", "-q", "0", "t"}, "--queue-size 0"},
		{[]string{"produce", "-n", "0", "t"}, "--num-producers 0"},
		{[]string{"produce", "--duration", "-1s", "t"}, "--duration"},
		{[]string{"produce", "--interval", "0s", "t"}, "--interval"},
		{[]string{"produce", "--token", "x", "--token-file", "f", "t"}, "one way to authenticate"},
		{[]string{"produce", "--tls-cert-file", "c", "t"}, "go together"},
		{[]string{"produce", "-u", "http://localhost:8080", "t"}, "--service-url"},
		{[]string{"produce", "--rate", "x", "t"}, "invalid argument"},
		{[]string{"consume", "-t", "Roundrobin", "t"}, "--subscription-type"},
		{[]string{"consume", "--subscription-position", "middle", "t"}, "--subscription-position"},
		{[]string{"consume", "--rate", "-5", "t"}, "--rate -5"},
		{[]string{"consume", "-r", "0", "t"}, "--receiver-queue-size 0"},
		{[]string{"produce", "-u", nothing, "--operation-timeout", "1s", "t"}, "cannot create a producer"},
		{[]string{"consume", "-u", nothing, "--operation-timeout", "1s", "t"}, "cannot create a consumer"},
	}
	for _, c := range cases {
		began := time.Now()
		err := runPerf(t.Context(), io.Discard, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("perf %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
		}
		if d := time.Since(began); d > 15*time.Second {
			t.Errorf("perf %s took %v to fail", strings.Join(c.args, " "), d)
		}
	}
}
