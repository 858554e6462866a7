//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times, fixed by the
// kernel's ABI.
const userHZ = 100

// ProcCPUTime is the CPU time (user and system) process pid has used so
// far, from /proc/<pid>/stat.
func ProcCPUTime(pid int) (time.Duration, error) {
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

// testProcessKind is the kind cpuByKind counts this test process under:
// the clients, the links and the recording.
const testProcessKind = "test process"

// cpuByKind is the CPU time used so far by procs, summed by kind, and by
// this test process (testProcessKind). A process that is not running
// counts 0.
func cpuByKind(procs []bedProcess) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	self, err := ProcCPUTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	out[testProcessKind] = self
	for _, p := range procs {
		pid := p.PID()
		if pid == 0 {
			continue
		}
		d, err := ProcCPUTime(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out[p.kind] += d
	}
	return out, nil
}

// cpuShares describes the CPU used between two cpuByKind snapshots taken
// window apart, in cores: the total, then each kind, largest first.
func cpuShares(before, after map[string]time.Duration, window time.Duration) string {
	type share struct {
		kind  string
		cores float64
	}
	var shares []share
	total := 0.0
	for kind, d := range after {
		cores := float64(d-before[kind]) / float64(window)
		shares = append(shares, share{kind, cores})
		total += cores
	}
	slices.SortFunc(shares, func(a, b share) int {
		if a.cores != b.cores {
			if a.cores > b.cores {
				return -1
			}
			return 1
		}
		return strings.Compare(a.kind, b.kind)
	})
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%s %.2f", s.kind, s.cores)
	}
	return fmt.Sprintf("%.2f cores in all (%s)", total, strings.Join(parts, ", "))
}
