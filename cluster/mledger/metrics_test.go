package mledger

import (
	"context"
	"fmt"
	"testing"
)

// Every confirmed append is counted once in the write buckets, by its
// stored size; with DisableMetrics nothing is.
func TestWriteStats(t *testing.T) {
	e := newEnv(t)
	for _, disabled := range []bool{false, true} {
		cfg := testConfig()
		cfg.DisableMetrics = disabled
		ml := e.open(e.factory("b", cfg), fmt.Sprintf("persistent://t/ns/write-stats-%v", disabled))
		var size int64
		for i := range 5 {
			if _, err := ml.Append(context.Background(), testMessage(t, 1, uint64(i), 1, 200), 1); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range readAll(t, ml) {
			size += int64(len(e.Data))
		}
		ws := ml.WriteStats()
		want, wantSize := int64(5), size
		if disabled {
			want, wantSize = 0, 0
		}
		if ws.Latency.Count != want || ws.EntrySize.Count != want || ws.EntrySize.Sum != wantSize {
			t.Errorf("disabled=%v: %d latencies, %d sizes summing to %d; want %d, %d, %d",
				disabled, ws.Latency.Count, ws.EntrySize.Count, ws.EntrySize.Sum, want, want, wantSize)
		}
		if !disabled && ws.EntrySize.Counts[1] != 5 {
			t.Errorf("sizes %v: want all 5 entries (about 250 bytes) in the 128..512 bucket", ws.EntrySize.Counts)
		}
	}
}

// Storage reads (with no entry cache, every read) are counted once per run
// of entries read from the bookies; with DisableMetrics nothing is.
func TestReadLatency(t *testing.T) {
	e := newEnv(t)
	for _, disabled := range []bool{false, true} {
		cfg := testConfig()
		cfg.CacheMaxBytes, cfg.DisableMetrics = 0, disabled
		ml := e.open(e.factory("b", cfg), fmt.Sprintf("persistent://t/ns/read-latency-%v", disabled))
		for i := range 5 {
			if _, err := ml.Append(context.Background(), testMessage(t, 1, uint64(i), 1, 200), 1); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(readAll(t, ml)); n != 5 {
			t.Fatalf("read %d entries, want 5", n)
		}
		if got := ml.ReadLatency(); (got.Count > 0) == disabled || got.Count > 5 {
			t.Errorf("disabled=%v: %d storage reads counted, want none when disabled, else between 1 and 5", disabled, got.Count)
		}
	}
}
