package topology

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func bk(id, rack string) Bookie { return Bookie{ID: id, Rack: rack} }

func TestPlaceEnsemble(t *testing.T) {
	tests := []struct {
		name       string
		candidates []Bookie
		size       int
		exclude    []string
		want       []string // deterministic result with a nil rnd
		wantErr    error
	}{
		{name: "no racks", candidates: []Bookie{bk("b3", ""), bk("b1", ""), bk("b2", "")}, size: 2, want: []string{"b1", "b2"}},
		{name: "spread over racks first", candidates: []Bookie{bk("a1", "ra"), bk("a2", "ra"), bk("a3", "ra"), bk("b1", "rb")}, size: 2, want: []string{"a1", "b1"}},
		{name: "more members than racks", candidates: []Bookie{bk("a1", "ra"), bk("a2", "ra"), bk("b1", "rb"), bk("b2", "rb"), bk("c1", "rc")}, size: 4, want: []string{"a1", "b1", "c1", "a2"}},
		{name: "read-only skipped", candidates: []Bookie{{ID: "b1", ReadOnly: true}, bk("b2", ""), bk("b3", "")}, size: 2, want: []string{"b2", "b3"}},
		{name: "excluded skipped", candidates: []Bookie{bk("b1", ""), bk("b2", ""), bk("b3", "")}, size: 2, exclude: []string{"b1"}, want: []string{"b2", "b3"}},
		{name: "duplicate ids count once", candidates: []Bookie{bk("b1", ""), bk("b1", ""), bk("b2", "")}, size: 3, wantErr: ErrNotEnoughBookies},
		{name: "too few", candidates: []Bookie{bk("b1", ""), {ID: "b2", ReadOnly: true}}, size: 2, wantErr: ErrNotEnoughBookies},
		{name: "zero size", candidates: []Bookie{bk("b1", "")}, size: 0, wantErr: ErrInvalidSize},
		{name: "empty id ignored", candidates: []Bookie{bk("", ""), bk("b1", "")}, size: 2, wantErr: ErrNotEnoughBookies},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlaceEnsemble(tt.candidates, tt.size, tt.exclude, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPlaceEnsembleRandomInvariants checks, over many random draws, what must
// hold whatever the shuffle: distinct members, none excluded or read-only, and
// as many racks as possible.
func TestPlaceEnsembleRandomInvariants(t *testing.T) {
	cands := []Bookie{
		bk("a1", "ra"), bk("a2", "ra"), bk("a3", "ra"), bk("a4", "ra"),
		bk("b1", "rb"), bk("b2", "rb"),
		bk("c1", "rc"), {ID: "c2", Rack: "rc", ReadOnly: true},
	}
	rackOf := map[string]string{}
	for _, c := range cands {
		rackOf[c.ID] = c.Rack
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	picked := map[string]bool{}
	for i := 0; i < 500; i++ {
		size := 1 + rnd.IntN(6)
		got, err := PlaceEnsemble(cands, size, []string{"a4"}, rnd)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		racks := map[string]bool{}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] || id == "a4" || id == "c2" {
				t.Fatalf("bad ensemble %v", got)
			}
			seen[id] = true
			racks[rackOf[id]] = true
			picked[id] = true
		}
		if want := min(size, 3); len(racks) != want {
			t.Fatalf("ensemble %v spans %d racks, want %d", got, len(racks), want)
		}
	}
	for _, id := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		if !picked[id] {
			t.Errorf("bookie %s never chosen in 500 random placements", id)
		}
	}
}

func TestReplaceBookie(t *testing.T) {
	cands := []Bookie{bk("a1", "ra"), bk("a2", "ra"), bk("b1", "rb"), bk("b2", "rb"), bk("c1", "rc"), {ID: "c2", Rack: "rc", ReadOnly: true}}
	tests := []struct {
		name     string
		ensemble []string
		index    int
		exclude  []string
		want     string
		wantErr  error
	}{
		{name: "prefers unused rack", ensemble: []string{"a1", "b1", "a2"}, index: 2, want: "c1"},
		{name: "replaced member's rack is free again", ensemble: []string{"a1", "b1", "c1"}, index: 2, exclude: []string{"c1"}, want: "a2"},
		{name: "excluded skipped", ensemble: []string{"a1", "b1", "a2"}, index: 0, exclude: []string{"c1"}, want: "b2"},
		{name: "none left", ensemble: []string{"a1", "a2", "b1"}, index: 1, exclude: []string{"b2", "c1"}, wantErr: ErrNotEnoughBookies},
		{name: "bad index", ensemble: []string{"a1"}, index: 3, wantErr: ErrInvalidSize},
		{name: "member not registered", ensemble: []string{"gone", "a1", "b1"}, index: 0, want: "c1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReplaceBookie(tt.ensemble, tt.index, cands, tt.exclude, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func bkg(id, rack, group string) Bookie { return Bookie{ID: id, Rack: rack, Group: group} }

// groupedRegion is a region of two groups, g1 (two writable bookies and
// one read-only) and g2 (two), and three bookies in no group.
func groupedRegion() []Bookie {
	return []Bookie{
		bkg("p1", "ra", "g1"), bkg("p2", "rb", "g1"), {ID: "p3", Group: "g1", ReadOnly: true},
		bkg("s1", "ra", "g2"), bkg("s2", "rb", "g2"),
		bkg("d1", "ra", DefaultGroup), bkg("d2", "rb", DefaultGroup), bkg("d3", "rc", DefaultGroup),
	}
}

// TestPlaceEnsembleInGroups checks bookie affinity as Pulsar's
// IsolatedBookieEnsemblePlacementPolicy places: the primary group alone
// when it has enough writable bookies, topped up from the secondary when
// it has not, and not enough bookies when both together are short.
func TestPlaceEnsembleInGroups(t *testing.T) {
	region := groupedRegion()
	tests := []struct {
		name    string
		groups  Groups
		size    int
		want    []string
		wantErr error
	}{
		{name: "no groups uses every bookie", size: 3, want: []string{"d1", "d2", "d3"}},
		{name: "primary only", groups: Groups{Primary: "g1", Secondary: "g2"}, size: 2, want: []string{"p1", "p2"}},
		{name: "topped up from secondary", groups: Groups{Primary: "g1", Secondary: "g2"}, size: 3, want: []string{"p1", "p2", "s1"}},
		{name: "empty primary, secondary only", groups: Groups{Primary: "none", Secondary: "g2"}, size: 2, want: []string{"s1", "s2"}},
		{name: "both too few", groups: Groups{Primary: "g1", Secondary: "g2"}, size: 5, wantErr: ErrNotEnoughBookies},
		{name: "primary too few, no secondary", groups: Groups{Primary: "g1"}, size: 3, wantErr: ErrNotEnoughBookies},
		{name: "unknown group", groups: Groups{Primary: "nope"}, size: 1, wantErr: ErrNotEnoughBookies},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.groups.Place(region, tt.size, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			slices.Sort(got)
			if tt.wantErr == nil && !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCapacityIsWhatPlaceGives checks Capacity against Place itself, over
// groups that hold enough, are short, overlap, name no bookie or exclude
// one: Place succeeds at Capacity and fails one above it.
func TestCapacityIsWhatPlaceGives(t *testing.T) {
	region := groupedRegion()
	tests := []struct {
		name    string
		groups  Groups
		exclude []string
		want    int
	}{
		{name: "no groups counts every writable bookie", want: 7},
		{name: "no groups, one excluded", exclude: []string{"d1"}, want: 6},
		{name: "primary alone, read-only left out", groups: Groups{Primary: "g1"}, want: 2},
		{name: "primary topped up by secondary", groups: Groups{Primary: "g1", Secondary: "g2"}, want: 4},
		{name: "secondary bookie excluded", groups: Groups{Primary: "g1", Secondary: "g2"}, exclude: []string{"s2"}, want: 3},
		{name: "primary bookie excluded", groups: Groups{Primary: "g1", Secondary: "g2"}, exclude: []string{"p1"}, want: 3},
		{name: "empty primary, secondary only", groups: Groups{Primary: "none", Secondary: "g2"}, want: 2},
		{name: "same group twice", groups: Groups{Primary: "g2", Secondary: "g2"}, want: 2},
		{name: "unknown group", groups: Groups{Primary: "nope"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.groups.Capacity(region, tt.exclude)
			if got != tt.want {
				t.Fatalf("Capacity = %d, want %d", got, tt.want)
			}
			var left []Bookie
			for _, b := range region {
				if !slices.Contains(tt.exclude, b.ID) {
					left = append(left, b)
				}
			}
			if got > 0 {
				if _, err := tt.groups.Place(left, got, nil); err != nil {
					t.Fatalf("Place of Capacity %d: %v", got, err)
				}
			}
			if _, err := tt.groups.Place(left, got+1, nil); !errors.Is(err, ErrNotEnoughBookies) {
				t.Fatalf("Place of Capacity+1 (%d): %v, want ErrNotEnoughBookies", got+1, err)
			}
		})
	}
}

// TestPlaceTopsUpThePrimary: when the primary group is short, every one
// of its bookies is in the ensemble, even where spreading racks over the
// two groups together would have chosen secondary bookies instead.
func TestPlaceTopsUpThePrimary(t *testing.T) {
	region := []Bookie{bkg("p1", "ra", "g1"), bkg("p2", "ra", "g1"), bkg("s1", "rb", "g2"), bkg("s2", "rc", "g2")}
	g := Groups{Primary: "g1", Secondary: "g2"}
	for seed := range uint64(50) {
		got, err := g.Place(region, 3, rand.New(rand.NewPCG(seed, 0)))
		if err != nil || !slices.Contains(got, "p1") || !slices.Contains(got, "p2") {
			t.Fatalf("seed %d: %v, %v; want p1, p2 and one of g2's", seed, got, err)
		}
	}
}

// TestReplaceBookieInGroups checks that an ensemble change stays in the
// groups: in the primary while it has a spare, then in the secondary, and
// nowhere else.
func TestReplaceBookieInGroups(t *testing.T) {
	g := Groups{Primary: "g1", Secondary: "g2"}
	region := []Bookie{bkg("p1", "", "g1"), bkg("p2", "", "g1"), bkg("p3", "", "g1"), bkg("s1", "", "g2"), bkg("d1", "", DefaultGroup)}
	ensemble := []string{"p1", "p2"}
	replace := func(exclude []string) (string, error) {
		return ReplaceBookie(ensemble, 1, g.Narrow(region, 1, slices.Concat(exclude, ensemble)), exclude, nil)
	}
	if got, err := replace([]string{"p2"}); err != nil || got != "p3" {
		t.Fatalf("with a primary spare: got %q, %v; want p3", got, err)
	}
	if got, err := replace([]string{"p2", "p3"}); err != nil || got != "s1" {
		t.Fatalf("primary exhausted: got %q, %v; want s1", got, err)
	}
	if got, err := replace([]string{"p2", "p3", "s1"}); !errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("both exhausted: got %q, %v; want ErrNotEnoughBookies (d1 is in no affinity group)", got, err)
	}
}
