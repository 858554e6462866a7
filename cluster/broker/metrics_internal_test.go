package broker

import (
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/telemetry"
)

// A window reports nothing until a first period has passed, then the
// rates and bucket counts of the last completed period, the same for every
// sample within the next one; a counter that went down (a reload) or
// appeared gives no rate for that period.
func TestTopicWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	period := time.Second
	buckets := telemetry.NewStatsBuckets(telemetry.EntrySizeBounds)
	write := func() mledger.WriteStats { return mledger.WriteStats{EntrySize: buckets.Snapshot()} }
	reads := telemetry.NewStatsBuckets(telemetry.WriteLatencyBoundsMicros)
	var w topicWindow
	for _, step := range []struct {
		at       time.Duration
		cur      map[string][2]int64
		record   int // entries of 100 bytes recorded before the sample
		wantIn   [2]float64
		wantSub  [2]float64
		wantSize int64
	}{
		{at: 0, cur: map[string][2]int64{"in": {10, 1000}}},
		{at: 500 * time.Millisecond, cur: map[string][2]int64{"in": {20, 2000}}, record: 3},
		{at: 2 * time.Second, cur: map[string][2]int64{"in": {50, 5000}, "s": {7, 70}}, record: 1,
			wantIn: [2]float64{20, 2000}, wantSize: 4},
		{at: 2500 * time.Millisecond, cur: map[string][2]int64{"in": {60, 6000}, "s": {9, 90}},
			wantIn: [2]float64{20, 2000}, wantSize: 4},
		{at: 3 * time.Second, cur: map[string][2]int64{"in": {5, 500}, "s": {17, 170}},
			wantSub: [2]float64{10, 100}},
	} {
		for range step.record {
			buckets.Record(100)
			reads.Record(100)
		}
		w.advance(t0.Add(step.at), period, step.cur, write(), reads.Snapshot())
		if got := w.rates["in"]; got != step.wantIn {
			t.Errorf("at %v: in %v, want %v", step.at, got, step.wantIn)
		}
		if got := w.rates["s"]; got != step.wantSub {
			t.Errorf("at %v: s %v, want %v", step.at, got, step.wantSub)
		}
		if got := w.lastWrite.EntrySize.Count; got != step.wantSize {
			t.Errorf("at %v: %d entries in the last period, want %d", step.at, got, step.wantSize)
		}
		if got := w.lastRead.Count; got != step.wantSize {
			t.Errorf("at %v: %d storage reads in the last period, want %d", step.at, got, step.wantSize)
		}
	}
}
