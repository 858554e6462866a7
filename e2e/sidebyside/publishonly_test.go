//go:build e2e

package sidebyside

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/e2e"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func init() { addSuite("publish-only", runPublishOnly) }

// The publish-only suite measures each system's maximum publish rate with
// its own ecosystem's bench tool, as a user of either would: the server
// on one core and the tool on the other, so that the tool's CPU is
// visible and never the server's. The runs alternate between the
// systems, so that the disk's drift touches both alike.
const (
	publishOnlyRuns = 5
	// publishOnlyWindows are pulsar-client-go perf's 10-second report
	// windows a Meridian run lasts; its rate is their mean.
	publishOnlyWindows = 3
	// serverCore and toolCore are the cores the server and the bench tool
	// are pinned to.
	serverCore, toolCore = "0", "1"
)

// The two tools, at the versions the figures were made with. Each is
// installed from the module proxy by `go install`, with its own go.mod,
// so that neither moves this module's dependencies.
const (
	pulsarPerfModule = "github.com/apache/pulsar-client-go/perf@v0.19.0"
	natsCLIModule    = "github.com/nats-io/natscli/nats@v0.5.1"
)

// publishRun is one run's figures.
type publishRun struct {
	rate float64 // messages a second, as the tool reports it
	// serverCores and toolCores are the CPU each process used over the
	// run, in cores.
	serverCores, toolCores float64
	// stages is where a Meridian run's time went; nil for JetStream.
	stages *publishStages
}

// publishStages are a standalone's own means over a run, from its
// /metrics: how long the ledger client's add took (broker to bookie and
// back), how long the bookie took (read to answer), and one journal
// fdatasync. The rest of a publish is the client's batching and the
// broker's and client's handling.
type publishStages struct {
	ledgerAdd, bookieAdd, journalSync time.Duration
	addsPerSync                       float64
}

// publishSide is one system's runs and how to make one.
type publishSide struct {
	name  string // of its runs' subtests
	label string
	run   func(t *testing.T) publishRun
	runs  []publishRun
}

func runPublishOnly(t *testing.T, e *env) section {
	if n := runtime.NumCPU(); n < 2 {
		t.Skipf("the publish-only suite needs two cores (server and tool apart), and this machine has %d", n)
	}
	load := machineLoad()
	tools := t.TempDir()
	perf, natsCLI := installTool(t, tools, pulsarPerfModule), installTool(t, tools, natsCLIModule)
	server := *e
	server.cpus = serverCore
	sides := publishSides{
		meridian: &publishSide{name: "meridian", label: "Meridian standalone (1 bookie, fdatasync before every ack), pulsar-client-go perf",
			run: func(t *testing.T) publishRun { return meridianPublishRun(t, &server, perf, t.TempDir()) }},
		jetStream: &publishSide{name: "jetstream", label: "JetStream R1, file storage, default sync (no fsync before the ack), nats bench",
			run: func(t *testing.T) publishRun { return natsPublishRun(t, &server, natsCLI, false, 3_000_000) }},
		// One run of JetStream with an fsync before every ack, the
		// durability Meridian gives: its rate is a small fraction of the
		// others'.
		syncAlways: &publishSide{name: "jetstream-sync-always", label: "JetStream R1, file storage, `sync_interval: always`, nats bench",
			run: func(t *testing.T) publishRun { return natsPublishRun(t, &server, natsCLI, true, 200_000) }},
	}
	// The floor under Meridian's figure: the same standalone with its data
	// in memory (tmpfs), where a write and an fdatasync cost next to
	// nothing.
	if st, err := os.Stat(memoryDir); err == nil && st.IsDir() {
		sides.floor = &publishSide{name: "floor", label: "the floor: Meridian standalone on tmpfs (" + memoryDir + "), pulsar-client-go perf",
			run: func(t *testing.T) publishRun {
				dir, err := os.MkdirTemp(memoryDir, "meridian-publish-only-")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				return meridianPublishRun(t, &server, perf, dir)
			}}
	}
	alternating := []*publishSide{sides.meridian, sides.jetStream}
	if sides.floor != nil {
		alternating = append(alternating, sides.floor)
	}
	for i := range publishOnlyRuns {
		// Alternate which system goes first.
		order := slices.Clone(alternating)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			// A subtest per run, so that its data directory goes as soon
			// as it ends: a run stores 3 GB.
			t.Run(fmt.Sprintf("%d-%s", i+1, s.name), func(t *testing.T) { s.record(t) })
		}
	}
	t.Run(sides.syncAlways.name, sides.syncAlways.record)
	if t.Failed() {
		return section{}
	}
	return mustSection("publish-only", &server, publishOnlyMarkdown(sides, natsVersion(t, e), load, machineLoad()))
}

