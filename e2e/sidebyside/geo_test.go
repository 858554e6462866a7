//go:build e2e

package sidebyside

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/e2e"
	"github.com/meridian-mq/meridian/e2e/plot"
)

// The "geo" suite: replication lag and catch-up across three regions,
// NATS JetStream (gateways, a stream sourced by one in each other region)
// beside Meridian (the e2e geo bed, on disk bookies and on in-memory
// bookies), over the same shaped links.

func init() {
	suites = append(suites, struct {
		name string
		run  func(t *testing.T, e *env) section
	}{"geo", runGeo})
}

// geoRates are the publish rates (msg/s of 1 KiB) the lag is measured at.
var geoRates = []int{1000, 5000, 10000}

// The Meridian systems measure the lag once more at lowBatchingRate with
// r1's producer batching for lowBatching instead of the client's default
// 10ms: about ten times the entries for the same messages, and a message
// held up in its batch a tenth as long. NATS has no client batching to
// lower.
const (
	lowBatchingRate = 1000
	lowBatching     = time.Millisecond
)

const (
	// geoWindow is how long each rate's lag is measured, after the
	// first message reached both destinations.
	geoWindow = 20 * time.Second
	// geoCut is how long r2 is cut off for the catch-up.
	geoCut = 60 * time.Second
	// geoCatchUpRate is what r1 publishes during and after the cut.
	geoCatchUpRate = 1000
)

// geoSystem is one system's figures.
type geoSystem struct {
	name string
	lags map[int]e2e.Lag
	cpu  map[int]windowCPU // the CPU over each rate's window
	// lowBatching and lowBatchingCPU are the lowBatching run's, for the
	// Meridian systems; lowBatching.Window is 0 for NATS.
	lowBatching    e2e.Lag
	lowBatchingCPU windowCPU
	// profiles are CPU profiles of its server processes during a run at
	// profileRate of its own, for the system with profile set.
	profile  bool
	profiles []cpuProfile
	catchUp  e2e.CatchUp
	// load is the machine's load average when the system's first lag
	// measurement began, and after its catch-up.
	load [2]string
}

