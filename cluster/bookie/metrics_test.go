package bookie

import (
	"testing"
)

// The index's memory is served while the bookie runs (pebble allocates its
// memtable at open), and a scrape after the bookie closed finds no series
// rather than asking a closed pebble.
func TestIndexMemoryMetric(t *testing.T) {
	b := startBookie(t, testConfig(t, t.TempDir(), nil))
	parts := indexMemoryParts(t, b)
	if parts["memtables"] <= 0 {
		t.Errorf("memtables = %v bytes, want the open memtable's size", parts["memtables"])
	}
	if _, ok := parts["block_cache"]; !ok || len(parts) != 2 {
		t.Errorf("parts = %v, want memtables and block_cache", parts)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if parts := indexMemoryParts(t, b); len(parts) != 0 {
		t.Errorf("after Close: %v, want no series", parts)
	}
}

// indexMemoryParts gathers meridian_bookie_index_memory_bytes by part.
func indexMemoryParts(t *testing.T, b *testBookie) map[string]float64 {
	t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "meridian_bookie_index_memory_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "part" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