// record makes one run and keeps its figures.
func (s *publishSide) record(t *testing.T) {
	r := s.run(t)
	t.Logf("%s: %.0f msg/s, server %.2f cores, tool %.2f cores", s.label, r.rate, r.serverCores, r.toolCores)
	s.runs = append(s.runs, r)
}

// installTool installs module@version's command into dir and returns its
// path.
func installTool(t *testing.T, dir, moduleAtVersion string) string {
	t.Helper()
	cmd := exec.Command("go", "install", moduleAtVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", moduleAtVersion, err, out)
	}
	path := moduleAtVersion[:strings.LastIndexByte(moduleAtVersion, '@')]
	return filepath.Join(dir, path[strings.LastIndexByte(path, '/')+1:])
}

// perfWindow matches pulsar-client-go perf's report of one window:
// "Stats - Publish rate: 126532.5 msg/s - ...".
var perfWindow = regexp.MustCompile(`Publish rate: *([0-9.]+) msg/s`)

// meridianPublishRun starts a fresh standalone and runs pulsar-client-go's
// perf against it with the flags (1 KiB, 1 ms batching, no rate
// limit, its default 1,000 pending messages) for publishOnlyWindows
// windows.
func meridianPublishRun(t *testing.T, server *env, perf, dataDir string) publishRun {
	m := startMeridianOneIn(t, server, dataDir)
	tool := exec.Command("taskset", "-c", toolCore, perf, "produce", "-u", m.serviceURL,
		"-r", "0", "-s", strconv.Itoa(messageSize), "-b", "1", m.topic("publish-only"))
	tool.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// perf logs its windows on stderr.
	out, err := tool.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	serverBefore := cpuOf(t, m.proc.pid())
	began := time.Now()
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	// perf runs until it is killed; it is, by PID, once it has reported
	// enough windows or if the test ends first.
	stop := func() { syscall.Kill(tool.Process.Pid, syscall.SIGKILL); tool.Wait() }
	t.Cleanup(stop)
	var rates []float64
	var log strings.Builder
	lines := bufio.NewScanner(out)
	for len(rates) < publishOnlyWindows && lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if m := perfWindow.FindStringSubmatch(lines.Text()); m != nil {
			rate, _ := strconv.ParseFloat(m[1], 64)
			rates = append(rates, rate)
		}
	}
	if len(rates) < publishOnlyWindows {
		t.Fatalf("perf ended after %d windows; its output:\n%s", len(rates), tail([]byte(log.String()), 3000))
	}
	r := publishRun{rate: mean(rates)}
	secs := time.Since(began).Seconds()
	r.toolCores = cpuOf(t, tool.Process.Pid).Seconds() / secs
	r.serverCores = (cpuOf(t, m.proc.pid()) - serverBefore).Seconds() / secs
	stop()
	if r.stages, err = scrapeStages(t.Context(), m.webURL+"/metrics"); err != nil {
		t.Fatal(err)
	}
	return r
}

// memoryDir is where the floor's standalone keeps its data: tmpfs.
const memoryDir = "/dev/shm"

