package mledger

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

var (
	flagSeed  = flag.Uint64("mledger.seed", 0, "replay one seed of the cursor model test (0: run -mledger.seeds seeds)")
	flagSeeds = flag.Int("mledger.seeds", 50, "seeds of the cursor model test")
	flagOps   = flag.Int("mledger.ops", 10000, "operations per seed of the cursor model test")
)

// refModel is the reference for cursor semantics: the topic as a flat array
// of entries, one "consumed" flag each. The mark-delete point is the length
// of the consumed prefix; nothing else is derived.
type refModel struct {
	consumed  []bool
	readAfter int // flat index of the last examined entry, -1 before the first
	// known is a length of consumed prefix already established; prefix
	// scans on from it. Only reset can shorten the prefix, and it sets it.
	known int
}

func (m *refModel) prefix() int {
	n := m.known
	for n < len(m.consumed) && m.consumed[n] {
		n++
	}
	m.known = n
	return n
}

func (m *refModel) settle() { m.readAfter = max(m.readAfter, m.prefix()-1) }

func (m *refModel) backlog() int {
	n := 0
	for _, c := range m.consumed[m.prefix():] {
		if !c {
			n++
		}
	}
	return n
}

// modelSpace is a growing ledger list: ledger ids with gaps, some ledgers
// empty, the last one being written.
type modelSpace struct {
	v    view
	flat []Position // flat index -> position
}

func newModelSpace() *modelSpace {
	s := &modelSpace{}
	s.v.ledgers = []ledgerInfo{{ID: 3}}
	s.v.current, s.v.lac = 3, Position{3, -1}
	return s
}

func (s *modelSpace) appendEntries(k int) {
	for range k {
		s.v.lac.Entry++
		s.flat = append(s.flat, s.v.lac)
	}
}

// roll closes the current ledger and opens the next (ids leave gaps, as
// ledgers of other topics take ids from the same counter).
func (s *modelSpace) roll(r *rand.Rand) {
	ls := slices.Clone(s.v.ledgers)
	ls[len(ls)-1].Entries = s.v.lac.Entry + 1
	id := ls[len(ls)-1].ID + 1 + int64(r.IntN(3))
	ls = append(ls, ledgerInfo{ID: id})
	s.v.ledgers, s.v.current, s.v.lac = ls, id, Position{id, -1}
}

func (s *modelSpace) index(p Position) int {
	i, ok := slices.BinarySearchFunc(s.flat, p, Position.Compare)
	if !ok {
		panic(fmt.Sprintf("position %v not in the space", p))
	}
	return i
}

// consumedCount maps a cursor position ("everything up to here") to the
// number of entries at or before it.
func (s *modelSpace) consumedCount(p Position) int {
	i, _ := slices.BinarySearchFunc(s.flat, p, Position.Compare)
	if i < len(s.flat) && s.flat[i] == p {
		return i + 1
	}
	return i
}

func TestCursorModel(t *testing.T) {
	seeds := make([]uint64, 0, *flagSeeds)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for i := range *flagSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	var failed []uint64
	for _, seed := range seeds {
		if err := runCursorModel(seed, *flagOps); err != nil {
			failed = append(failed, seed)
			t.Errorf("seed %d: %v\n\treplay: go test -race ./cluster/mledger -run TestCursorModel -mledger.seed=%d", seed, err, seed)
		}
	}
	if len(failed) > 0 {
		t.Logf("failing seeds: %v", failed)
	}
}

