//go:build e2e

package sidebyside

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/e2e/plot"
)

func init() { addSuite("one-region", runOneRegion) }

// The one-region suite's shape. Each run publishes for oneRegionWarm,
// not measured, then measures the messages due in oneRegionWindow.
var (
	fixedRates      = []float64{2_000, 5_000, 20_000, 50_000}
	oneRegionWarm   = 2 * time.Second
	oneRegionWindow = 10 * time.Second
	// maxLadder are the fractions of a system's closed-loop rate tried,
	// in order, for its maximum sustainable rate: the first sustained is
	// it.
	maxLadder = []float64{0.95, 0.85, 0.75, 0.65, 0.55, 0.45}
)

// floorRate is the 20k pattern for the disk floor: a producer batching
// 1 KiB messages every millisecond at 20,000 msg/s sends entries of
// about 20 KiB, 1,000 a second (20 MB/s).
const floorRate = 20_000

// oneRegion is a system's figures in the suite.
type oneRegion struct {
	sys    system
	fixed  []rateResult // at fixedRates
	closed rateResult   // the closed-loop probe
	ladder []rateResult // the maximum search, down to the first sustained
}

// maxSustained is the highest rate the system sustained, among the
// maximum search's and the fixed rates; 0 if none.
func (o *oneRegion) maxSustained() float64 {
	best := 0.0
	for _, r := range append(append([]rateResult{}, o.fixed...), o.ladder...) {
		if r.sustained {
			best = max(best, r.rate)
		}
	}
	return best
}

func (o *oneRegion) at(rate float64) rateResult {
	for _, r := range o.fixed {
		if r.rate == rate {
			return r
		}
	}
	return rateResult{}
}

func runOneRegion(t *testing.T, e *env) section {
	load := machineLoad()
	// The load generator shares the servers' cores: on this machine there
	// are no others to give it.
	e.pin(t, os.Getpid())
	floorBin := buildFloor(t)
	mer := startMeridianOne(t, e)
	systems := []*oneRegion{{sys: mer}, {sys: startNATSOne(t, e, true)}, {sys: startNATSOne(t, e, false)}}

	var floor diskAndBookie
	var profile20k, profileMax cpuProfile
	stream := 0
	next := func() string { stream++; return fmt.Sprintf("one-region-%d", stream) }
	// A fresh process's first run pays one-time costs (its first topic
	// or stream, its first files, the first growth of its heap), which
	// are not the rate's: each system runs once first, unreported.
	for _, o := range systems {
		runRate(t, o.sys, next(), fixedRates[0], oneRegionWarm, oneRegionWindow)
	}
	// Rates outer, systems inner, so that the machine's drift touches
	// every system alike.
	for _, rate := range fixedRates {
		for _, o := range systems {
			if rate == floorRate && o.sys == system(mer) {
				// Back to back with the run it judges.
				floor = floors(t, e, floorBin)
				prof := startProfile(t, mer.proc.pid(), oneRegionWindow)
				o.fixed = append(o.fixed, runRate(t, o.sys, next(), rate, oneRegionWarm, oneRegionWindow))
				profile20k = prof.wait(t, "the standalone at 20,000 msg/s")
				continue
			}
			o.fixed = append(o.fixed, runRate(t, o.sys, next(), rate, oneRegionWarm, oneRegionWindow))
		}
	}
	for _, o := range systems {
		var prof *profiler
		if o.sys == system(mer) {
			prof = startProfile(t, mer.proc.pid(), oneRegionWindow)
		}
		o.closed = runRate(t, o.sys, next(), math.Inf(1), oneRegionWarm, oneRegionWindow)
		if prof != nil {
			profileMax = prof.wait(t, "the standalone in its closed-loop run")
		}
		for _, f := range maxLadder {
			rate := twoDigits(f * o.closed.reached)
			if rate <= o.maxSustained() || rate <= 0 {
				break // a fixed rate at or above it was sustained already
			}
			r := runRate(t, o.sys, next(), rate, oneRegionWarm, oneRegionWindow)
			o.ladder = append(o.ladder, r)
			if r.sustained {
				break
			}
		}
	}
	return mustSection("one-region", e, oneRegionMarkdown(systems, natsVersion(t, e), floor, profile20k, profileMax, load, machineLoad()),
		oneRegionCharts(systems)...)
}