// scrapeStages reads a standalone's stage means from its /metrics.
func scrapeStages(ctx context.Context, url string) (*publishStages, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	var families map[string]*dto.MetricFamily
	if families, err = parser.TextToMetricFamilies(resp.Body); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	// Each is a histogram without labels, in seconds.
	sumCount := func(name string) (float64, float64, error) {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetHistogram() == nil {
			return 0, 0, fmt.Errorf("%s: no histogram %s without labels", url, name)
		}
		h := f.GetMetric()[0].GetHistogram()
		return h.GetSampleSum(), float64(h.GetSampleCount()), nil
	}
	var st publishStages
	var adds float64
	for _, m := range []struct {
		name string
		mean *time.Duration
	}{{"meridian_ledger_add_seconds", &st.ledgerAdd}, {"meridian_bookie_add_seconds", &st.bookieAdd},
		{"meridian_bookie_journal_sync_seconds", &st.journalSync}} {
		sum, count, err := sumCount(m.name)
		if err != nil {
			return nil, err
		}
		if count == 0 {
			return nil, fmt.Errorf("%s: %s counted nothing", url, m.name)
		}
		*m.mean = time.Duration(sum / count * float64(time.Second))
		switch m.name {
		case "meridian_bookie_add_seconds":
			adds = count
		case "meridian_bookie_journal_sync_seconds":
			st.addsPerSync = adds / count
		}
	}
	return &st, nil
}

// natsStats matches nats bench's summary: "... stats: 87,167 msgs/sec ~ ...".
var natsStats = regexp.MustCompile(`stats: ([0-9,]+) msgs/sec`)

// natsPublishRun starts a fresh nats-server and runs `nats bench js pub
// async --batch 500` against it (1 KiB, an R1 stream on file storage)
// for msgs messages.
func natsPublishRun(t *testing.T, server *env, natsCLI string, syncAlways bool, msgs int) publishRun {
	n := startNATSOne(t, server, syncAlways)
	tool := exec.CommandContext(t.Context(), "taskset", "-c", toolCore, natsCLI, "-s", n.conn.ConnectedUrl(),
		"bench", "js", "pub", "async", "--create", "--storage", "file", "--replicas", "1",
		"--size", strconv.Itoa(messageSize), "--batch", "500", "--msgs", strconv.Itoa(msgs),
		"--maxbytes", "16GB", "--no-progress", "publish-only")
	tool.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	serverBefore := cpuOf(t, n.proc.pid())
	began := time.Now()
	// The tool's own CPU, from the kernel's accounting of the waited-for
	// child: the run ends with it.
	out, err := tool.CombinedOutput()
	if err != nil {
		t.Fatalf("nats bench: %v\n%s", err, tail(out, 3000))
	}
	secs := time.Since(began).Seconds()
	m := natsStats.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in nats bench's output:\n%s", natsStats, tail(out, 3000))
	}
	rate, _ := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
	toolCPU := tool.ProcessState.UserTime() + tool.ProcessState.SystemTime()
	return publishRun{rate: rate, toolCores: toolCPU.Seconds() / secs,
		serverCores: (cpuOf(t, n.proc.pid()) - serverBefore).Seconds() / secs}
}

func cpuOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := e2e.ProcCPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// publishSides are the suite's sides by role; floor is nil without tmpfs.
type publishSides struct {
	meridian, jetStream, floor, syncAlways *publishSide
}

func (p publishSides) all() []*publishSide {
	out := []*publishSide{p.meridian, p.jetStream}
	if p.floor != nil {
		out = append(out, p.floor)
	}
	return append(out, p.syncAlways)
}

func (s *publishSide) median() float64 {
	var rates []float64
	for _, r := range s.runs {
		rates = append(rates, r.rate)
	}
	return median(rates)
}

