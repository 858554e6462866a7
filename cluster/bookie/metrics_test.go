package bookie

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
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
	out := map[string]float64{}
	for series, v := range gatherAll(t, b) {
		if part, ok := strings.CutPrefix(series, `meridian_bookie_index_memory_bytes{part="`); ok {
			out[strings.TrimSuffix(part, `"}`)] = v
		}
	}
	return out
}

// TestBookKeeperMetrics: the figures served under BookKeeper's names follow
// the traffic (adds and reads counted by success, their bytes, the journal's
// syncs and adds, the ledgers) and the bookie's state (SERVER_STATUS and
// the writable directories go to 0 while it is read-only, and back).
func TestBookKeeperMetrics(t *testing.T) {
	b := startBookie(t, testConfig(t, t.TempDir(), nil))
	ctx := testCtx(t)
	c := dial(t, b.Addr())
	const entries, size = 5, 100
	for e := range int64(entries) {
		mustAdd(t, ctx, c, 1, e, size)
	}
	for e := range int64(entries) {
		mustRead(t, ctx, c, 1, e, size)
	}
	if _, err := c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: entries}); err == nil {
		t.Fatal("a read past the last entry succeeded")
	}

	m := gatherAll(t, b)
	for _, want := range []struct {
		series string
		value  float64
	}{
		{`bookkeeper_server_ADD_ENTRY_count{success="true"}`, entries},
		{`bookkeeper_server_ADD_ENTRY_REQUEST_count{success="true"}`, entries},
		{`bookkeeper_server_READ_ENTRY_count{success="true"}`, entries},
		{`bookkeeper_server_READ_ENTRY_count{success="false"}`, 1},
		{`bookkeeper_server_READ_ENTRY_REQUEST_count{success="true"}`, entries},
		{`bookie_WRITE_BYTES`, entries * size},
		{`bookie_READ_BYTES`, entries * size},
		{`bookie_journal_JOURNAL_ADD_ENTRY_count{success="true"}`, entries},
		{`bookie_ledgers_count`, 1},
		{`bookie_SERVER_STATUS`, 1},
		{`bookie_ledger_writable_dirs`, 1},
		{`bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE`, 0},
	} {
		if got, ok := m[want.series]; !ok || got != want.value {
			t.Errorf("%s = %v (served %v), want %v", want.series, got, ok, want.value)
		}
	}
	// Adds on one connection wait for each other, so each is its own sync.
	if got := m[`bookie_journal_JOURNAL_SYNC_count{success="true"}`]; got < entries {
		t.Errorf("journal syncs = %v, want at least %d", got, entries)
	}
	if got, ok := m[`bookkeeper_server_ADD_ENTRY{success="true",quantile="1"}`]; !ok || got <= 0 {
		t.Errorf("ADD_ENTRY's largest = %v (served %v), want a latency", got, ok)
	}

	b.setReadOnly()
	m = gatherAll(t, b)
	if m["bookie_SERVER_STATUS"] != 0 || m["bookie_ledger_writable_dirs"] != 0 {
		t.Errorf("read-only: SERVER_STATUS %v, writable dirs %v, want 0 and 0", m["bookie_SERVER_STATUS"], m["bookie_ledger_writable_dirs"])
	}
	b.setWritable()
	if m = gatherAll(t, b); m["bookie_SERVER_STATUS"] != 1 {
		t.Errorf("writable again: SERVER_STATUS %v, want 1", m["bookie_SERVER_STATUS"])
	}
}

// gatherAll returns every series of the bookie's registry by its name and
// labels, as the text format writes them (name{k="v",...}): a summary's
// quantiles under its own name, its count under name_count.
func gatherAll(t *testing.T, b *testBookie) map[string]float64 {
	t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			series := func(name string, extra ...string) string {
				all := append(slices.Clone(labels), extra...)
				if len(all) == 0 {
					return name
				}
				return name + "{" + strings.Join(all, ",") + "}"
			}
			switch {
			case m.Summary != nil:
				out[series(f.GetName()+"_count")] = float64(m.Summary.GetSampleCount())
				for _, q := range m.Summary.GetQuantile() {
					out[series(f.GetName(), fmt.Sprintf("quantile=%q", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)))] = q.GetValue()
				}
			case m.Counter != nil:
				out[series(f.GetName())] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[series(f.GetName())] = m.Gauge.GetValue()
			}
		}
	}
	return out
}
