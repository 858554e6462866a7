//go:build e2e

package sidebyside

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuProfile is a CPU profile of one server process during one run:
// Linux perf's sampling of every thread (the meridian binary serves no
// pprof endpoint), summarised by self time.
type cpuProfile struct {
	what string
	// samples is how many were taken (as perf's header rounds them),
	// over seconds: at 499 Hz per busy thread, samples/(499*seconds) is
	// about the cores the process used. cpuTime is the CPU time the
	// samples stand for, exactly, from the header's event count when
	// the event is perf's cpu-clock (counted in nanoseconds); 0 if not.
	samples int
	cpuTime time.Duration
	seconds float64
	// packages are the Go packages (or "kernel") by their share of the
	// samples, largest first; symbols the hottest functions.
	packages, symbols []share
}

type share struct {
	name    string
	percent float64
}

// profiler is a `perf record` of a process, running in the background
// for a fixed time.
type profiler struct {
	cmd      *exec.Cmd
	out      string
	done     chan error
	duration time.Duration
}

// startProfile samples pid's threads at 499 Hz for d. The perf process
// ends by itself after d; wait collects it, and the test's end kills it
// by PID if it is still running. Without perf on the PATH it returns
// nil, whose wait says so.
func startProfile(t *testing.T, pid int, d time.Duration) *profiler {
	t.Helper()
	if _, err := exec.LookPath("perf"); err != nil {
		t.Logf("no profile: %v", err)
		return nil
	}
	out := filepath.Join(t.TempDir(), fmt.Sprintf("perf-%d-%d.data", pid, time.Now().UnixNano()))
	cmd := exec.Command("perf", "record", "-F", "499", "-p", strconv.Itoa(pid), "-o", out, "--", "sleep", strconv.Itoa(int(d.Seconds())))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("perf record: %v", err)
	}
	p := &profiler{cmd: cmd, out: out, done: make(chan error, 1), duration: d}
	// The waiter ends when perf does (after d, or when killed).
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return p
}

// wait waits for perf to finish and summarises what it recorded.
func (p *profiler) wait(t *testing.T, what string) cpuProfile {
	t.Helper()
	if p == nil {
		return cpuProfile{what: what}
	}
	if err := <-p.done; err != nil {
		t.Fatalf("perf record: %v", err)
	}
	p.done <- nil // for the cleanup, which must not wait again
	out, err := exec.Command("perf", "report", "-i", p.out, "--stdio", "--no-children", "--sort", "sym").Output()
	if err != nil {
		t.Fatalf("perf report: %v", err)
	}
	prof := summarise(string(out))
	prof.what, prof.seconds = what, p.duration.Seconds()
	return prof
}

// perfSamples is the report's header line with the sample count, which
// perf abbreviates past a thousand: "# Samples: 3K of event 'cpu-clock'".
var perfSamples = regexp.MustCompile(`^# Samples: ([0-9]+)([KMG]?) `)

// perfEventCount is the header line with the event count; with the
// cpu-clock event (in a VM without hardware counters, perf's default
// falls back to it) the count is nanoseconds of CPU.
var perfEventCount = regexp.MustCompile(`^# Event count \(approx\.\): ([0-9]+)`)

// perfCount is a count as perf's report header writes it.
func perfCount(digits, suffix string) int {
	n, _ := strconv.Atoi(digits)
	switch suffix {
	case "K":
		n *= 1e3
	case "M":
		n *= 1e6
	case "G":
		n *= 1e9
	}
	return n
}

// perfLine is one row of `perf report --sort sym`: "  12.34%  [k] name".
var perfLine = regexp.MustCompile(`^\s*([0-9.]+)%\s+\[(.)\]\s+(.+?)\s*$`)

