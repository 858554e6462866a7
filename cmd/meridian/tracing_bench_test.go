package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/meridian-mq/meridian/telemetry"
)

// countingExporter counts the spans exported, and drops them.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// processCPU is the CPU time this process has used, user and system.
func processCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileRun starts a CPU profile of run i into dir (none when dir is
// ""), named after the arm, so that the tracing's share of the traced
// runs' CPU can be read from them (go tool pprof -top dir/traced-*); the
// function returned stops it.
func profileRun(t testing.TB, dir string, traced bool, i int) (stop func()) {
	t.Helper()
	if dir == "" {
		return func() {}
	}
	arm := "off"
	if traced {
		arm = "traced"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%02d.pprof", arm, i)))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// BenchmarkTracingCost is issue 15's tracing cost: the CPU seconds the
// broker's process spends per million messages published, with tracing at
// 1% sampling against tracing off (node.Config.Tracing nil), on in-memory
// bookies so that the disk's noise stays out. Both regions run in this
// process; the producer is `meridian perf produce` in its own process
// (its CPU is not counted), 1 KiB messages as fast as possible, without
// batching by default (every message its own entry: the most tracing work
// per message; MERIDIAN_BENCH_BATCHING_MS sets perf's -b), every message
// with a traceparent of its own trace, 1% of them
// sampled, as an OpenTelemetry-instrumented producer at 1% sends them
// (--traceparent-ratio 0.01); the same traffic reaches both regions. The
// traced region samples parent-based at 1% and exports into a batcher
// whose exporter counts the spans and drops them (no OTLP collector here:
// serialization and the network are not in the figure).
//
// Runs alternate between the regions, each on a fresh topic, 9 of each
// (MERIDIAN_BENCH_RUNS), of MERIDIAN_BENCH_MESSAGES messages (default
// 100000); the medians are reported. MERIDIAN_BENCH_PROFILE_DIR keeps a CPU
// profile of each run there. Run it with -benchtime 1x.
func BenchmarkTracingCost(b *testing.B) {
	messages, runs, batching := 100_000, 9, 0
	for env, v := range map[string]*int{"MERIDIAN_BENCH_MESSAGES": &messages, "MERIDIAN_BENCH_RUNS": &runs,
		"MERIDIAN_BENCH_BATCHING_MS": &batching} {
		if s := os.Getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || (n == 0 && v != &batching) {
				b.Fatalf("%s=%q: want a positive count", env, s)
			}
			*v = n
		}
	}
	profiles := os.Getenv("MERIDIAN_BENCH_PROFILE_DIR")
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	exported := &countingExporter{}
	tracing := telemetry.NewParentBasedTracing(sdktrace.TraceIDRatioBased(0.01), sdktrace.WithBatcher(exported))
	b.Cleanup(func() { tracing.Shutdown(context.Background()) })
	urls := map[bool]string{false: startMemoryRegion(ctx, b, nil), true: startMemoryRegion(ctx, b, tracing)}
	dir := b.TempDir()
	perMillion := map[bool][]float64{}
	for range b.N {
		for i := range 2 * runs {
			traced := i%2 == 1
			p := startProcess(b, "perf produce", filepath.Join(dir, fmt.Sprintf("perf-%d.log", i)), "perf", "produce",
				"-u", urls[traced], "-r", "0", "-s", "1024", "-b", strconv.Itoa(batching), "--num-messages", strconv.Itoa(messages),
				"--traceparent-ratio", "0.01", fmt.Sprintf("persistent://public/default/cost-%d", i))
			p.waitReady(ctx, b)
			stopProfile := profileRun(b, profiles, traced, i)
			start := processCPU(b)
			select {
			case <-p.exited:
			case <-ctx.Done():
				b.Fatalf("perf produce did not finish: %v", ctx.Err())
			}
			used := processCPU(b) - start
			stopProfile()
			if p.exitErr != nil {
				b.Fatalf("perf produce: %v", p.exitErr)
			}
			perMillion[traced] = append(perMillion[traced], used.Seconds()*1e6/float64(messages))
		}
	}
	median := func(xs []float64) float64 {
		s := slices.Sorted(slices.Values(xs))
		return s[len(s)/2]
	}
	off, on := median(perMillion[false]), median(perMillion[true])
	b.Logf("CPU s per million messages, tracing off: %.2f", perMillion[false])
	b.Logf("CPU s per million messages, tracing 1%%: %.2f", perMillion[true])
	b.ReportMetric(off, "cpu-s/M-off")
	b.ReportMetric(on, "cpu-s/M-traced")
	b.ReportMetric((on/off-1)*100, "overhead-%")
	if err := tracing.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	if exported.spans.Load() == 0 {
		b.Fatal("the traced region exported no span: the benchmark measured nothing of tracing")
	}
	b.ReportMetric(float64(exported.spans.Load())/float64(b.N*runs), "spans/run")
}
