//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBedIdleCPU starts the geo-replication bed and, with no traffic, has
// every process's CPU use over a window logged; each etcd member and
// replicator worker must stay under a twentieth of a core. An idle
// `meridian dev` takes 1.5%: a process of an idle bed that takes more is
// polling.
func TestBedIdleCPU(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	g := startGeoBed(ctx, t)
	window := 20 * time.Second
	if full() {
		window = time.Minute
	}
	procs := map[string]*Process{}
	for _, p := range g.processes() {
		procs[p.Name] = p.Process
	}
	before := map[string]time.Duration{}
	for name, p := range procs {
		d, err := ProcCPUTime(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		before[name] = d
	}
	began := time.Now()
	sleep(ctx, t, window)
	ran := time.Since(began)
	var line []string
	for name, p := range procs {
		d, err := ProcCPUTime(p.PID())
		if err != nil {
			t.Fatal(err)
		}
		share := float64(d-before[name]) / float64(ran)
		line = append(line, fmt.Sprintf("%s (pid %d) %.1f%%", name, p.PID(), 100*share))
		if share > 0.05 && (strings.Contains(name, "etcd") || strings.Contains(name, "replicator")) {
			t.Errorf("%s used %.1f%% of a core while the bed was idle, want under 5%%", name, 100*share)
		}
	}
	slices.Sort(line)
	t.Logf("CPU over %v idle: %s", ran.Round(time.Millisecond), strings.Join(line, ", "))
}

func TestCPUShares(t *testing.T) {
	before := map[string]time.Duration{"broker": time.Second, testProcessKind: 0}
	after := map[string]time.Duration{"broker": 3 * time.Second, testProcessKind: time.Second, "bookie": 500 * time.Millisecond}
	got := cpuShares(before, after, 2*time.Second)
	if want := "1.75 cores in all (broker 1.00, test process 0.50, bookie 0.25)"; got != want {
		t.Fatalf("cpuShares = %q, want %q", got, want)
	}
	// This process has used CPU to get here, and is counted.
	now, err := cpuByKind(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 1 || now[testProcessKind] <= 0 {
		t.Fatalf("cpuByKind(nil) = %v, want this test process's CPU time alone", now)
	}
}
