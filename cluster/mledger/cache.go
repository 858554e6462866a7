package mledger

import "slices"

// entryOverhead is what one cached entry costs beyond its bytes (the slice
// header, the position, the slot), so that a cache of tiny entries is bounded
// by count too.
const entryOverhead = 64

// entryCache holds recently confirmed entries of one managed ledger, in
// position order, bounded in bytes. It is what tailing cursors read from:
// an entry goes in when it is confirmed and leaves once every active cursor
// has read past it, or, when the cache is full, oldest first (a cursor that
// falls that far behind reads from the bookies). Guarded by
// ManagedLedger.mu.
type entryCache struct {
	max          int64
	bytes        int64
	entries      []Entry
	hits, misses int64
}

func (c *entryCache) put(e Entry) {
	if c.max <= 0 {
		return
	}
	if n := len(c.entries); n > 0 && !c.entries[n-1].Position.Less(e.Position) {
		return // never out of order; a duplicate or a late one is simply not cached
	}
	c.entries = append(c.entries, e)
	c.bytes += int64(len(e.Data)) + entryOverhead
	for c.bytes > c.max && len(c.entries) > 0 {
		c.drop()
	}
}

func (c *entryCache) drop() {
	c.bytes -= int64(len(c.entries[0].Data)) + entryOverhead
	c.entries[0] = Entry{}
	c.entries = c.entries[1:]
}

func (c *entryCache) get(p Position) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(c.entries, p, func(e Entry, p Position) int { return e.Position.Compare(p) })
	if !ok {
		c.misses++
		return Entry{}, false
	}
	c.hits++
	return c.entries[i], true
}

// evictThrough drops every entry at or before p.
func (c *entryCache) evictThrough(p Position) {
	for len(c.entries) > 0 && !p.Less(c.entries[0].Position) {
		c.drop()
	}
}

// dropLedgers drops the entries of ledgers before id (deleted by retention).
func (c *entryCache) dropLedgers(id int64) {
	for len(c.entries) > 0 && c.entries[0].Position.Ledger < id {
		c.drop()
	}
}
