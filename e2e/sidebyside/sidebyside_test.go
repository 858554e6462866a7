//go:build e2e

package sidebyside

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/e2e"
)

// docsDir is Meridian's docs/ folder, seen from this package's directory
// (where go test runs).
const docsDir = "../../docs"

// env is what every suite shares: the two systems' binaries, built once,
// and the cores both sides are pinned to.
type env struct {
	meridian   string // the meridian binary
	natsServer string // the nats-server binary, of the version go.mod names
	// cpus is the taskset list every server process of either system runs
	// on, so that neither gets a core the other lacks:
	// $MERIDIAN_SIDEBYSIDE_CPUS, default "0-1".
	cpus string
}

// suites are the comparisons TestSideBySide runs, in order; each returns
// its section of docs/BENCHMARKS.md.
var suites []struct {
	name string
	run  func(t *testing.T, e *env) section
}

// TestSideBySide runs every suite and writes each one's section. A suite
// that fails writes nothing, so the file keeps the last good figures.
func TestSideBySide(t *testing.T) {
	e := newEnv(t)
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			sec := s.run(t, e)
			if t.Failed() {
				return
			}
			if err := writeSection(docsDir, sec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	began := time.Now()
	bin, err := e2e.BuildMeridian(dir)
	if err != nil {
		t.Fatal(err)
	}
	nats := filepath.Join(dir, "nats-server")
	if out, err := exec.Command("go", "build", "-o", nats, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	t.Logf("built meridian and nats-server in %v", time.Since(began).Round(time.Millisecond))
	cpus := os.Getenv("MERIDIAN_SIDEBYSIDE_CPUS")
	if cpus == "" {
		cpus = "0-1"
	}
	return &env{meridian: bin, natsServer: nats, cpus: cpus}
}

// pin moves every thread of the process pid onto the env's cores.
func (e *env) pin(t *testing.T, pid int) {
	t.Helper()
	out, err := exec.Command("taskset", "-a", "-p", "-c", e.cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("taskset -a -p -c %s %d: %v\n%s", e.cpus, pid, err, out)
	}
}

// mustSection is a helper for suites: the section with its markers'
// name, and a line saying how the figures were made.
func mustSection(suite string, e *env, body string, charts ...chart) section {
	host, _ := os.Hostname()
	header := fmt.Sprintf("Measured %s on %s, servers of both systems pinned to cores %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), host, e.cpus)
	return section{Suite: suite, Markdown: header + body, Charts: charts}
}

// machineLoad is /proc/loadavg's first three fields (the 1, 5 and 15
// minute load averages).
func machineLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
