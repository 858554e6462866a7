package mledger

import (
	"slices"
)

// ledgerInfo is one ledger of the list, as stored in the managed ledger's
// value. Entries and Size are final once the ledger is closed; for the
// ledger being written they are 0 in the store and the confirmed count comes
// from view.lac.
type ledgerInfo struct {
	ID      int64 `json:"id"`
	Entries int64 `json:"entries"`
	Size    int64 `json:"size"`
	// CTime is the creation time, Unix milliseconds.
	CTime int64 `json:"ctime"`
}

// view is an immutable snapshot of what readers may see: the ledger list,
// the ledger being written, and the last confirmed position. It is the
// "space" cursors move in: which positions hold confirmed entries, in order.
// The managed ledger replaces its view under its lock; a copy is safe to use
// without it, because ledgers is never modified in place.
type view struct {
	ledgers []ledgerInfo
	// current is the id of the ledger being written, 0 when none is.
	current int64
	// lac is the last confirmed position in the current ledger (Entry -1:
	// none yet). It only moves forward.
	lac        Position
	terminated bool
}

// entries returns the number of readable entries of ledgers[i].
func (v *view) entries(i int) int64 {
	l := v.ledgers[i]
	if l.ID == v.current {
		if v.lac.Ledger == l.ID {
			return v.lac.Entry + 1
		}
		return 0
	}
	return l.Entries
}

// index returns the index of the first ledger with ID >= id.
func (v *view) index(id int64) int {
	i, _ := slices.BinarySearchFunc(v.ledgers, id, func(l ledgerInfo, id int64) int {
		switch {
		case l.ID < id:
			return -1
		case l.ID > id:
			return 1
		}
		return 0
	})
	return i
}

// next returns the first readable position after p.
func (v *view) next(p Position) (Position, bool) {
	i := v.index(p.Ledger)
	if i < len(v.ledgers) && v.ledgers[i].ID == p.Ledger {
		if p.Entry+1 < v.entries(i) {
			return Position{p.Ledger, max(p.Entry+1, 0)}, true
		}
		i++
	}
	for ; i < len(v.ledgers); i++ {
		if v.entries(i) > 0 {
			return Position{v.ledgers[i].ID, 0}, true
		}
	}
	return Position{}, false
}

// valid reports whether p names a readable entry.
func (v *view) valid(p Position) bool {
	i := v.index(p.Ledger)
	return i < len(v.ledgers) && v.ledgers[i].ID == p.Ledger && p.Entry >= 0 && p.Entry < v.entries(i)
}

// last returns the last readable position, or, for a topic with no entries,
// the position just before the first ledger's first entry.
func (v *view) last() Position {
	for i := len(v.ledgers) - 1; i >= 0; i-- {
		if n := v.entries(i); n > 0 {
			return Position{v.ledgers[i].ID, n - 1}
		}
	}
	return v.origin()
}

// origin is the position before every entry of the list.
func (v *view) origin() Position {
	if len(v.ledgers) == 0 {
		return Position{0, -1}
	}
	return Position{v.ledgers[0].ID, -1}
}

// count returns the number of readable entries in (a, b].
func (v *view) count(a, b Position) int64 {
	var n int64
	for i := v.index(a.Ledger); i < len(v.ledgers) && v.ledgers[i].ID <= b.Ledger; i++ {
		id := v.ledgers[i].ID
		lo, hi := int64(0), v.entries(i)-1
		if id == a.Ledger {
			lo = max(lo, a.Entry+1)
		}
		if id == b.Ledger {
			hi = min(hi, b.Entry)
		}
		if hi >= lo {
			n += hi - lo + 1
		}
	}
	return n
}

// nth returns the k-th readable position (0-based) after p.
func (v *view) nth(p Position, k int64) (Position, bool) {
	for i := v.index(p.Ledger); i < len(v.ledgers); i++ {
		id := v.ledgers[i].ID
		lo, n := int64(0), v.entries(i)
		if id == p.Ledger {
			lo = p.Entry + 1
		}
		if avail := n - lo; avail > k {
			return Position{id, lo + k}, true
		} else if avail > 0 {
			k -= avail
		}
	}
	return Position{}, false
}

// totalSize is the stored size of the closed ledgers plus an estimate for
// the current one (its size is known only to the writer).
func (v *view) totalSize() int64 {
	var n int64
	for _, l := range v.ledgers {
		n += l.Size
	}
	return n
}