// runGeo measures NATS, then Meridian on disk bookies, then on memory
// bookies, then NATS syncing every write, each on its own servers
// (stopped before the next starts), and writes the section.
func runGeo(t *testing.T, e *env) section {
	loadBefore := machineLoad()
	var systems []*geoSystem
	run := func(name string, profile bool, start func(ctx context.Context, t *testing.T) geoTarget) {
		s := &geoSystem{name: name, lags: map[int]e2e.Lag{}, cpu: map[int]windowCPU{}, profile: profile}
		systems = append(systems, s)
		t.Run(strings.NewReplacer(" ", "-", ",", "").Replace(name), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
			defer cancel()
			target := start(ctx, t)
			cpu := startCPUSampler(t, target.procs())
			s.load[0] = machineLoad()
			for _, rate := range geoRates {
				lag := target.measureLag(ctx, t, rate, geoWindow)
				s.lags[rate] = lag
				s.cpu[rate] = cpu.between(lag.Start, lag.Start.Add(lag.Window))
				t.Logf("%s, %d msg/s: %.0f msg/s acked over %v; lag p50 %s p99 %s; publish p99 %s; servers %.2f cores of the machine's %.2f busy",
					name, rate, float64(len(lag.Publish))/lag.Window.Seconds(), lag.Window.Round(time.Millisecond),
					fmtMs(e2e.Percentile(lag.Lags, 0.5)), fmtMs(e2e.Percentile(lag.Lags, 0.99)),
					fmtMs(e2e.Percentile(lag.Publish, 0.99)), s.cpu[rate].servers(), s.cpu[rate].machine)
			}
			if m, ok := target.(meridianTarget); ok {
				s.lowBatching = m.MeasureLagBatched(ctx, t, lowBatchingRate, geoWindow, lowBatching)
				s.lowBatchingCPU = cpu.between(s.lowBatching.Start, s.lowBatching.Start.Add(s.lowBatching.Window))
				t.Logf("%s, %d msg/s batching %v: lag p99 %s; servers %.2f cores", name, lowBatchingRate, lowBatching,
					fmtMs(e2e.Percentile(s.lowBatching.Lags, 0.99)), s.lowBatchingCPU.servers())
			}
			if s.profile {
				s.profiles = profileRun(ctx, t, target)
			}
			s.catchUp = target.measureCatchUp(ctx, t, geoCatchUpRate, geoCut)
			s.load[1] = machineLoad()
			t.Logf("%s, catch-up after a %v cut at %d msg/s: backlog %d, first arrival %v after the heal, caught up %v after it",
				name, geoCut, geoCatchUpRate, s.catchUp.Backlog, s.catchUp.Resumed.Round(time.Millisecond), s.catchUp.CaughtUp.Round(time.Millisecond))
		})
	}
	// geoVerdict reads the systems in this order.
	run("NATS JetStream", false, func(ctx context.Context, t *testing.T) geoTarget {
		return natsTarget{startNATSGeo(ctx, t, e, false)}
	})
	run("Meridian, disk bookies", false, func(ctx context.Context, t *testing.T) geoTarget {
		return meridianTarget{startMeridianGeo(ctx, t, e)}
	})
	run("Meridian, memory bookies", true, func(ctx context.Context, t *testing.T) geoTarget {
		return meridianTarget{startMeridianGeo(ctx, t, e, "--storage", "memory")}
	})
	run("NATS JetStream, sync always", false, func(ctx context.Context, t *testing.T) geoTarget {
		return natsTarget{startNATSGeo(ctx, t, e, true)}
	})
	if t.Failed() {
		return section{}
	}
	for _, s := range systems {
		if len(s.lags) < len(geoRates) {
			t.Skipf("%s did not run (-run left it out): the section needs every system, and is not written", s.name)
		}
	}
	return geoSection(e, systems, loadBefore, machineLoad())
}

// profileRate is the rate of the profiled run.
const profileRate = 1000

// profileRun profiles, during a lag run at profileRate of its own (not
// reported: perf's sampling costs CPU), the processes that handle a
// message from r1 to r2: every server process of r1 and r2.
func profileRun(ctx context.Context, t *testing.T, target geoTarget) []cpuProfile {
	t.Helper()
	var profs []*profiler
	var names []string
	for _, p := range target.procs() {
		if strings.HasPrefix(p.name, "r1-") || strings.HasPrefix(p.name, "r2-") {
			profs = append(profs, startProfile(t, p.pid, geoWindow))
			names = append(names, p.name)
		}
	}
	target.measureLag(ctx, t, profileRate, geoWindow)
	var out []cpuProfile
	for i, p := range profs {
		out = append(out, p.wait(t, names[i]))
	}
	return out
}

// geoTarget is one system on its three regions.
type geoTarget interface {
	procs() []proc
	measureLag(ctx context.Context, t *testing.T, rate int, window time.Duration) e2e.Lag
	measureCatchUp(ctx context.Context, t *testing.T, rate int, cut time.Duration) e2e.CatchUp
}

type natsTarget struct{ *natsGeo }

func (n natsTarget) procs() []proc {
	var out []proc
	for _, s := range n.servers {
		out = append(out, proc{name: "nats-server " + s.region, pid: int(s.pid.Load())})
	}
	return out
}

type meridianTarget struct{ *e2e.GeoBed }

func (m meridianTarget) procs() []proc {
	var out []proc
	for _, p := range bedProcesses(m.Bed()) {
		out = append(out, proc{name: p.Name, pid: p.PID()})
	}
	return out
}

func (m meridianTarget) measureLag(ctx context.Context, t *testing.T, rate int, window time.Duration) e2e.Lag {
	return m.MeasureLag(ctx, t, rate, window)
}

func (m meridianTarget) measureCatchUp(ctx context.Context, t *testing.T, rate int, cut time.Duration) e2e.CatchUp {
	return m.MeasureCatchUp(ctx, t, rate, cut)
}

