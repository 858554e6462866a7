package topology

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Bookie is what placement knows about one live bookie: its id, its rack
// ("" when the operator set none), its bookie group (DefaultGroup unless an
// operator put it in another) and whether it refuses writes.
type Bookie struct {
	ID       string
	Rack     string
	Group    string
	ReadOnly bool
}

// DefaultGroup is the group of a bookie no operator placed in one, as
// Pulsar's racks-info names it.
const DefaultGroup = "default"

// Groups is a namespace's bookie affinity (Pulsar's
// BookieAffinityGroupData): the bookie group its ledgers are placed in, and
// the group that tops the primary up when it has too few bookies. The zero
// value places on every bookie.
type Groups struct {
	Primary   string `json:"primary,omitempty"`
	Secondary string `json:"secondary,omitempty"`
}

// IsZero reports whether g places on every bookie.
func (g Groups) IsZero() bool { return g.Primary == "" && g.Secondary == "" }

// String names the groups for an error or a log line.
func (g Groups) String() string {
	if g.Secondary == "" {
		return fmt.Sprintf("bookie group %q", g.Primary)
	}
	return fmt.Sprintf("bookie groups %q and %q", g.Primary, g.Secondary)
}

// Place chooses size distinct, writable bookies for a new ledger's
// ensemble in g, as Pulsar's IsolatedBookieEnsemblePlacementPolicy
// isolates a namespace: bookies of the primary group when it has size
// writable ones; else every writable bookie of the primary, topped up from
// the secondary. Bookies of any other group are never chosen. Within each
// group the racks are spread as PlaceEnsemble spreads them. Zero groups
// place on every candidate. It returns ErrNotEnoughBookies, wrapped with
// the counts, when the groups together have fewer than size.
func (g Groups) Place(candidates []Bookie, size int, rnd *rand.Rand) ([]string, error) {
	if g.IsZero() {
		return PlaceEnsemble(candidates, size, nil, rnd)
	}
	primary := inGroup(candidates, g.Primary)
	n := len(eligible(primary, nil))
	if n >= size || g.Secondary == "" || n == 0 {
		return PlaceEnsemble(g.Narrow(candidates, size, nil), size, nil, rnd)
	}
	ens, err := PlaceEnsemble(primary, n, nil, rnd)
	if err != nil {
		return nil, err
	}
	rest, err := PlaceEnsemble(inGroup(candidates, g.Secondary), size-n, ens, rnd)
	if errors.Is(err, ErrNotEnoughBookies) {
		return nil, fmt.Errorf("%w: need %d, have %d writable in the primary group and fewer than %d in the secondary", ErrNotEnoughBookies, size, n, size-n)
	}
	if err != nil {
		return nil, err
	}
	return append(ens, rest...), nil
}

// Narrow returns the candidates that placement may choose need more bookies
// from, besides those in exclude, which it keeps (ReplaceBookie reads the
// racks of the ensemble's members from them): the primary group's, when it
// has at least need writable bookies outside exclude, or else the
// primary's and the secondary's together. Zero groups narrow nothing. An
// ensemble change narrows for its one replacement, so that it stays in the
// primary while the primary has a spare.
func (g Groups) Narrow(candidates []Bookie, need int, exclude []string) []Bookie {
	if g.IsZero() {
		return candidates
	}
	primary := inGroup(candidates, g.Primary)
	if g.Secondary == "" || len(eligible(primary, exclude)) >= need {
		return primary
	}
	return append(primary, inGroup(candidates, g.Secondary)...)
}

// Capacity is the largest ensemble Place can choose in g out of
// candidates, leaving out every id in exclude: the writable bookies of the
// primary and secondary groups together (the secondary tops a short
// primary up, as Pulsar's IsolatedBookieEnsemblePlacementPolicy lets it),
// of the primary alone when g names no secondary, or of every candidate
// when g is zero. It is Narrow's answer for an ensemble no group could
// hold alone, so that it counts by placement's own rule: Place succeeds
// for any size from 1 to Capacity, and for no larger one. A persistence
// policy's E is checked against it, and so is a decommission, with the
// leaving bookie excluded.
func (g Groups) Capacity(candidates []Bookie, exclude []string) int {
	return len(eligible(g.Narrow(candidates, math.MaxInt, exclude), exclude))
}

func inGroup(candidates []Bookie, group string) []Bookie {
	var out []Bookie
	for _, c := range candidates {
		if c.Group == group {
			out = append(out, c)
		}
	}
	return out
}

