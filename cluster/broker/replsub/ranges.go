package replsub

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Range is the offsets From..To, both included.
type Range struct {
	From, To int64
}

// MarshalJSON writes [from,to]: a State of 10,000 ranges stays small.
func (r Range) MarshalJSON() ([]byte, error) { return json.Marshal([2]int64{r.From, r.To}) }

// UnmarshalJSON reads [from,to].
func (r *Range) UnmarshalJSON(b []byte) error {
	var v [2]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v[0] > v[1] || v[0] < 0 {
		return fmt.Errorf("replsub: range [%d,%d] is not ascending from 0 or above", v[0], v[1])
	}
	r.From, r.To = v[0], v[1]
	return nil
}

// Ranges is a set of offsets: sorted, disjoint, and never two ranges that
// touch (they are merged).
type Ranges []Range

// Add returns the set with from..to added.
func (rs Ranges) Add(from, to int64) Ranges {
	// i: the first range that ends at or after from-1 (touching counts).
	i, _ := slices.BinarySearchFunc(rs, from-1, func(r Range, x int64) int {
		switch {
		case r.To < x:
			return -1
		case r.To > x:
			return 1
		}
		return 0
	})
	j := i // j: the first range that starts after to+1
	for j < len(rs) && rs[j].From <= to+1 {
		j++
	}
	if i < j {
		from, to = min(from, rs[i].From), max(to, rs[j-1].To)
	}
	return slices.Replace(rs, i, j, Range{from, to})
}

// Union returns the set with every offset of o added.
func (rs Ranges) Union(o Ranges) Ranges {
	for _, r := range o {
		rs = rs.Add(r.From, r.To)
	}
	return rs
}

// Contains reports whether off is in the set.
func (rs Ranges) Contains(off int64) bool {
	_, found := rs.find(off)
	return found
}

// ContainsAll reports whether every offset of from..to is in the set.
func (rs Ranges) ContainsAll(from, to int64) bool {
	i, found := rs.find(from)
	return found && rs[i].To >= to // ranges never touch: one holds all or none does
}

// find returns the index of the range that holds off, if one does.
func (rs Ranges) find(off int64) (int, bool) {
	return slices.BinarySearchFunc(rs, off, func(r Range, x int64) int {
		switch {
		case r.To < x:
			return -1
		case r.From > x:
			return 1
		}
		return 0
	})
}

// valid reports whether the set is sorted, disjoint and merged, as a
// State read from the store must be.
func (rs Ranges) valid() bool {
	for i := 1; i < len(rs); i++ {
		if rs[i].From <= rs[i-1].To+1 {
			return false
		}
	}
	return true
}