// bedProcesses are every server process of the bed: the global etcd and
// each region's etcd, bookies, brokers and replicator workers.
func bedProcesses(b *e2e.Bed) []*e2e.Process {
	var out []*e2e.Process
	if b.Global != nil {
		out = append(out, b.Global)
	}
	for _, r := range b.Regions {
		out = append(out, r.Etcd...)
		out = append(out, r.Bookies...)
		for _, brk := range r.Brokers {
			out = append(out, brk.Process)
		}
		out = append(out, r.Replicators...)
	}
	return out
}

// startMeridianGeo starts the geo bed with bookieArgs and pins every one
// of its processes to the env's cores.
func startMeridianGeo(ctx context.Context, t *testing.T, e *env, bookieArgs ...string) *e2e.GeoBed {
	t.Helper()
	b := e2e.StartGeoBed(ctx, t, e.meridian, bookieArgs...)
	for _, p := range bedProcesses(b.Bed()) {
		e.pin(t, p.PID())
	}
	return b
}

// fmtMs prints d in milliseconds.
func fmtMs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// geoSection writes the suite's Markdown and charts.
func geoSection(e *env, systems []*geoSystem, loadBefore, loadAfter string) section {
	var b strings.Builder
	fmt.Fprintf(&b, `## Across regions beside NATS JetStream: replication lag and catch-up

`+"```sh"+`
cd e2e/sidebyside && go test -mod=mod -tags e2e -count=1 -timeout 120m -run TestSideBySide/geo -v .
`+"```"+`

Three regions, r1, r2 and r3; every path between two regions goes through an e2e.Link that adds
%v one way. r1 publishes 1 KiB messages at a fixed rate, paced by the clock, to a stream or topic
that r2 and r3 replicate; a consumer in each of r2 and r3 reads its region's copy. **Lag** is a
message's first arrival at the consumer in r2 or r3 minus the time its publish was made in r1, both
destinations together, over the %v after the first message reached both (a new stream's or topic's
replication starts late). Every acknowledged message must arrive in both, once, and each
destination's link must have carried at least the replicated payload bytes.

- **NATS JetStream** (nats-server as go.mod's tool, clients with nats.go): three clusters of one
  server each (one server per region, so no stream is replicated inside a region), JetStream on
  file storage with its default sync (every 2 minutes, not before the ack), joined by gateways.
  Each gateway listens behind its region's link and advertises the link's address, and each
  server names the others' gateways by their links. In r1 a stream; in r2 and r3 a stream that
  sources it (NATS's own cross-region replication); an ordered consumer on each. Once more with
  `+"`sync_interval: always`"+` (an fsync after every write, before the ack): the peer of
  Meridian on disk bookies.
- **Meridian**: the e2e geo bed: in each region an etcd, two bookies (E=Qw=Qa=2), a broker and two
  replicator workers, and one global etcd (19 processes); the brokers' links carry the
  replicators' traffic. Once with bookies that fdatasync before they ack, once with
  `+"`meridian bookie --storage memory`"+`. Clients with pulsar-client-go (default batching).

Every server process of both systems is pinned to cores %s; the clients run in the test process,
unpinned. Load average %s at the start and %s at the end (the systems' own load, and
whatever else ran on the 2 vCPUs: the figures are absolute only as far as the load allows); the
systems ran one after the other, not at once. Under contention Linux shares the CPUs among runnable threads, not among
systems, so the one with more processes (Meridian's 19 against NATS's 3) gets more of them; the
whole machine's column says how busy the 2 cores were over each window.

**CPU per message** is the servers' CPU-seconds over the window per thousand of the window's messages,
each delivered in both r2 and r3. The rows marked "1 ms batching" are Meridian's extra run at %s msg/s
with r1's producer batching for %v instead of the client's default 10 ms.

| system | asked msg/s | acked msg/s | lag p50 | lag p99 | lag p99.9 | r1 publish p99 | servers' CPU, cores | CPU-s per 1,000 messages | whole machine's CPU, cores | load average (start, end of the system's runs) |
|---|---|---|---|---|---|---|---|---|---|---|
`, e2e.GeoLinkLatency, geoWindow, e.cpus, loadBefore, loadAfter, thousands(lowBatchingRate), lowBatching)
	row := func(name string, rate int, l e2e.Lag, cpu windowCPU, load [2]string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %.2f | %.3f | %.2f | %s, %s |\n", name, thousands(float64(rate)),
			thousands(float64(len(l.Publish))/l.Window.Seconds()), fmtMs(e2e.Percentile(l.Lags, 0.5)),
			fmtMs(e2e.Percentile(l.Lags, 0.99)), fmtMs(e2e.Percentile(l.Lags, 0.999)),
			fmtMs(e2e.Percentile(l.Publish, 0.99)), cpu.servers(), perThousand(l, cpu), cpu.machine, load[0], load[1])
	}
	for _, rate := range geoRates {
		for _, s := range systems {
			row(s.name, rate, s.lags[rate], s.cpu[rate], s.load)
		}
		if rate != lowBatchingRate {
			continue
		}
		for _, s := range systems {
			if s.lowBatching.Window > 0 {
				row(s.name+", 1 ms batching", lowBatchingRate, s.lowBatching, s.lowBatchingCPU, s.load)
			}
		}
	}
	fmt.Fprintf(&b, `
**Catch-up.** r1 publishes %s msg/s; once the first message reached r2 and r3, r2 is cut off both
ways for %v (every connection into its link, and every one its own servers make through the
others'), then restored while r1 goes on publishing. Backlog: what r1 had acknowledged at the heal
that r2's consumer had not received. Caught up: from the heal to the arrival in r2 of the last
message r1 acknowledged before it. Drain rate: the backlog over the time from the first arrival
after the heal to caught up. A NATS stream retries a source that failed with a growing backoff
(10 s more per failure, up to 2 minutes; nats-server's stream.go, calculateRetryBackoff), checked
every 10 s, so its first arrival after the heal depends on where the heal falls in that schedule;
Meridian's replication task retries with a backoff capped at 5 s.

| system | backlog at the heal | first arrival after the heal | caught up after | drain rate msg/s |
|---|---|---|---|---|
`, thousands(geoCatchUpRate), geoCut)
	for _, s := range systems {
		c := s.catchUp
		drain := float64(c.Backlog) / max(c.CaughtUp-c.Resumed, time.Millisecond).Seconds()
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", s.name, thousands(float64(c.Backlog)),
			c.Resumed.Round(time.Millisecond), c.CaughtUp.Round(time.Millisecond), thousands(drain))
	}
	b.WriteString("\n" + geoVerdict(systems) + "\n")
	for _, s := range systems {
		if len(s.profiles) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n**Where the CPU goes at %s msg/s, %s**, in a run of its own after the measured ones, each "+
			"server process of r1 and r2:\n\n", thousands(profileRate), s.name)
		for _, p := range s.profiles {
			b.WriteString("- " + p.markdown())
		}
	}
	charts := geoCharts(systems)
	for _, c := range charts {
		fmt.Fprintf(&b, "\n![%s](img/%s)\n", c.Title, c.File)
	}
	return mustSection("geo", e, b.String(), charts...)
}