// summarise groups a perf report's rows by package.
func summarise(report string) cpuProfile {
	var prof cpuProfile
	cpuClock := false
	byPackage := map[string]float64{}
	for line := range strings.SplitSeq(report, "\n") {
		if m := perfSamples.FindStringSubmatch(line); m != nil {
			prof.samples = perfCount(m[1], m[2])
			cpuClock = strings.Contains(line, "of event 'cpu-clock")
			continue
		}
		if m := perfEventCount.FindStringSubmatch(line); m != nil && cpuClock {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			prof.cpuTime = time.Duration(n)
			continue
		}
		m := perfLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pct, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		pkg := "kernel"
		if m[2] != "k" {
			pkg = goPackage(m[3])
		}
		byPackage[pkg] += pct
		prof.symbols = append(prof.symbols, share{m[3], pct})
	}
	for name, pct := range byPackage {
		prof.packages = append(prof.packages, share{name, pct})
	}
	bySize := func(a, b share) int {
		if a.percent != b.percent {
			if a.percent > b.percent {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	}
	slices.SortFunc(prof.packages, bySize)
	slices.SortFunc(prof.symbols, bySize)
	return prof
}

// goPackage is the package of a Go symbol ("runtime.mallocgc",
// "github.com/x/y/z.(*T).m"), shortened for Meridian's own; a symbol
// that is not Go's (a C library's, say) stands for itself.
func goPackage(sym string) string {
	// A generic's type arguments may hold dots and slashes of their own.
	if i := strings.IndexByte(sym, '['); i >= 0 {
		sym = sym[:i]
	}
	slash := strings.LastIndexByte(sym, '/')
	dot := strings.IndexByte(sym[slash+1:], '.')
	if dot < 0 {
		return sym
	}
	pkg := sym[:slash+1+dot]
	return strings.TrimPrefix(pkg, "github.com/meridian-mq/meridian/")
}

// markdown is the profile as a short paragraph: the cores used, the
// packages above 3% and the six hottest functions.
func (p cpuProfile) markdown() string {
	var b strings.Builder
	if p.samples == 0 {
		fmt.Fprintf(&b, "No CPU profile of %s: perf is not installed, or took no sample.\n", p.what)
		return b.String()
	}
	cores := float64(p.samples) / (499 * max(p.seconds, 1))
	if p.cpuTime > 0 {
		cores = p.cpuTime.Seconds() / max(p.seconds, 1)
	}
	fmt.Fprintf(&b, "CPU profile of %s (perf, 499 Hz, self time; %d samples in %.0f s: the process used %.2f cores): ",
		p.what, p.samples, p.seconds, cores)
	var parts []string
	for _, s := range p.packages {
		if s.percent < 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", s.name, s.percent))
	}
	b.WriteString(strings.Join(parts, ", "))
	b.WriteString(". Hottest functions: ")
	parts = parts[:0]
	for _, s := range p.symbols[:min(6, len(p.symbols))] {
		parts = append(parts, fmt.Sprintf("`%s` %.1f%%", s.name, s.percent))
	}
	b.WriteString(strings.Join(parts, ", "))
	b.WriteString(".\n")
	return b.String()
}

func TestSummarise(t *testing.T) {
	report := `# Samples: 1234  of event 'cpu-clock:ppp'
# Overhead  Symbol
#
    40.00%  [k] finish_task_switch.isra.0
    25.00%  [.] runtime.mallocgc
    20.00%  [.] github.com/meridian-mq/meridian/cluster/bookie.(*journal).run
    10.00%  [.] runtime.memmove
     5.00%  [k] ext4_sync_file
`
	p := summarise(report)
	want := []share{{"kernel", 45}, {"runtime", 35}, {"cluster/bookie", 20}}
	if !slices.Equal(p.packages, want) {
		t.Fatalf("packages %v, want %v", p.packages, want)
	}
	if p.samples != 1234 {
		t.Fatalf("samples %d, want 1234", p.samples)
	}
	// perf abbreviates a count past a thousand.
	k := summarise("# Samples: 3K of event 'cpu-clock:ppp'\n# Event count (approx.): 6012000000\n")
	if k.samples != 3000 || k.cpuTime != 6012*time.Millisecond {
		t.Fatalf("samples %d and CPU %v from 3K and 6012000000 ns, want 3000 and 6.012s", k.samples, k.cpuTime)
	}
	if len(p.symbols) != 5 || p.symbols[0].name != "finish_task_switch.isra.0" || p.symbols[4].name != "ext4_sync_file" {
		t.Fatalf("symbols %v", p.symbols)
	}
	// The linker escapes the dots of a path's last element.
	if got := goPackage("gopkg.in/yaml%2ev3.(*parser).parse"); got != "gopkg.in/yaml%2ev3" {
		t.Fatalf("goPackage = %q", got)
	}
	if got := goPackage("google.golang.org/grpc.(*GenericClientStream[go.shape.struct { x.y/z.T }]).RecvMsg"); got != "google.golang.org/grpc" {
		t.Fatalf("goPackage of a generic's method = %q", got)
	}
	if got := goPackage("memcpy"); got != "memcpy" {
		t.Fatalf("goPackage of a C symbol = %q", got)
	}
}
