package telemetry

import (
	"errors"
	"testing"
	"time"
)

// Each bucket counts the values above the previous bound and at most its
// own; the last counts everything above the last bound; Sub and Add undo
// and combine snapshots.
func TestStatsBuckets(t *testing.T) {
	b := NewStatsBuckets(EntrySizeBounds)
	for _, v := range []int64{0, 128, 129, 512, 1024, 1025, 1 << 20, 1<<20 + 1, 5 << 20} {
		b.Record(v)
	}
	s := b.Snapshot()
	want := []int64{2, 2, 1, 1, 0, 0, 0, 1, 2}
	if s.N != len(EntrySizeBucketNames) || s.N != len(want) {
		t.Fatalf("%d buckets, want %d (one per name)", s.N, len(want))
	}
	for i, w := range want {
		if s.Counts[i] != w {
			t.Errorf("bucket %s: %d, want %d", EntrySizeBucketNames[i], s.Counts[i], w)
		}
	}
	if s.Count != 9 || s.Sum != 0+128+129+512+1024+1025+1<<20+1<<20+1+5<<20 {
		t.Errorf("count %d, sum %d", s.Count, s.Sum)
	}
	b.Record(100)
	d := b.Snapshot().Sub(s)
	if d.Count != 1 || d.Sum != 100 || d.Counts[0] != 1 || d.Counts[1] != 0 {
		t.Errorf("difference %+v, want one value of 100 in the first bucket", d)
	}
	if sum := s.Add(d); sum != b.Snapshot() {
		t.Errorf("s + d = %+v, want %+v", sum, b.Snapshot())
	}
	if n := NewStatsBuckets(WriteLatencyBoundsMicros).Snapshot().N; n != len(WriteLatencyBucketNames) {
		t.Errorf("%d latency buckets, %d names", n, len(WriteLatencyBucketNames))
	}
}

func TestMetricsConfig(t *testing.T) {
	if p := (MetricsConfig{}).Period(); p != DefaultStatsPeriod {
		t.Errorf("zero period means %v, want %v", p, DefaultStatsPeriod)
	}
	if err := DefaultMetricsConfig().Validate(); err != nil {
		t.Error(err)
	}
	if err := (MetricsConfig{StatsPeriod: time.Millisecond}).Validate(); !errors.Is(err, ErrInvalidMetricsConfig) {
		t.Errorf("1ms period: %v, want ErrInvalidMetricsConfig", err)
	}
}