// geoVerdict states the target (memory-bookie lag p99 below NATS's at
// every rate) met or not, with the figures, and for a rate where it is
// not met, the CPU profile of the servers during that window.
func geoVerdict(systems []*geoSystem) string {
	nats, disk, memory, natsSync := systems[0], systems[1], systems[2], systems[3]
	var b strings.Builder
	met := true
	var rows []string
	for _, rate := range geoRates {
		np, mp := e2e.Percentile(nats.lags[rate].Lags, 0.99), e2e.Percentile(memory.lags[rate].Lags, 0.99)
		ok := mp < np
		met = met && ok
		word := "below"
		if !ok {
			word = "not below"
		}
		rows = append(rows, fmt.Sprintf("at %s msg/s Meridian's p99 %s is %s NATS's %s", thousands(float64(rate)), fmtMs(mp), word, fmtMs(np)))
	}
	verdict := "**met**"
	if !met {
		verdict = "**not met**"
	}
	fmt.Fprintf(&b, "**Target: replication lag with in-memory bookies below NATS's p99 at every rate measured: %s.** %s.\n",
		verdict, strings.Join(rows, "; "))
	cpuRows := func(mer, peer *geoSystem) string {
		var rows []string
		for _, rate := range []int{1000, 5000} {
			m, n := perThousand(mer.lags[rate], mer.cpu[rate]), perThousand(peer.lags[rate], peer.cpu[rate])
			rows = append(rows, fmt.Sprintf("at %s msg/s %.3f against NATS's %.3f CPU-seconds per 1,000 messages (%.2f×)",
				thousands(float64(rate)), m, n, m/n))
		}
		return strings.Join(rows, "; ")
	}
	fmt.Fprintf(&b, "\n**Target: CPU per replicated message, Meridian on memory bookies (E=Qw=2 per region) at most NATS's "+
		"(JetStream R1 per region, file storage, default sync).** %s.\n", cpuRows(memory, nats))
	fmt.Fprintf(&b, "\nThe same with every write on disk before its ack on both sides: Meridian on disk bookies (fdatasync "+
		"before the ack, E=Qw=2 per region) against JetStream R1 per region with `sync_interval: always`: %s.\n", cpuRows(disk, natsSync))
	low := memory.lowBatching
	lp, np := e2e.Percentile(low.Lags, 0.99), e2e.Percentile(nats.lags[lowBatchingRate].Lags, 0.99)
	fmt.Fprintf(&b, "\n**Target: lag p99 at %s msg/s with %v batching below NATS's, the servers under 1.5 cores.** "+
		"Meridian on memory bookies: %s against NATS's %s, its servers %.2f cores.\n",
		thousands(lowBatchingRate), lowBatching, fmtMs(lp), fmtMs(np), memory.lowBatchingCPU.servers())
	for _, rate := range geoRates {
		np, mp := e2e.Percentile(nats.lags[rate].Lags, 0.99), e2e.Percentile(memory.lags[rate].Lags, 0.99)
		if mp < np {
			continue
		}
		m, n := memory.cpu[rate], nats.cpu[rate]
		fmt.Fprintf(&b, "\nWhere the time goes at %s msg/s: the CPU profile over the window, in cores of the machine's 2, busiest process first. Meridian on memory bookies: %s; its servers %.2f cores in all, while the whole machine was busy %.2f cores. NATS: %s; its servers %.2f cores in all, the machine %.2f.\n",
			thousands(float64(rate)), topCPU(m.procs, 6), m.servers(), m.machine, topCPU(n.procs, 3), n.servers(), n.machine)
	}
	return b.String()
}