func runCursorModel(seed uint64, ops int) (err error) {
	r := rand.New(rand.NewPCG(seed, 0x6d6c6564676572))
	sp := newModelSpace()
	sp.appendEntries(5)
	m := &refModel{consumed: make([]bool, len(sp.flat)), readAfter: -1}
	origin := sp.v.origin()
	st := cursorState{markDelete: origin, readAfter: origin}
	const maxRanges = 6
	var op string
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in op %q: %v", op, p)
		}
	}()
	randPos := func() Position {
		if len(sp.flat) == 0 || r.IntN(20) == 0 {
			// Unknown positions: a ledger that does not exist, an entry
			// past the end, a negative entry.
			switch r.IntN(3) {
			case 0:
				return Position{sp.v.current + 100, 0}
			case 1:
				return Position{sp.v.current, sp.v.lac.Entry + 1 + int64(r.IntN(3))}
			default:
				return Position{sp.v.ledgers[0].ID, -2}
			}
		}
		// Bias towards the unconsumed region, where holes live.
		lo := max(0, m.prefix()-5)
		if r.IntN(4) == 0 {
			lo = 0
		}
		return sp.flat[lo+r.IntN(len(sp.flat)-lo)]
	}
	for step := range ops {
		before := st.clone()
		var opErr error
		switch k := r.IntN(100); {
		case k < 10:
			op = "append"
			if r.IntN(4) == 0 {
				sp.roll(r)
			}
			n := r.IntN(8)
			sp.appendEntries(n)
			m.consumed = append(m.consumed, make([]bool, n)...)
		case k < 25:
			n := 1 + r.IntN(10)
			op = fmt.Sprintf("read %d", n)
			got := st.readNext(&sp.v, n)
			var want []Position
			i := m.readAfter + 1
			for ; i < len(m.consumed) && len(want) < n; i++ {
				if !m.consumed[i] {
					want = append(want, sp.flat[i])
				}
				m.readAfter = i
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("step %d %s: got %v, want %v", step, op, got, want)
			}
		case k < 60:
			p := randPos()
			op = fmt.Sprintf("ack %v", p)
			opErr = st.ack(&sp.v, p)
			if sp.v.valid(p) {
				m.consumed[sp.index(p)] = true
			} else if opErr == nil {
				return fmt.Errorf("step %d %s: invalid position accepted", step, op)
			}
		case k < 68:
			p := randPos()
			op = fmt.Sprintf("ackCumulative %v", p)
			opErr = st.ackCumulative(&sp.v, p)
			if sp.v.valid(p) {
				for i, end := m.prefix(), sp.index(p); i <= end; i++ {
					m.consumed[i] = true
				}
			} else if opErr == nil {
				return fmt.Errorf("step %d %s: invalid position accepted", step, op)
			}
		case k < 75:
			op = "rewind"
			st.rewind()
			m.readAfter = m.prefix() - 1
		case k < 80:
			n := int64(r.IntN(4))
			op = fmt.Sprintf("skip %d", n)
			got := st.skip(&sp.v, n)
			var want int64
			last := -1
			for i := m.prefix(); i < len(m.consumed) && want < n; i++ {
				if !m.consumed[i] {
					want++
					last = i
				}
			}
			for i := m.prefix(); i <= last; i++ {
				m.consumed[i] = true
			}
			if got != want {
				return fmt.Errorf("step %d %s: skipped %d, want %d", step, op, got, want)
			}
		case k < 83:
			idx := r.IntN(len(sp.flat) + 1)
			target := Position{sp.v.last().Ledger, sp.v.last().Entry + 1}
			if idx < len(sp.flat) {
				target = sp.flat[idx]
			}
			op = fmt.Sprintf("reset %v", target)
			if opErr = st.reset(&sp.v, target); opErr != nil {
				return fmt.Errorf("step %d %s: %v", step, op, opErr)
			}
			for i := range m.consumed {
				m.consumed[i] = i < idx
			}
			m.readAfter, m.known = idx-1, idx
		case k < 88:
			idx := r.IntN(len(sp.flat) + 1)
			target := Position{sp.v.last().Ledger, sp.v.last().Entry + 1}
			if idx < len(sp.flat) {
				target = sp.flat[idx]
			}
			op = fmt.Sprintf("seek %v", target)
			opErr = st.seek(&sp.v, target)
			if idx >= m.prefix() {
				if opErr != nil {
					return fmt.Errorf("step %d %s: %v", step, op, opErr)
				}
				m.readAfter = idx - 1
			} else if opErr == nil {
				return fmt.Errorf("step %d %s: seek into the consumed prefix accepted", step, op)
			}
		case k < 92:
			p := Position{sp.v.last().Ledger, sp.v.last().Entry + 2 + int64(r.IntN(5))}
			op = fmt.Sprintf("seek past end %v", p)
			if opErr = st.seek(&sp.v, p); !errors.Is(opErr, ErrSeekPastEnd) {
				return fmt.Errorf("step %d %s: got %v, want ErrSeekPastEnd", step, op, opErr)
			}
		default:
			op = "persist and restore"
			val := persistedValue(&st, maxRanges, nil)
			b, err := encodeCursor(val)
			if err != nil {
				return err
			}
			back, err := decodeCursor(b)
			if err != nil {
				return fmt.Errorf("step %d %s: %v", step, op, err)
			}
			rs := restoredState(back)
			rs.normalize(&sp.v)
			if rs.markDelete != st.markDelete {
				return fmt.Errorf("step %d %s: mark-delete %v restored as %v", step, op, st.markDelete, rs.markDelete)
			}
			for _, rg := range rs.acked.ranges {
				for e := rg.From; e <= rg.To; e++ {
					if !st.acked.contains(Position{rg.Ledger, e}) {
						return fmt.Errorf("step %d %s: restored ack %d:%d was never acked", step, op, rg.Ledger, e)
					}
				}
			}
			if len(st.acked.ranges) <= maxRanges && rs.acked.count != st.acked.count {
				return fmt.Errorf("step %d %s: restored %d acks of %d under the cap", step, op, rs.acked.count, st.acked.count)
			}
			if len(st.acked.ranges) > maxRanges && !back.Truncated {
				return fmt.Errorf("step %d %s: %d ranges over the cap of %d not marked truncated", step, op, len(st.acked.ranges), maxRanges)
			}
		}
		if opErr != nil {
			// A refused operation changes nothing.
			if st.markDelete != before.markDelete || st.readAfter != before.readAfter || !slices.Equal(st.acked.ranges, before.acked.ranges) {
				return fmt.Errorf("step %d %s: refused (%v) but changed the state", step, op, opErr)
			}
		}
		m.settle()
		// The entry-by-entry check of the ranges is the costly part; do it
		// every few steps and at the end, the rest on every step.
		full := true
		if err := checkAgainstModel(sp, &st, m, full); err != nil {
			return fmt.Errorf("step %d after %s: %w", step, op, err)
		}
	}
	return nil
}

