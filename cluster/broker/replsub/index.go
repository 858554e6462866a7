package replsub

import (
	"maps"
	"slices"

	"github.com/meridian-mq/meridian/cluster/mledger"
)

// Index names the entries of one topic in this region by their
// identities, in local order. It covers the topic from the position its
// reader started at (the oldest entry stored) on, less a prefix that every
// replicated subscription has consumed (TrimThrough), so it holds about the
// slowest replicated subscription's backlog.
//
// Ownership: not safe for concurrent use; the topic's replicated
// subscriptions loop alone appends to it, trims it and reads it.
type Index struct {
	entries []indexed
	// trimmedAcks holds, per origin, the offsets of the entries trimmed
	// from the index, which every replicated subscription had consumed.
	trimmedAcks map[Origin]Ranges
	trimmed     *mledger.Position // the last position trimmed, nil while none was
	// latest is the highest offset of each origin appended, trimmed or not.
	latest map[Origin]int64
}

type indexed struct {
	pos mledger.Position
	id  Identity
	// published is the entry's publish time (Unix ms), as its origin's
	// producer stamped it in the message metadata, which every region's
	// copy carries unchanged.
	published int64
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{trimmedAcks: map[Origin]Ranges{}, latest: map[Origin]int64{}} }

// Append adds the entry at p, published at published (Unix ms), which
// follows every entry appended before.
func (x *Index) Append(p mledger.Position, id Identity, published int64) {
	x.entries = append(x.entries, indexed{pos: p, id: id, published: published})
	x.latest[id.Origin] = max(x.latest[id.Origin], id.Last)
}

// Behind reports whether st says that messages of an origin were consumed
// that have not reached this region yet: offsets past the last entry of
// that origin appended here. Replication brings each origin's entries in
// order, so once it has brought them up to st's last offset, Translate
// places everything st says of that origin. An origin with no entry here
// at all is not counted: none of its entries may ever come (it does not
// replicate here), or all of them may be gone (trimmed before the index
// began), and waiting on it would wait for nothing.
func (x *Index) Behind(st State) bool {
	for _, o := range st.Origins {
		last, ok := x.latest[o.Origin]
		if ok && len(o.Acked) > 0 && o.Acked[len(o.Acked)-1].To > last {
			return true
		}
	}
	return false
}

// Len returns the number of entries held.
func (x *Index) Len() int { return len(x.entries) }

// Covers reports whether a subscription whose mark-delete position is md
// can be exported exactly: nothing after md was trimmed.
func (x *Index) Covers(md mledger.Position) bool { return x.trimmed == nil || !md.Less(*x.trimmed) }

// TrimThrough drops the entries at or before p, which every replicated
// subscription has consumed, keeping their offsets as consumed.
func (x *Index) TrimThrough(p mledger.Position) {
	n := x.after(p)
	if n == 0 {
		return
	}
	for _, e := range x.entries[:n] {
		x.trimmedAcks[e.id.Origin] = x.trimmedAcks[e.id.Origin].Add(e.id.First, e.id.Last)
	}
	last := x.entries[n-1].pos
	x.trimmed = &last
	x.entries = slices.Delete(x.entries, 0, n)
}

// after returns the index of the first entry after p.
func (x *Index) after(p mledger.Position) int {
	i, _ := slices.BinarySearchFunc(x.entries, p, func(e indexed, p mledger.Position) int {
		if e.pos.Less(p) || e.pos == p {
			return -1
		}
		return 1
	})
	return i
}

// PublishedBefore returns the entries after markDelete published before
// cutoff (Unix ms): what a message TTL or a message_age eviction expires
// of a replicated subscription. Every region's copy of an entry carries
// the same publish time, so every region expires the same set, whatever
// the time each copy arrived; the entries trimmed from the index were
// consumed already.
func (x *Index) PublishedBefore(cutoff int64, markDelete mledger.Position) []mledger.Position {
	var out []mledger.Position
	for _, e := range x.entries[x.after(markDelete):] {
		if e.published < cutoff {
			out = append(out, e.pos)
		}
	}
	return out
}

// Consumed says what a subscription consumed of the entry at p: all of it
// (whole), or the messages of a batch acked in part, as the ack set of the
// rest (remaining: bit i set when message i is not acked; nil when none of
// the batch is acked).
type Consumed func(p mledger.Position) (whole bool, remaining []int64)

// Export expresses a subscription's consumed set in identities, under
// epoch, holding at most maxRanges ranges per origin; cut counts the
// origins that fell back to their first range, their consumed prefix.
// Origins with no entry here are absent, and every range is made of the
// offsets of entries this region stored: offsets it never had (a message
// kept from it by replicate_to) are never said to be consumed. Every entry at or
// before markDelete is consumed without asking consumed.
func (x *Index) Export(markDelete mledger.Position, consumed Consumed, epoch Epoch, maxRanges int) (st State, cut int) {
	acked := make(map[Origin]Ranges, len(x.trimmedAcks))
	for o, rs := range x.trimmedAcks {
		acked[o] = slices.Clone(rs)
	}
	first := x.after(markDelete)
	for _, e := range x.entries[:first] {
		acked[e.id.Origin] = acked[e.id.Origin].Add(e.id.First, e.id.Last)
	}
	for _, e := range x.entries[first:] {
		whole, remaining := consumed(e.pos)
		switch {
		case whole:
			acked[e.id.Origin] = acked[e.id.Origin].Add(e.id.First, e.id.Last)
		case remaining != nil:
			for off := e.id.First; off <= e.id.Last; off++ {
				if !bit(remaining, off-e.id.First) {
					acked[e.id.Origin] = acked[e.id.Origin].Add(off, off)
				}
			}
		}
	}
	st.Epoch = epoch
	for _, o := range slices.SortedFunc(maps.Keys(acked), Origin.compare) {
		rs := acked[o]
		if len(rs) > maxRanges {
			// The consumed prefix of this region's entries of o: what a
			// mark-delete alone would say.
			cut++
			rs = rs[:1:1]
		}
		st.Origins = append(st.Origins, OriginAcks{Origin: o, Acked: rs})
	}
	return st, cut
}

// Apply is what a remote State means for one entry here: consumed whole
// (Remaining nil), or a batch consumed in part, Remaining its ack set
// (bit i set: message i not consumed).
type Apply struct {
	Pos       mledger.Position
	Remaining []int64
}

// Translate returns what st says of the entries after markDelete: those it
// names as consumed, whole or in part. Entries of an origin st does not
// know are left alone.
func (x *Index) Translate(st State, markDelete mledger.Position) []Apply {
	var out []Apply
	for _, e := range x.entries[x.after(markDelete):] {
		rs, ok := st.acked(e.id.Origin)
		if !ok {
			continue
		}
		n := e.id.Last - e.id.First + 1
		var remaining []int64
		some := false
		for off := e.id.First; off <= e.id.Last; off++ {
			if rs.Contains(off) {
				some = true
				continue
			}
			if remaining == nil {
				remaining = make([]int64, (n+63)/64)
			}
			i := off - e.id.First
			remaining[i/64] |= 1 << (i % 64)
		}
		if some {
			out = append(out, Apply{Pos: e.pos, Remaining: remaining})
		}
	}
	return out
}

func bit(set []int64, i int64) bool {
	w := i / 64
	return w < int64(len(set)) && set[w]&(1<<(i%64)) != 0
}