// twoDigits rounds x to two significant digits.
func twoDigits(x float64) float64 {
	if x <= 0 {
		return 0
	}
	unit := math.Pow(10, math.Floor(math.Log10(x))-1)
	return math.Round(x/unit) * unit
}

// buildFloor builds cluster/bookie's test binary, whose BenchmarkAddPaced
// measures the bare disk's floor.
func buildFloor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bookie.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "./cluster/bookie/")
	cmd.Dir = filepath.Join(docsDir, "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./cluster/bookie/: %v\n%s", err, out)
	}
	return bin
}

// diskAndBookie are BenchmarkAddPaced's two cases for the 20k pattern:
// the bare disk (the ideal group commit on a file, the target's floor)
// and a bookie (its journal's group commit behind its TCP server, on
// loopback): between the two is the bookie's own share of Meridian's
// latency, and between the bookie and Meridian the broker's and the
// client's.
type diskAndBookie struct{ disk, bookie quantiles }

// floors runs BenchmarkAddPaced for the 20k pattern (20 KiB writes at
// 20 MB/s, 15 s per case), pinned to the env's cores, in a temporary
// folder on the disk the servers use.
func floors(t *testing.T, e *env, bin string) diskAndBookie {
	t.Helper()
	cmd := exec.Command("taskset", "-c", e.cpus, bin, "-test.run", "^$", "-test.bench", "AddPaced/size=20KiB/rate=20MBps$",
		"-test.benchtime", "15000x")
	cmd.Env = append(os.Environ(), "MERIDIAN_BENCH_SIZE=20", "MERIDIAN_BENCH_RATES=20", "MERIDIAN_BENCH_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("disk floor: %v\n%s", err, out)
	}
	var f diskAndBookie
	if f.disk, err = parseFloor(string(out), "disk"); err != nil {
		t.Fatal(err)
	}
	if f.bookie, err = parseFloor(string(out), "bookie"); err != nil {
		t.Fatal(err)
	}
	t.Logf("20 KiB at 20 MB/s: bare disk p50/p99/p99.9 %v ms, bookie %v ms", f.disk, f.bookie)
	return f
}

// parseFloor reads one side's (disk or bookie) p50-µs, p99-µs and p999-µs
// metrics from BenchmarkAddPaced's output line, where the two sides took
// turns: disk-p50-µs, bookie-p50-µs, and so on.
func parseFloor(out, kind string) (quantiles, error) {
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "BenchmarkAddPaced/") {
			continue
		}
		metric := map[string]time.Duration{}
		for i := 1; i < len(f); i++ {
			if v, err := strconv.ParseFloat(f[i-1], 64); err == nil {
				metric[f[i]] = time.Duration(v * float64(time.Microsecond))
			}
		}
		p50, ok50 := metric[kind+"-p50-µs"]
		p99, ok99 := metric[kind+"-p99-µs"]
		p999, ok999 := metric[kind+"-p999-µs"]
		if ok50 && ok99 && ok999 {
			return quantiles{p50, p99, p999}, nil
		}
	}
	return quantiles{}, fmt.Errorf("no BenchmarkAddPaced line with %[1]s-p50-µs, %[1]s-p99-µs and %[1]s-p999-µs in:\n%[2]s", kind, out)
}