// PlaceEnsemble chooses size distinct, writable bookies out of candidates,
// leaving out every id in exclude, for a new ledger's ensemble.
//
// Racks are filled round-robin: the first pick of every rack comes before the
// second pick of any rack, so an ensemble spans min(size, racks) racks and
// losing one rack costs as few members as the candidates allow. Bookies with
// no rack share the rack "" (when no rack is set anywhere, placement is plain
// random choice). rnd orders racks and the bookies inside a rack; a nil rnd
// gives a deterministic order (racks and ids sorted), which tests use.
//
// It returns ErrNotEnoughBookies, wrapped with the counts, when fewer than size
// bookies are eligible.
func PlaceEnsemble(candidates []Bookie, size int, exclude []string, rnd *rand.Rand) ([]string, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: ensemble size %d", ErrInvalidSize, size)
	}
	racks := groupByRack(eligible(candidates, exclude), rnd)
	n := 0
	for _, r := range racks {
		n += len(r.ids)
	}
	if n < size {
		return nil, fmt.Errorf("%w: need %d, have %d writable", ErrNotEnoughBookies, size, n)
	}
	out := make([]string, 0, size)
	for depth := 0; len(out) < size; depth++ {
		for _, r := range racks {
			if depth < len(r.ids) && len(out) < size {
				out = append(out, r.ids[depth])
			}
		}
	}
	return out, nil
}

// ReplaceBookie chooses a writable bookie to take the place of
// ensemble[index], one that is neither in the ensemble nor in exclude. It
// prefers a rack that none of the other members use, then the rack used by the
// fewest of them, so a replacement never concentrates the ensemble on a rack
// when a better one exists. rnd breaks ties (nil: lowest id).
func ReplaceBookie(ensemble []string, index int, candidates []Bookie, exclude []string, rnd *rand.Rand) (string, error) {
	if index < 0 || index >= len(ensemble) {
		return "", fmt.Errorf("%w: index %d of ensemble of %d", ErrInvalidSize, index, len(ensemble))
	}
	rackOf := make(map[string]string, len(candidates))
	for _, c := range candidates {
		rackOf[c.ID] = c.Rack
	}
	used := make(map[string]int) // rack -> members of the ensemble (other than index) on it
	for i, id := range ensemble {
		if i != index {
			if rack, ok := rackOf[id]; ok {
				used[rack]++
			}
		}
	}
	skip := slices.Concat(exclude, ensemble)
	var best []string
	bestUse := -1
	for _, c := range eligible(candidates, skip) {
		u := used[c.Rack]
		switch {
		case bestUse < 0 || u < bestUse:
			best, bestUse = []string{c.ID}, u
		case u == bestUse:
			best = append(best, c.ID)
		}
	}
	if len(best) == 0 {
		return "", fmt.Errorf("%w: no spare bookie outside the ensemble", ErrNotEnoughBookies)
	}
	if rnd == nil {
		slices.Sort(best)
		return best[0], nil
	}
	return best[rnd.IntN(len(best))], nil
}

type rackGroup struct {
	rack string
	ids  []string
}

// eligible returns the writable candidates not in exclude, without duplicate
// ids (a bookie registered twice must not fill two ensemble slots).
func eligible(candidates []Bookie, exclude []string) []Bookie {
	seen := make(map[string]bool, len(exclude)+len(candidates))
	for _, id := range exclude {
		seen[id] = true
	}
	out := make([]Bookie, 0, len(candidates))
	for _, c := range candidates {
		if c.ReadOnly || c.ID == "" || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out
}

func groupByRack(bs []Bookie, rnd *rand.Rand) []rackGroup {
	idx := make(map[string]int)
	var groups []rackGroup
	for _, b := range bs {
		i, ok := idx[b.Rack]
		if !ok {
			i = len(groups)
			idx[b.Rack] = i
			groups = append(groups, rackGroup{rack: b.Rack})
		}
		groups[i].ids = append(groups[i].ids, b.ID)
	}
	if rnd == nil {
		slices.SortFunc(groups, func(a, b rackGroup) int {
			// Larger racks first: with a deterministic order the result
			// still uses every rack before doubling up on one.
			if len(a.ids) != len(b.ids) {
				return len(b.ids) - len(a.ids)
			}
			if a.rack < b.rack {
				return -1
			}
			if a.rack > b.rack {
				return 1
			}
			return 0
		})
		for _, g := range groups {
			slices.Sort(g.ids)
		}
		return groups
	}
	rnd.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	for _, g := range groups {
		rnd.Shuffle(len(g.ids), func(i, j int) { g.ids[i], g.ids[j] = g.ids[j], g.ids[i] })
	}
	return groups
}
