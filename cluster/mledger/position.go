package mledger

import (
	"cmp"
	"fmt"
)

// Position names one entry of a managed ledger: a ledger id and an entry id
// in it. Positions order lexicographically, and because ledger ids come from
// an increasing counter, that order is the topic's order.
//
// A position whose Entry is -1 stands just before the first entry of its
// ledger; cursors use it as "nothing consumed yet" (a mark-delete position
// is always "the last entry consumed", so it can always be expressed without
// naming an entry that does not exist yet).
type Position struct {
	Ledger int64 `json:"ledger"`
	Entry  int64 `json:"entry"`
}

// Compare orders positions: -1, 0 or +1.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.Ledger, q.Ledger); c != 0 {
		return c
	}
	return cmp.Compare(p.Entry, q.Entry)
}

// Less reports p < q.
func (p Position) Less(q Position) bool { return p.Compare(q) < 0 }

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Ledger, p.Entry) }

func maxPos(a, b Position) Position {
	if a.Less(b) {
		return b
	}
	return a
}