// natsVersion is what the nats-server binary says its version is.
func natsVersion(t *testing.T, e *env) string {
	t.Helper()
	out, err := exec.Command(e.natsServer, "--version").Output()
	if err != nil {
		t.Fatalf("nats-server --version: %v", err)
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server:"))
}

func oneRegionMarkdown(systems []*oneRegion, natsVersion string, floor diskAndBookie, prof20k, profMax cpuProfile, loadBefore, loadAfter string) string {
	var b strings.Builder
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "```sh\ncd e2e/sidebyside && go test -mod=mod -tags e2e -count=1 -timeout 60m -run 'TestSideBySide/one-region' -v .\n```\n\n")
	fmt.Fprintf(w, "Meridian: `meridian standalone` (one process: embedded etcd, one bookie, the broker; ledgers "+
		"E=Qw=Qa=1, the bookie fdatasyncs its journal before every acknowledgement), driven by pulsar-client-go "+
		"(batching 1 ms). NATS: nats-server %s with JetStream, one R1 stream on file storage per run, with "+
		"`sync_interval: always` and with its default (fsync every 2 minutes), driven by nats.go's jetstream "+
		"package (async publish, pull consumer). Both clients: at most %d unacknowledged publishes, %d messages "+
		"buffered for the consumer, a cumulative acknowledgement every %d messages. The three servers run at once, "+
		"pinned to the same cores, and so is the test process (the load generator, both clients): this machine "+
		"has no other cores to give it. Load average %s at the start, %s at the end: other sessions' builds "+
		"and tests ran on the machine during the run.\n\n",
		natsVersion, maxPending, receiveQueue, ackEvery, loadBefore, loadAfter)
	fmt.Fprintf(w, "1 KiB messages, open loop: message i is due at start + i/rate and sent when due; latencies count "+
		"from that due time (publish: to the acknowledgement; end-to-end: to the consumer's receipt), over the "+
		"%v after a %v warm-up, each run on a new stream. A rate is **sustained** when every message of the "+
		"window is acknowledged and delivered, at no less than %.0f%% of the rate over the time from the "+
		"window's start to the last of them; otherwise the table shows what was reached.\n\n",
		oneRegionWindow, oneRegionWarm, sustainedShare*100)
	fmt.Fprintf(w, "| rate (msg/s) | system | stored msg/s (not sustained: since the run's start) | sustained | publish p50 / p99 / p99.9 ms | end-to-end p50 / p99 / p99.9 ms |\n|---|---|---|---|---|---|\n")
	for _, rate := range fixedRates {
		for _, o := range systems {
			writeRow(w, o.sys.label(), o.at(rate))
		}
	}
	fmt.Fprintf(w, "\n**Maximum sustainable rate**: a closed-loop run first (publishing as fast as the client's "+
		"queue of %d allows) gives the system's throughput C; then open-loop runs at %.0f%%, %.0f%%, ... of C "+
		"(rounded to two significant digits) until one is sustained. The maximum is the highest sustained rate of those runs "+
		"and of the fixed rates above.\n\n", maxPending, maxLadder[0]*100, maxLadder[1]*100)
	fmt.Fprintf(w, "| system | closed loop: stored msg/s, publish p50 / p99 / p99.9 ms | runs of the search | maximum sustainable |\n|---|---|---|---|\n")
	for _, o := range systems {
		var tries []string
		for _, r := range o.ladder {
			verdict := "sustained"
			if !r.sustained {
				verdict = fmt.Sprintf("not sustained (%.0f)", r.reached)
			}
			tries = append(tries, fmt.Sprintf("%.0f: %s", r.rate, verdict))
		}
		switch {
		case len(tries) == 0 && o.closed.reached == 0:
			tries = []string{"none: the closed loop stored nothing of its window"}
		case len(tries) == 0:
			tries = []string{"none: a fixed rate at or above the first step was sustained"}
		}
		best := "none sustained"
		if m := o.maxSustained(); m > 0 {
			best = fmt.Sprintf("**%.0f msg/s**", m)
		}
		fmt.Fprintf(w, "| %s | %.0f, %s | %s | %s |\n", o.sys.label(), o.closed.reached,
			o.closed.publish, strings.Join(tries, "; "), best)
	}
	fmt.Fprintf(w, "\nThe bare disk, in the same run just before Meridian's 20,000 msg/s run: `BenchmarkAddPaced`'s "+
		"floor (cluster/bookie) for the 20k pattern, 20 KiB writes at 20 MB/s with the ideal group commit, "+
		"latency from each write's due time: p50 / p99 / p99.9 **%s ms**. Its bookie case, the same writes "+
		"as adds to a bookie over loopback TCP (the journal's group commit; no broker, no client batching), "+
		"the two taking turns of 1,000 writes so that the disk's stalls fall on both alike: "+
		"**%s ms**. Each system also ran once, unreported, at %.0f msg/s before the first rate, so that no "+
		"measured run pays a fresh process's one-time costs.\n\n", floor.disk, floor.bookie, fixedRates[0])
	w.WriteString(oneRegionTargets(systems, floor))
	fmt.Fprintf(w, "\n%s\n%s\n![publish p99 against the offered rate](img/sidebyside-one-region-publish.png)\n"+
		"![end-to-end p99 against the offered rate](img/sidebyside-one-region-e2e.png)\n", prof20k.markdown(), profMax.markdown())
	w.Flush()
	return b.String()
}

