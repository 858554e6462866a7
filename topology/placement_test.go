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
