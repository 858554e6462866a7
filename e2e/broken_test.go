//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// brokenEnv names the environment variable that asks for
// TestBrokenVariants: "all", or a comma-separated list of variant tags.
const brokenEnv = "MERIDIAN_E2E_BROKEN"

// brokenVariant is a meridian built with one defect (a build tag whose
// file flips one switch, never in a shipped build), the scenario that must
// expose it, and the violation the checker must then report.
type brokenVariant struct {
	tag      string
	scenario string
	want     Kind
	timeout  time.Duration
}

// brokenVariants is the one place that names the scenarios the variants
// run through.
var brokenVariants = []brokenVariant{
	// The broker receipts SENDs before the bookies confirm them: the
	// scenario's third fault SIGKILLs the broker while the ensemble's disks
	// are slow, so it dies with receipted adds the bookies never took.
	{tag: "broken_ackearly", scenario: "TestScenarioRegionFaults", want: Lost, timeout: 10 * time.Minute},
	// The replication cursor moves at the send, before the remote's
	// receipt: the cut fails the entries in flight, and the retry starts
	// past them; the scenario's bounded wait for the drain gives up, and
	// its checker runs on what every region stores.
	{tag: "broken_cursorearly", scenario: "TestScenarioReplicationRegionCut", want: Lost, timeout: 12 * time.Minute},
	// The destination does not deduplicate replicated messages: the heir
	// of a killed worker resends from the last persisted cursor, and what
	// was stored since is stored again.
	{tag: "broken_nodedup", scenario: "TestScenarioReplicationWorkerKill", want: DuplicateStored, timeout: 17 * time.Minute},
}

// TestBrokenVariants shows the checker catches what it must: for each
// broken variant it runs the variant's scenario as a child `go test`
// with meridian built under the variant's tag, and passes only when that
// scenario fails with at least one violation of the expected kind. It
// fails when the scenario passes (the checker missed the defect) or fails
// without such a violation. Each variant takes minutes, so it runs only
// when asked:
//
//	MERIDIAN_E2E_BROKEN=all go test -tags e2e -count=1 -timeout 60m -run TestBrokenVariants -v ./e2e/
//
// (or a comma-separated list of tags instead of all).
func TestBrokenVariants(t *testing.T) {
	asked := os.Getenv(brokenEnv)
	if asked == "" {
		t.Skipf("set %s=all (or a list of variant tags) to run the broken variants", brokenEnv)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain on PATH: %v", err)
	}
	names := strings.Split(asked, ",")
	for _, v := range brokenVariants {
		t.Run(v.tag, func(t *testing.T) {
			if asked != "all" && !slices.Contains(names, v.tag) {
				t.Skipf("not in %s=%s", brokenEnv, asked)
			}
			out, err := runBrokenScenario(t, goBin, v)
			if built := `built meridian (tags "` + v.tag + `")`; !strings.Contains(out, built) {
				t.Fatalf("%s did not run on meridian built -tags %s (no %q in its output):\n%s", v.scenario, v.tag, built, out)
			}
			summary, violations := checkerLines(out, v.want)
			for _, l := range summary {
				t.Log(l)
			}
			if err == nil {
				t.Fatalf("%s passed with meridian built -tags %s: the checker missed the defect", v.scenario, v.tag)
			}
			if len(violations) == 0 {
				t.Fatalf("%s failed (%v) with -tags %s, but the checker reported no %q violation; its output:\n%s",
					v.scenario, err, v.tag, v.want, out)
			}
			t.Logf("%s with -tags %s: the checker reported %q violations, as it must (%d among the first it prints); the first:", v.scenario, v.tag, v.want, len(violations))
			for _, l := range violations[:min(len(violations), 5)] {
				t.Log(l)
			}
		})
	}
}

// runBrokenScenario runs v's scenario in a child go test whose bed uses
// meridian built with v's tag, and returns its output and exit error. The
// child runs in its own process group, killed if v.timeout passes (its own
// -timeout ends it first, stopping its bed).
func runBrokenScenario(t *testing.T, goBin string, v brokenVariant) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), v.timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-tags", "e2e", "-count=1", "-timeout", v.timeout.String(),
		"-run", "^"+v.scenario+"$", "-v", ".")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, brokenEnv+"=") || strings.HasPrefix(kv, buildTagsEnv+"=")
	}), buildTagsEnv+"="+v.tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err := cmd.Run()
	t.Logf("%s with -tags %s ran %v: %v", v.scenario, v.tag, time.Since(began).Round(time.Second), err)
	return out.String(), err
}

// checkerLines picks from a scenario's output the checker's summary lines
// and the violations of kind want (as Bed.Verify reports them:
// "<kind>: <message> in <topic> of <region>: <detail>").
func checkerLines(out string, want Kind) (summary, violations []string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.Contains(line, "checker: "), strings.Contains(line, "more violations"):
			summary = append(summary, line)
		case strings.Contains(line, ": "+string(want)+": "):
			violations = append(violations, line)
		}
	}
	return summary, violations
}
