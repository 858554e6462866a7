package mledger

import (
	"slices"
	"testing"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestBookieGroups opens a managed ledger in bookie group g1, three of
// the region's five bookies: its first ledger is created on those three,
// with the group in its metadata. After SetBookieGroups to the default
// group (two bookies) topped up from g1, the ledgers that follow hold both
// default bookies and one of g1's.
func TestBookieGroups(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	e := newEnvOn(t, mem, 5)
	g1 := []string{"bka", "bkc", "bke"}
	for _, id := range g1 {
		info := bkproto.RackInfo{Group: "g1"}.Marshal()
		if _, err := mem.Create(t.Context(), bkproto.RackInfoKey(region, id+":0"), info, meta.NoLease); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 2
	f := e.factory("broker", cfg)
	first := BookieGroups{Primary: "g1"}
	ml, err := f.Open(t.Context(), "t", WithBookieGroups(first))
	if err != nil {
		t.Fatal(err)
	}
	placed := func(id int64) (BookieGroups, []string) {
		t.Helper()
		md, err := f.client.Metadata(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return md.BookieGroups, slices.Sorted(slices.Values(md.LastEnsemble()))
	}
	append1 := func(seq uint64) {
		t.Helper()
		if _, err := ml.Append(t.Context(), testMessage(t, 1, seq, 1, 0), 1); err != nil {
			t.Fatal(err)
		}
		settle(t, ml)
	}
	append1(0)
	if groups, ens := placed(ml.Ledgers()[0]); groups != first || !slices.Equal(ens, g1) {
		t.Fatalf("first ledger: groups %v, ensemble %v; want g1's %v", groups, ens, g1)
	}

	then := BookieGroups{Primary: "default", Secondary: "g1"}
	ml.SetBookieGroups(then)
	for seq := uint64(1); len(ml.Ledgers()) < 3; seq++ {
		append1(seq)
	}
	last := ml.Ledgers()[len(ml.Ledgers())-1]
	groups, ens := placed(last)
	if groups != then || !slices.Contains(ens, "bkb") || !slices.Contains(ens, "bkd") {
		t.Fatalf("ledger %d after SetBookieGroups: groups %v, ensemble %v; want bkb, bkd and one of g1's", last, groups, ens)
	}
}