func writeRow(w *bufio.Writer, label string, r rateResult) {
	sustained := "yes"
	switch {
	case r.behind:
		sustained = fmt.Sprintf("**no**: the client's queue stayed full for %v, run stopped", maxLag)
	case r.acked < r.sent || r.received < r.sent:
		sustained = fmt.Sprintf("**no**: of the window's %d, %d stored and %d delivered", r.sent, r.acked, r.received)
	case !r.sustained:
		sustained = fmt.Sprintf("**no**: the window's last message came %v after its end", r.late.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "| %.0f | %s | %.0f | %s | %s | %s |\n", r.rate, label, r.reached, sustained, r.publish, r.endToEnd)
}

// oneRegionTargets judges the three targets that this suite
// measures. systems are Meridian, JetStream sync always, JetStream
// default, in that order.
func oneRegionTargets(systems []*oneRegion, floor diskAndBookie) string {
	mer, always, def := systems[0], systems[1], systems[2]
	verdict := func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	}
	var b strings.Builder
	b.WriteString("Targets (issues 16 and 36):\n\n")
	ratio := 0.0
	if def.maxSustained() > 0 {
		ratio = mer.maxSustained() / def.maxSustained()
	}
	fmt.Fprintf(&b, "- *Maximum publish rate at least 1.5x JetStream's default*: %s. Meridian %.0f msg/s, JetStream "+
		"default %.0f msg/s: %.2fx.\n", verdict(ratio >= 1.5), mer.maxSustained(), def.maxSustained(), ratio)
	at20k := mer.at(floorRate)
	for _, t := range []struct {
		what  string
		floor time.Duration
		slack int
	}{{"the bare disk's", floor.disk.p99, 1}, {"the bookie's", floor.bookie.p99, 2}} {
		bound := t.floor + time.Duration(t.slack)*time.Millisecond
		fmt.Fprintf(&b, "- *Publish p99 at 20,000 msg/s at most %s p99 + %d ms*: %s. Meridian %s ms "+
			"(sustained: %v) against %s + %d = %s ms.\n", t.what, t.slack, verdict(at20k.sustained && at20k.publish.p99 <= bound),
			ms(at20k.publish.p99), at20k.sustained, ms(t.floor), t.slack, ms(bound))
	}
	var both []string
	below := true
	for _, rate := range fixedRates {
		m, a := mer.at(rate), always.at(rate)
		if !m.sustained || !a.sustained {
			continue
		}
		both = append(both, fmt.Sprintf("%.0f: %s against %s ms", rate, ms(m.publish.p99), ms(a.publish.p99)))
		below = below && m.publish.p99 < a.publish.p99
	}
	if len(both) == 0 {
		fmt.Fprintf(&b, "- *Publish p99 below JetStream sync-always at every rate both sustain*: no fixed rate was "+
			"sustained by both.\n")
	} else {
		fmt.Fprintf(&b, "- *Publish p99 below JetStream sync-always at every rate both sustain*: %s. %s.\n",
			verdict(below), strings.Join(both, "; "))
	}
	return b.String()
}

