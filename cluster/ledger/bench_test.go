package ledger_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// benchQuorums and benchSizes are the benchmark matrix: E/Qw/Qa at
// 1/1/1 and 3/3/2 on real TCP bookies (fsync'd journals, one disk), 1 KiB
// and 64 KiB entries.
var (
	benchQuorums = [][3]int{{1, 1, 1}, {3, 3, 2}}
	benchSizes   = []int{1 << 10, 64 << 10}
)

// BenchmarkAdd measures pipelined Add throughput (ns/op, MB/s) and latency
// from Add to confirmation (p50, p99) with as many adds in flight as the
// writer's budget allows.
func BenchmarkAdd(b *testing.B) {
	forEachConfig(b, func(b *testing.B, w *ledger.Writer, size int) {
		benchAdds(b, w, size, 0)
	})
}

// BenchmarkAddAtHalfRate measures latency at half the maximum rate: it first
// finds the maximum rate with 2,000 pipelined adds, then issues b.N adds on
// a schedule at half that rate. Latency counts from each add's scheduled
// time, so a stall shows in full rather than only for the add that met it.
// Use -benchtime=Nx with N in the thousands.
func BenchmarkAddAtHalfRate(b *testing.B) {
	forEachConfig(b, func(b *testing.B, w *ledger.Writer, size int) {
		b.StopTimer()
		start := time.Now()
		addAndWait(b, w, size, 2000)
		maxRate := 2000 / time.Since(start).Seconds()
		b.StartTimer()
		benchAdds(b, w, size, maxRate/2)
		b.ReportMetric(maxRate, "max-adds/s") // after benchAdds, whose ResetTimer drops metrics
	})
}

// BenchmarkAddInMemory measures the client alone, on in-memory bookies
// with no latency, with the production ExplicitLACInterval.
func BenchmarkAddInMemory(b *testing.B) {
	e := newEnv(b, 1, "b1", "b2", "b3")
	cfg := testConfig()
	cfg.MaxInFlightEntries = 1024
	cfg.AddTimeout = 10 * time.Second
	cfg.ExplicitLACInterval = ledger.DefaultConfig(region, 1).ExplicitLACInterval
	w, err := e.client("bench", cfg).Create(b.Context(), 3, 3, 2, ledger.Groups{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	benchAdds(b, w, 1<<10, 0)
}

func forEachConfig(b *testing.B, run func(b *testing.B, w *ledger.Writer, size int)) {
	for _, q := range benchQuorums {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("E%dQw%dQa%d/%dKiB", q[0], q[1], q[2], size>>10), func(b *testing.B) {
				world := newRealWorld(b)
				for i := range q[0] {
					world.startBookie(fmt.Sprintf("bk%d", i))
				}
				c := world.client("bench")
				waitBookies(b, c, q[0])
				w, err := c.Create(b.Context(), q[0], q[1], q[2], ledger.Groups{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer w.Stop()
				run(b, w, size)
			})
		}
	}
}

func addAndWait(b *testing.B, w *ledger.Writer, size, n int) {
	data := make([]byte, size)
	futs := make([]*ledger.AddFuture, 0, n)
	for range n {
		f, err := w.Add(b.Context(), data)
		if err != nil {
			b.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if _, err := f.Wait(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// benchAdds issues b.N adds of size bytes, as fast as the writer takes them
// when rate is 0, else on a schedule of rate adds per second, and reports
// the p50 and p99 latency to confirmation.
func benchAdds(b *testing.B, w *ledger.Writer, size int, rate float64) {
	data := make([]byte, size)
	type sent struct {
		f  *ledger.AddFuture
		at time.Time
	}
	futs := make(chan sent, 4096)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	go func() {
		var first error
		for s := range futs {
			if _, err := s.f.Wait(b.Context()); err != nil && first == nil {
				first = err
			}
			lat = append(lat, time.Since(s.at))
		}
		done <- first
	}()
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		at := time.Now()
		if rate > 0 {
			at = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			time.Sleep(time.Until(at)) // pacing the load, not waiting for a result
		}
		f, err := w.Add(b.Context(), data)
		if err != nil {
			b.Fatal(err)
		}
		futs <- sent{f, at}
	}
	close(futs)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