// perThousand is the servers' CPU-seconds over l's window per thousand
// of its messages, each of which arrived in both destinations.
func perThousand(l e2e.Lag, cpu windowCPU) float64 {
	return cpu.servers() * l.Window.Seconds() / (float64(len(l.Publish)) / 1000)
}

// topCPU lists the n busiest processes of ps (sorted busiest first).
func topCPU(ps []procCPU, n int) string {
	var out []string
	for _, p := range ps[:min(n, len(ps))] {
		out = append(out, fmt.Sprintf("%s %.2f", p.name, p.cores))
	}
	return strings.Join(out, ", ")
}

// geoCharts are, per rate, the lag at each percentile for every system.
func geoCharts(systems []*geoSystem) []chart {
	quantiles := []float64{0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999}
	var charts []chart
	for _, rate := range geoRates {
		c := chart{File: fmt.Sprintf("sidebyside-geo-lag-%d.png", rate), Chart: plot.Chart{
			Title:  fmt.Sprintf("Replication lag r1 -> r2, r3 at %s msg/s (20 ms links)", thousands(float64(rate))),
			XLabel: "percentile", YLabel: "lag (ms)", LogY: true}}
		for _, s := range systems {
			series := plot.Series{Name: s.name}
			for _, q := range quantiles {
				lag := e2e.Percentile(s.lags[rate].Lags, q)
				series.Points = append(series.Points, plot.Point{X: q * 100, Y: max(float64(lag)/float64(time.Millisecond), 0.1)})
			}
			c.Series = append(c.Series, series)
		}
		charts = append(charts, c)
	}
	return charts
}