func checkAgainstModel(sp *modelSpace, st *cursorState, m *refModel, full bool) error {
	if got, want := sp.consumedCount(st.markDelete), m.prefix(); got != want {
		return fmt.Errorf("mark-delete %v covers %d entries, model's consumed prefix is %d", st.markDelete, got, want)
	}
	if got, want := sp.consumedCount(st.readAfter), m.readAfter+1; got != want {
		return fmt.Errorf("read position %v covers %d entries, model has %d", st.readAfter, got, want)
	}
	if got, want := st.backlog(&sp.v), int64(m.backlog()); got != want {
		return fmt.Errorf("backlog %d, model %d", got, want)
	}
	var n int64
	for i, rg := range st.acked.ranges {
		if i > 0 {
			prev := st.acked.ranges[i-1]
			if !prev.last().Less(rg.first()) || (prev.Ledger == rg.Ledger && prev.To+1 >= rg.From) {
				return fmt.Errorf("ranges %v and %v overlap or touch", prev, rg)
			}
		}
		if !st.markDelete.Less(rg.first()) {
			return fmt.Errorf("acked range %v starts at or before mark-delete %v", rg, st.markDelete)
		}
		if full {
			// Ranges never span ledgers, so flat indexes run on.
			base := sp.index(rg.first())
			for e := rg.From; e <= rg.To; e++ {
				if !m.consumed[base+int(e-rg.From)] {
					return fmt.Errorf("acked %d:%d is not consumed in the model", rg.Ledger, e)
				}
			}
		}
		n += rg.To - rg.From + 1
	}
	if n != st.acked.count {
		return fmt.Errorf("ack count %d, ranges hold %d", st.acked.count, n)
	}
	return nil
}
