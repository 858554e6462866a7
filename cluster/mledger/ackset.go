package mledger

import (
	"slices"
)

// entryRange is the entries From..To (inclusive) of one ledger.
type entryRange struct {
	Ledger int64
	From   int64
	To     int64
}

func (r entryRange) first() Position { return Position{r.Ledger, r.From} }
func (r entryRange) last() Position  { return Position{r.Ledger, r.To} }

// ackSet is a compact set of positions: disjoint ranges, sorted, and
// coalesced within a ledger (two ranges of one ledger never touch). Ranges
// of different ledgers are never merged, because whether the last entry of
// one ledger and the first of the next are neighbours depends on the ledger
// list, which the set does not know; the cursor jumps such seams itself.
type ackSet struct {
	ranges []entryRange
	count  int64
}

// find returns the index of the first range whose end is >= p.
func (s *ackSet) find(p Position) int {
	i, _ := slices.BinarySearchFunc(s.ranges, p, func(r entryRange, p Position) int {
		return r.last().Compare(p)
	})
	return i
}

// contains reports whether p is in the set.
func (s *ackSet) contains(p Position) bool {
	i := s.find(p)
	return i < len(s.ranges) && !p.Less(s.ranges[i].first())
}

// rangeAt returns the range holding p.
func (s *ackSet) rangeAt(p Position) (entryRange, bool) {
	i := s.find(p)
	if i < len(s.ranges) && !p.Less(s.ranges[i].first()) {
		return s.ranges[i], true
	}
	return entryRange{}, false
}

// add inserts p, merging with a neighbour range of the same ledger. It
// reports whether p was new.
func (s *ackSet) add(p Position) bool {
	i := s.find(p)
	if i < len(s.ranges) && !p.Less(s.ranges[i].first()) {
		return false
	}
	s.count++
	joinPrev := i > 0 && s.ranges[i-1].Ledger == p.Ledger && s.ranges[i-1].To == p.Entry-1
	joinNext := i < len(s.ranges) && s.ranges[i].Ledger == p.Ledger && s.ranges[i].From == p.Entry+1
	switch {
	case joinPrev && joinNext:
		s.ranges[i-1].To = s.ranges[i].To
		s.ranges = slices.Delete(s.ranges, i, i+1)
	case joinPrev:
		s.ranges[i-1].To = p.Entry
	case joinNext:
		s.ranges[i].From = p.Entry
	default:
		s.ranges = slices.Insert(s.ranges, i, entryRange{p.Ledger, p.Entry, p.Entry})
	}
	return true
}

// removeThrough drops every position <= p.
func (s *ackSet) removeThrough(p Position) {
	i := s.find(Position{p.Ledger, p.Entry + 1}) // first range ending after p
	for _, r := range s.ranges[:i] {
		s.count -= r.To - r.From + 1
	}
	s.ranges = s.ranges[i:]
	if len(s.ranges) > 0 && !p.Less(s.ranges[0].first()) {
		// p falls inside the first remaining range: cut its head.
		s.count -= p.Entry - s.ranges[0].From + 1
		s.ranges[0].From = p.Entry + 1
	}
}

// countBetween counts the positions in (a, b].
func (s *ackSet) countBetween(a, b Position) int64 {
	var n int64
	for i := s.find(Position{a.Ledger, a.Entry + 1}); i < len(s.ranges); i++ {
		r := s.ranges[i]
		if b.Less(r.first()) {
			break
		}
		lo, hi := r.From, r.To
		if r.Ledger == a.Ledger && lo <= a.Entry {
			lo = a.Entry + 1
		}
		if r.Ledger == b.Ledger && hi > b.Entry {
			hi = b.Entry
		}
		if hi >= lo {
			n += hi - lo + 1
		}
	}
	return n
}

func (s *ackSet) clone() ackSet {
	return ackSet{ranges: slices.Clone(s.ranges), count: s.count}
}

func (s *ackSet) reset() { *s = ackSet{} }
