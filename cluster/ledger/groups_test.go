package ledger_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/topology"
)

// setGroup puts the bookie registered as id (at address id:0, as
// ledgertest.Register registers it) in group, as the racks-info admin API
// does.
func (e *env) setGroup(id, group, rack string) {
	e.t.Helper()
	info := bkproto.RackInfo{Group: group, Rack: rack}.Marshal()
	if _, err := e.store.Create(e.t.Context(), bkproto.RackInfoKey(region, id+":0"), info, 0); err != nil {
		e.t.Fatal(err)
	}
}

// TestBookieGroupsPlacement creates a ledger in bookie groups g1 (two
// bookies) and g2 (two): its ensemble of three takes both of g1's and one
// of g2's, never a default bookie, and the ensemble changes that follow
// the loss of members stay in the groups, moving to g2's spare.
func TestBookieGroupsPlacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 7, "p1", "p2", "s1", "s2", "d1", "d2", "d3")
		c := e.client("w", testConfig())
		e.setGroup("p1", "g1", "ra")
		e.setGroup("p2", "g1", "rb")
		e.setGroup("s1", "g2", "")
		e.setGroup("s2", "g2", "")
		synctest.Wait() // the directory's watch has the rack infos
		rackOf := map[string]string{}
		for _, b := range c.Directory().Snapshot() {
			rackOf[b.ID] = b.Group + "/" + b.Rack
		}
		if rackOf["p1"] != "g1/ra" || rackOf["s1"] != "g2/" || rackOf["d1"] != topology.DefaultGroup+"/" {
			t.Fatalf("directory groups and racks: %v", rackOf)
		}

		groups := ledger.Groups{Primary: "g1", Secondary: "g2"}
		w, err := c.Create(t.Context(), 3, 3, 2, groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		inGroups := []string{"p1", "p2", "s1", "s2"}
		first := mustMetadata(t, c, w.ID()).LastEnsemble()
		if !slices.Contains(first, "p1") || !slices.Contains(first, "p2") || !allIn(first, inGroups) {
			t.Fatalf("ensemble %v: want p1, p2 and one of g2's", first)
		}
		appendN(t, w, 0, 20)
		e.bookies.SetDown("p1", true)
		appendN(t, w, 20, 20)
		md := mustMetadata(t, c, w.ID())
		if md.BookieGroups != groups || len(md.Fragments) != 2 {
			t.Fatalf("metadata after losing p1: groups %+v, fragments %+v", md.BookieGroups, md.Fragments)
		}
		for _, f := range md.Fragments {
			if !allIn(f.Ensemble, inGroups) {
				t.Fatalf("fragment %+v left the groups", f)
			}
		}
		if last := md.LastEnsemble(); slices.Contains(last, "p1") || !slices.Contains(last, "s1") || !slices.Contains(last, "s2") {
			t.Fatalf("last ensemble %v: want p2, s1, s2", last)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBookieGroupsTooFew refuses a ledger whose groups together hold
// fewer writable bookies than its ensemble, naming the groups, even though
// the region has enough bookies.
func TestBookieGroupsTooFew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 7, "p1", "s1", "d1", "d2", "d3")
		e.setGroup("p1", "g1", "")
		e.setGroup("s1", "g2", "")
		c := e.client("w", testConfig())
		_, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{Primary: "g1", Secondary: "g2"}, nil)
		if !errors.Is(err, ledger.ErrNotEnoughBookies) || !strings.Contains(err.Error(), `"g1" and "g2"`) {
			t.Fatalf("create in groups of 2 bookies for E=3: %v", err)
		}
		w, err := c.Create(t.Context(), 3, 3, 2, ledger.Groups{}, nil)
		if err != nil {
			t.Fatalf("create without groups: %v", err)
		}
		w.Stop()
	})
}

func allIn(ids, set []string) bool {
	for _, id := range ids {
		if !slices.Contains(set, id) {
			return false
		}
	}
	return true
}