func publishOnlyMarkdown(sides publishSides, natsVersion, loadBefore, loadAfter string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "```sh\ncd e2e/sidebyside && go test -mod=mod -tags e2e -count=1 -timeout 60m -run 'TestSideBySide/publish-only' -v .\n```\n\n")
	fmt.Fprintf(&b, "Each system's maximum publish rate by its own ecosystem's bench tool, 1 KiB messages: "+
		"`%s produce -r 0 -s 1024 -b 1` (1 ms batching, its default 1,000 pending messages; the mean of %d "+
		"10-second windows) against a fresh `meridian standalone`, and `nats bench js pub async --batch 500` "+
		"(%s) against a fresh nats-server %s. The server is pinned to core %s and the tool to core %s. The "+
		"runs alternate between the systems. Load average %s at the start, %s at the end.\n\n",
		pulsarPerfModule, publishOnlyWindows, natsCLIModule, natsVersion, serverCore, toolCore, loadBefore, loadAfter)
	fmt.Fprintf(&b, "| system and tool | runs (msg/s) | median | server cores | tool cores |\n|---|---|---|---|---|\n")
	for _, s := range sides.all() {
		var rates, server, tool []string
		var ss, ts []float64
		for _, r := range s.runs {
			rates = append(rates, fmt.Sprintf("%.0f", r.rate))
			server = append(server, fmt.Sprintf("%.2f", r.serverCores))
			tool = append(tool, fmt.Sprintf("%.2f", r.toolCores))
			ss, ts = append(ss, r.serverCores), append(ts, r.toolCores)
		}
		fmt.Fprintf(&b, "| %s | %s | **%.0f** | %s (median %.2f) | %s (median %.2f) |\n", s.label, strings.Join(rates, ", "),
			s.median(), strings.Join(server, ", "), median(ss), strings.Join(tool, ", "), median(ts))
	}
	mer := sides.meridian.median()
	fmt.Fprintf(&b, "\nMeridian's median over JetStream's (default sync): **%.2f×** (target: at least 1.5×); over "+
		"JetStream's with `sync_interval: always`: %.1f×.", mer/sides.jetStream.median(), mer/sides.syncAlways.median())
	if sides.floor != nil {
		fmt.Fprintf(&b, " The floor's over JetStream's: %.2f×.", sides.floor.median()/sides.jetStream.median())
	}
	b.WriteString("\n\n")
	b.WriteString("**Where a Meridian publish's time goes.** perf keeps 1,000 messages pending, so its rate is 1,000 over " +
		"the mean publish latency. The standalone's own means over each run (`/metrics`): the ledger client's add " +
		"(broker to bookie and back), the bookie's part of it (request read to answer), one journal fdatasync, and " +
		"how many adds each carried. The rest of a publish is the client's 1 ms batching and the client's and " +
		"broker's handling.\n\n")
	b.WriteString("| standalone | mean publish latency (1,000 ÷ rate) | ledger add | bookie add | journal fdatasync | adds per fdatasync |\n|---|---|---|---|---|---|\n")
	for _, s := range []*publishSide{sides.meridian, sides.floor} {
		if s == nil {
			continue
		}
		var lat, ledger, bookie, sync, per []float64
		for _, r := range s.runs {
			lat = append(lat, 1000/r.rate*float64(time.Second))
			ledger = append(ledger, float64(r.stages.ledgerAdd))
			bookie = append(bookie, float64(r.stages.bookieAdd))
			sync = append(sync, float64(r.stages.journalSync))
			per = append(per, r.stages.addsPerSync)
		}
		d := func(xs []float64) string { return ms(time.Duration(median(xs))) }
		fmt.Fprintf(&b, "| %s | %s ms | %s ms | %s ms | %s ms | %.1f |\n", strings.SplitN(s.label, " (", 2)[0],
			d(lat), d(ledger), d(bookie), d(sync), median(per))
	}
	b.WriteString("\n(Medians over the runs.)\n")
	return b.String()
}
