//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times, fixed by the
// kernel's ABI.
const userHZ = 100

// cpuTime is the CPU time (user and system) process pid has used so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("e2e: /proc/%d/stat has %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("e2e: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

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
	procs := map[string]*Process{"global-etcd": g.Global}
	for _, r := range g.Regions {
		for _, p := range r.Etcd {
			procs[p.Name] = p
		}
		for _, p := range r.Replicators {
			procs[p.Name] = p
		}
		for _, p := range r.Bookies {
			procs[p.Name] = p
		}
		for _, b := range r.Brokers {
			procs[b.Name] = b.Process
		}
	}
	before := map[string]time.Duration{}
	for name, p := range procs {
		d, err := cpuTime(p.PID())
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
		d, err := cpuTime(p.PID())
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