func oneRegionCharts(systems []*oneRegion) []chart {
	series := func(pick func(rateResult) time.Duration) []plot.Series {
		var out []plot.Series
		for _, o := range systems {
			s := plot.Series{Name: o.sys.label()}
			for _, r := range o.fixed {
				if v := pick(r); v > 0 {
					s.Points = append(s.Points, plot.Point{X: r.rate, Y: float64(v) / float64(time.Millisecond)})
				}
			}
			out = append(out, s)
		}
		return out
	}
	return []chart{
		{File: "sidebyside-one-region-publish.png", Chart: plot.Chart{Title: "Publish p99 (send to ack), 1 KiB, one region",
			XLabel: "offered rate (msg/s)", YLabel: "p99 (ms)", LogY: true,
			Series: series(func(r rateResult) time.Duration { return r.publish.p99 })}},
		{File: "sidebyside-one-region-e2e.png", Chart: plot.Chart{Title: "End-to-end p99 (send to receipt), 1 KiB, one region",
			XLabel: "offered rate (msg/s)", YLabel: "p99 (ms)", LogY: true,
			Series: series(func(r rateResult) time.Duration { return r.endToEnd.p99 })}},
	}
}

func TestParseFloor(t *testing.T) {
	out := "goos: linux\n" +
		"BenchmarkAddPaced/size=20KiB/rate=20MBps-2 \t   15000\t   2000071 ns/op\t      1620 bookie-p50-µs\t      5230 bookie-p99-µs\t     11020 bookie-p999-µs" +
		"\t      1411 disk-p50-µs\t      4102 disk-p99-µs\t      9180 disk-p999-µs\t      6400 sync-p99-µs\n" +
		"PASS\n"
	for kind, want := range map[string]quantiles{
		"disk":   {1411 * time.Microsecond, 4102 * time.Microsecond, 9180 * time.Microsecond},
		"bookie": {1620 * time.Microsecond, 5230 * time.Microsecond, 11020 * time.Microsecond},
	} {
		q, err := parseFloor(out, kind)
		if err != nil {
			t.Fatal(err)
		}
		if q != want {
			t.Fatalf("parseFloor(%s) = %+v, want %+v", kind, q, want)
		}
	}
	if _, err := parseFloor("BenchmarkAddPaced/x-2 10 5 ns/op\n", "disk"); err == nil {
		t.Fatal("a line without the percentiles was accepted")
	}
	if _, err := parseFloor(out, "memory"); err == nil {
		t.Fatal("a case the output does not have was found")
	}
}

func TestTwoDigits(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 0}, {87_654, 88_000}, {123, 120}, {9.96, 10}, {1_049, 1_000}} {
		if got := twoDigits(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("twoDigits(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// countingProducer records the stamps it is given.
type countingProducer struct{ stamps []time.Time }

func (c *countingProducer) publish(p []byte) error { c.stamps = append(c.stamps, dueOf(p)); return nil }
func (c *countingProducer) close()                 {}

func TestDriveSchedule(t *testing.T) {
	var p countingProducer
	start := time.Now()
	from, end := start.Add(50*time.Millisecond), start.Add(100*time.Millisecond)
	inWindow, behind, err := drive(t.Context(), &p, 1000, start, from, end)
	if err != nil || behind {
		t.Fatalf("drive: %v, behind %v", err, behind)
	}
	// Message i is due at start + i ms, before end: 100, of which those
	// from 50 ms on are in the window, however late the loop ran.
	if len(p.stamps) != 100 || inWindow != 50 {
		t.Fatalf("sent %d (want 100), %d in the window (want 50)", len(p.stamps), inWindow)
	}
	for i, s := range p.stamps {
		if want := start.Add(time.Duration(i) * time.Millisecond); !s.Equal(want) {
			t.Fatalf("message %d stamped %v, want %v", i, s.Sub(start), want.Sub(start))
		}
	}
}