// thousands prints x rounded, with thousands separators.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// proc is one server process to account CPU to.
type proc struct {
	name string
	pid  int
}

// procCPU is a process's CPU over a window, in cores.
type procCPU struct {
	name  string
	cores float64
}

// windowCPU is the CPU used over a window, in cores: by each server
// process (busiest first), and by the whole machine (every process, the
// other helpers' included).
type windowCPU struct {
	procs   []procCPU
	machine float64
}

// servers is what the server processes used together.
func (w windowCPU) servers() float64 {
	total := 0.0
	for _, p := range w.procs {
		total += p.cores
	}
	return total
}

// cpuSample is every process's CPU time used so far, at one moment.
type cpuSample struct {
	at      time.Time
	cpu     []time.Duration // in the sampler's procs order
	machine time.Duration   // every CPU's busy time (machineCPU)
}

// cpuSampler reads the CPU time of a set of processes every 500 ms, so
// that a measurement's window can be given the CPU its servers used
// during it: the profile that names a bottleneck process. Its goroutine
// stops when the test ends.
type cpuSampler struct {
	procs []proc
	mu    sync.Mutex
	// samples are in time order, at most maxCPUSamples of them.
	samples []cpuSample
}

// maxCPUSamples bounds a sampler's memory: an hour at two a second.
const maxCPUSamples = 7200

// startCPUSampler samples procs until the test ends.
func startCPUSampler(t *testing.T, procs []proc) *cpuSampler {
	s := &cpuSampler{procs: procs}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			smp := cpuSample{at: time.Now(), machine: machineCPU()}
			for _, p := range procs {
				smp.cpu = append(smp.cpu, processCPU(p.pid))
			}
			s.mu.Lock()
			s.samples = append(s.samples[max(0, len(s.samples)-maxCPUSamples+1):], smp)
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return s
}

// between is the CPU from the last sample before from to the first at or
// after to; zero if the samples do not cover the window.
func (s *cpuSampler) between(from, to time.Time) windowCPU {
	// The window's end may be just past the latest sample: wait for the
	// next one.
	deadline := time.Now().Add(2 * time.Second)
	for {
		s.mu.Lock()
		covered := len(s.samples) > 0 && !s.samples[len(s.samples)-1].at.Before(to)
		s.mu.Unlock()
		if covered || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.samples, func(x cpuSample) bool { return !x.at.Before(from) }) - 1
	j := slices.IndexFunc(s.samples, func(x cpuSample) bool { return !x.at.Before(to) })
	if i < 0 || j < 0 {
		return windowCPU{}
	}
	a, z := s.samples[i], s.samples[j]
	secs := z.at.Sub(a.at).Seconds()
	var out []procCPU
	for k, p := range s.procs {
		out = append(out, procCPU{name: p.name, cores: (z.cpu[k] - a.cpu[k]).Seconds() / secs})
	}
	slices.SortFunc(out, func(x, y procCPU) int { return cmp.Compare(y.cores, x.cores) })
	return windowCPU{procs: out, machine: (z.machine - a.machine).Seconds() / secs}
}

// machineCPU is the time every CPU of the machine has spent busy (user,
// nice, system, irq, softirq and steal), from /proc/stat's cpu line in
// ticks of 10 ms; zero if it cannot be read.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		var v int64
		fmt.Sscan(f[i], &v)
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// processCPU is the CPU time process pid has used (e2e.ProcCPUTime);
// zero if it cannot be read (the process has exited, say).
func processCPU(pid int) time.Duration {
	d, err := e2e.ProcCPUTime(pid)
	if err != nil {
		return 0
	}
	return d
}
