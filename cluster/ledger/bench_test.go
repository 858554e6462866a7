package ledger_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// BenchmarkAdd measures pipelined Add throughput and latency (Add to
// confirmation) with 1 KiB entries on real TCP bookies (fsync'd journals)
// over embedded etcd. Reported: ns/op (throughput), p50/p99 latency.
func BenchmarkAdd(b *testing.B) {
	for _, q := range [][3]int{{1, 1, 1}, {3, 3, 2}} {
		b.Run(fmt.Sprintf("E%dQw%dQa%d", q[0], q[1], q[2]), func(b *testing.B) {
			w := newRealWorld(b)
			for i := range q[0] {
				w.startBookie(fmt.Sprintf("bk%d", i))
			}
			c := w.client("bench")
			waitBookies(b, c, q[0])
			benchAdds(b, c, q)
		})
	}
}

// BenchmarkAddInMemory measures the client alone, on in-memory bookies
// with no latency.
func BenchmarkAddInMemory(b *testing.B) {
	e := newEnv(b, 1, "b1", "b2", "b3")
	cfg := testConfig()
	cfg.MaxInFlightEntries = 1024
	cfg.AddTimeout = 10 * time.Second
	benchAdds(b, e.client("bench", cfg), [3]int{3, 3, 2})
}

func benchAdds(b *testing.B, c *ledger.Client, q [3]int) {
	w, err := c.Create(b.Context(), q[0], q[1], q[2], nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	data := make([]byte, 1024)
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
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		at := time.Now()
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
