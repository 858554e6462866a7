package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/telemetry"
)

// TestMetricsCost measures what recording metrics costs the region: the
// CPU seconds this process (the region: broker, etcd, in-memory bookies)
// spends per million messages published by `meridian perf produce` in
// its own process, with metrics on (recorded, and scraped every second as
// a Prometheus would, more often than its usual 15s) and off
// (telemetry.MetricsConfig.Disabled), in 9 alternating runs of each; it
// reports both medians and their difference. In-memory bookies keep the
// disk's noise out. Outside the default suite: set MERIDIAN_COST=1
// (MERIDIAN_COST_MESSAGES per run, default 300000;
// MERIDIAN_COST_PROFILE=FILE writes the CPU profile of the first run with
// metrics on, to read the share recording takes).
func TestMetricsCost(t *testing.T) {
	if os.Getenv("MERIDIAN_COST") == "" {
		t.Skip("set MERIDIAN_COST=1 to measure the cost of metrics (several minutes)")
	}
	messages := 300_000
	if v := os.Getenv("MERIDIAN_COST_MESSAGES"); v != "" {
		var err error
		if messages, err = strconv.Atoi(v); err != nil || messages < 1000 {
			t.Fatalf("MERIDIAN_COST_MESSAGES=%q: want at least 1000", v)
		}
	}
	const runs = 9
	perMillion := map[bool][]float64{}
	for i := range 2 * runs {
		on := i%2 == 0
		t.Run(fmt.Sprintf("run%d-metrics=%v", i/2, on), func(t *testing.T) {
			profile := ""
			if i == 0 {
				profile = os.Getenv("MERIDIAN_COST_PROFILE")
			}
			cpu := costRun(t, on, messages, profile)
			perMillion[on] = append(perMillion[on], cpu/float64(messages)*1e6)
			t.Logf("metrics=%v: %.2f CPU s per million messages", on, cpu/float64(messages)*1e6)
		})
	}
	on, off := median(perMillion[true]), median(perMillion[false])
	t.Logf("CPU seconds per million messages, median of %d: metrics on %.3f (runs %.2f), off %.3f (runs %.2f): %+.1f%%",
		runs, on, perMillion[true], off, perMillion[false], (on-off)/off*100)
}

// costRun starts a region, publishes messages through a perf process and
// returns the region's CPU seconds over the publishing.
func costRun(t *testing.T, metrics bool, messages int, profile string) float64 {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	n := startMemoryRegionWith(ctx, t, nil, telemetry.MetricsConfig{Disabled: !metrics, StatsPeriod: time.Second})
	dir := t.TempDir()
	scrapes := 0
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	start := cpuSeconds(t)
	p := startProcess(t, "perf produce", filepath.Join(dir, "perf.log"), "perf", "produce", "-u", n.Broker().ServiceURL(),
		"-r", "0", "-s", "1024", "-b", "1", "--num-messages", strconv.Itoa(messages),
		"--json", filepath.Join(dir, "produce.json"), "persistent://public/default/cost")
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-p.exited:
			done = true
		case <-tick.C:
			if metrics {
				resp, err := http.Get(n.Broker().WebURL() + "/metrics")
				if err == nil {
					resp.Body.Close()
					scrapes++
				}
			}
		case <-ctx.Done():
			t.Fatalf("perf produce did not finish: %v", ctx.Err())
		}
	}
	cpu := cpuSeconds(t) - start
	if p.exitErr != nil {
		t.Fatalf("perf produce: %v", p.exitErr)
	}
	if s := readSummary(t, filepath.Join(dir, "produce.json")); s.Total.Count != int64(messages) {
		t.Fatalf("perf produce sent %d messages, want %d", s.Total.Count, messages)
	}
	if metrics && scrapes == 0 {
		t.Log("the run ended before the first scrape")
	}
	return cpu
}

// cpuSeconds is this process's user and system CPU time so far (its
// children's, the perf process's, are not counted).
func cpuSeconds(t *testing.T) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
