package replsub

import (
	"slices"
	"testing"

	"github.com/meridian-mq/meridian/cluster/mledger"
)

func TestRangesAdd(t *testing.T) {
	for _, tc := range []struct {
		name string
		adds [][2]int64
		want Ranges
	}{
		{"one", [][2]int64{{3, 5}}, Ranges{{3, 5}}},
		{"apart", [][2]int64{{7, 7}, {3, 4}}, Ranges{{3, 4}, {7, 7}}},
		{"touching merge", [][2]int64{{3, 4}, {5, 6}}, Ranges{{3, 6}}},
		{"touching before", [][2]int64{{5, 6}, {3, 4}}, Ranges{{3, 6}}},
		{"fills a hole", [][2]int64{{0, 2}, {6, 8}, {3, 5}}, Ranges{{0, 8}}},
		{"spans several", [][2]int64{{1, 1}, {3, 3}, {5, 5}, {9, 9}, {0, 6}}, Ranges{{0, 6}, {9, 9}}},
		{"inside", [][2]int64{{0, 10}, {4, 5}}, Ranges{{0, 10}}},
		{"a hole stays", [][2]int64{{0, 3}, {5, 6}}, Ranges{{0, 3}, {5, 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs Ranges
			for _, a := range tc.adds {
				rs = rs.Add(a[0], a[1])
			}
			if !slices.Equal(rs, tc.want) {
				t.Fatalf("got %v, want %v", rs, tc.want)
			}
			if !rs.valid() {
				t.Fatalf("%v is not sorted and merged", rs)
			}
			for _, r := range tc.want {
				if !rs.Contains(r.From) || !rs.Contains(r.To) || rs.Contains(r.To+1) {
					t.Fatalf("Contains disagrees with %v", rs)
				}
			}
		})
	}
}

var (
	east = Origin{Region: "east", Incarnation: 7}
	west = Origin{Region: "west", Incarnation: 3}
)

func pos(e int64) mledger.Position { return mledger.Position{Ledger: 1, Entry: e} }

// acks is a subscription's consumed set for Export: whole entries, and
// the ack sets of batches acked in part.
type acks struct {
	whole   map[mledger.Position]bool
	partial map[mledger.Position][]int64
}

func (a acks) consumed(p mledger.Position) (bool, []int64) { return a.whole[p], a.partial[p] }

// TestTranslateAcrossInterleavings: the same entries of two origins,
// interleaved one way in region A and another in region B; what A
// consumed, exported and translated in B, names exactly the same messages
// there, batch messages acked singly included.
func TestTranslateAcrossInterleavings(t *testing.T) {
	// A stores: east batch 0..3, west 0, east 4, west 1, west 2, east 5..6.
	a := NewIndex()
	for i, id := range []Identity{{east, 0, 3}, {west, 0, 0}, {east, 4, 4}, {west, 1, 1}, {west, 2, 2}, {east, 5, 6}} {
		a.Append(pos(int64(i)), id, 0)
	}
	// B stores the same, in another order, and a west message A never
	// got (west 3, kept to B by replicate_to) between west 2 and west 4.
	b := NewIndex()
	for i, id := range []Identity{{west, 0, 0}, {west, 1, 1}, {east, 0, 3}, {west, 2, 2}, {west, 3, 3}, {east, 4, 4}, {west, 4, 4}, {east, 5, 6}} {
		b.Append(pos(int64(i)), id, 0)
	}
	// A acked: east 0..3 but message 1 of the batch, west 0 and 2, east
	// 5 (message 0 of the batch 5..6); and a later west 4 it also got.
	a.Append(pos(6), Identity{west, 4, 4}, 0)
	consumed := acks{
		whole:   map[mledger.Position]bool{pos(1): true, pos(4): true, pos(6): true},
		partial: map[mledger.Position][]int64{pos(0): {0b0010}, pos(5): {0b10}},
	}
	st, cut := a.Export(mledger.Position{Ledger: 1, Entry: -1}, consumed.consumed, Epoch{}, 100)
	if cut != 0 {
		t.Fatalf("cut %d origins", cut)
	}
	wantOrigins := []OriginAcks{
		{east, Ranges{{0, 0}, {2, 3}, {5, 5}}},
		{west, Ranges{{0, 0}, {2, 2}, {4, 4}}},
	}
	if !slices.EqualFunc(st.Origins, wantOrigins, func(x, y OriginAcks) bool { return x.Origin == y.Origin && slices.Equal(x.Acked, y.Acked) }) {
		t.Fatalf("exported %+v, want %+v", st.Origins, wantOrigins)
	}
	got := b.Translate(st, mledger.Position{Ledger: 1, Entry: -1})
	want := []Apply{
		{Pos: pos(0)},                        // west 0
		{Pos: pos(2), Remaining: []int64{2}}, // east 0..3, message 1 not acked
		{Pos: pos(3)},                        // west 2
		{Pos: pos(6)},                        // west 4; west 3 (pos 4) never reached A, east 4 (pos 5) not acked
		{Pos: pos(7), Remaining: []int64{2}}, // east 5..6, message 1 (east 6) not acked
	}
	if !slices.EqualFunc(got, want, func(x, y Apply) bool { return x.Pos == y.Pos && slices.Equal(x.Remaining, y.Remaining) }) {
		t.Fatalf("translated %+v\nwant %+v", got, want)
	}
	// Only what follows B's mark-delete is asked about.
	if got := b.Translate(st, pos(3)); !slices.EqualFunc(got, want[3:], func(x, y Apply) bool { return x.Pos == y.Pos }) {
		t.Fatalf("after the mark-delete 1:3: %+v, want %+v", got, want[3:])
	}
}

// TestNewIncarnationInheritsNothing: a state of a topic's earlier
// incarnation names none of the entries of the topic created again, whose
// offsets start at 0 again.
func TestNewIncarnationInheritsNothing(t *testing.T) {
	old := State{Origins: []OriginAcks{{east, Ranges{{0, 100}}}}}
	x := NewIndex()
	x.Append(pos(0), Identity{Origin{Region: "east", Incarnation: east.Incarnation + 50}, 0, 9}, 0)
	if got := x.Translate(old, mledger.Position{Ledger: 1, Entry: -1}); len(got) != 0 {
		t.Fatalf("an old incarnation's state acked %+v", got)
	}
}

// TestPublishedBefore: what an expiry by publish time names is the
// entries after the mark-delete published before the cutoff, whatever
// their order here: two origins' entries interleave, each in its own
// order of publication.
func TestPublishedBefore(t *testing.T) {
	x := NewIndex()
	for i, published := range []int64{100, 300, 150, 400, 200} {
		origin := east
		if i%2 == 1 {
			origin = west
		}
		x.Append(pos(int64(i)), Identity{origin, int64(i), int64(i)}, published)
	}
	before := mledger.Position{Ledger: 1, Entry: -1}
	if got, want := x.PublishedBefore(250, before), []mledger.Position{pos(0), pos(2), pos(4)}; !slices.Equal(got, want) {
		t.Fatalf("published before 250: %v, want %v", got, want)
	}
	if got, want := x.PublishedBefore(250, pos(2)), []mledger.Position{pos(4)}; !slices.Equal(got, want) {
		t.Fatalf("after the mark-delete 1:2: %v, want %v", got, want)
	}
	if got := x.PublishedBefore(100, before); len(got) != 0 {
		t.Fatalf("published before 100: %v, want none", got)
	}
}

// TestElsewhereCovers: the union of other regions' states covers an
// entry only when it holds every message of it, in the entry's origin.
func TestElsewhereCovers(t *testing.T) {
	u := UnionOf([]State{
		{Origins: []OriginAcks{{east, Ranges{{0, 4}}}}},
		{Origins: []OriginAcks{{east, Ranges{{5, 6}, {9, 9}}}, {west, Ranges{{0, 0}}}}},
	})
	for _, c := range []struct {
		id   Identity
		want bool
	}{
		{Identity{east, 0, 6}, true}, // a batch over both states' ranges, merged
		{Identity{east, 6, 7}, false},
		{Identity{east, 9, 9}, true},
		{Identity{east, 8, 8}, false},
		{Identity{west, 0, 0}, true},
		{Identity{west, 1, 1}, false},
		{Identity{Origin{Region: "north", Incarnation: 1}, 0, 0}, false},
	} {
		if got := u.Covers(c.id); got != c.want {
			t.Errorf("Covers(%+v) = %v, want %v", c.id, got, c.want)
		}
	}
}

// TestExportFallsBackPastTheBound: past MaxRanges an origin keeps only its
// consumed prefix, the other origins are whole, and the cut is counted.
func TestExportFallsBackPastTheBound(t *testing.T) {
	x := NewIndex()
	whole := map[mledger.Position]bool{}
	for i := range int64(20) {
		x.Append(pos(i), Identity{east, i, i}, 0)
		// east 0..4 consumed, then every other one: 1 + 7 ranges.
		if i < 5 || i%2 == 0 {
			whole[pos(i)] = true
		}
	}
	x.Append(pos(20), Identity{west, 0, 0}, 0)
	whole[pos(20)] = true
	consumed := acks{whole: whole}.consumed
	st, cut := x.Export(mledger.Position{Ledger: 1, Entry: -1}, consumed, Epoch{}, 8)
	if cut != 0 || len(st.Origins[0].Acked) != 8 {
		t.Fatalf("at the bound: cut %d, east %v; want 8 ranges, nothing cut", cut, st.Origins[0].Acked)
	}
	st, cut = x.Export(mledger.Position{Ledger: 1, Entry: -1}, consumed, Epoch{}, 7)
	if cut != 1 || !slices.Equal(st.Origins[0].Acked, Ranges{{0, 4}}) || !slices.Equal(st.Origins[1].Acked, Ranges{{0, 0}}) {
		t.Fatalf("past the bound: cut %d, %+v; want east's prefix 0..4 alone, west whole, 1 cut", cut, st.Origins)
	}
}

// TestTrimKeepsWhatWasConsumed: entries trimmed from the index (consumed
// by every replicated subscription) still count as consumed in exports,
// and an export for a subscription whose mark-delete is before the trim is
// known not to be exact.
func TestTrimKeepsWhatWasConsumed(t *testing.T) {
	x := NewIndex()
	for i := range int64(6) {
		x.Append(pos(i), Identity{east, 10 + i, 10 + i}, 0)
	}
	x.TrimThrough(pos(2))
	if x.Len() != 3 || x.Covers(pos(1)) || !x.Covers(pos(2)) {
		t.Fatalf("after trimming through 1:2: %d entries, covers 1:1 %v, 1:2 %v", x.Len(), x.Covers(pos(1)), x.Covers(pos(2)))
	}
	st, _ := x.Export(pos(2), acks{}.consumed, Epoch{}, 10)
	if !slices.Equal(st.Origins[0].Acked, Ranges{{10, 12}}) {
		t.Fatalf("exported %v, want the trimmed 10..12 (and nothing below 10, which was never here)", st.Origins[0].Acked)
	}
}

func TestEpochOrder(t *testing.T) {
	zero := Epoch{}
	seek := zero.Next("west", Epoch{N: 4, Region: "east"})
	if seek != (Epoch{N: 5, Region: "west"}) {
		t.Fatalf("a seek after epoch 4 took %v, want 5:west", seek)
	}
	for _, tc := range []struct {
		a, b Epoch
		want int
	}{
		{Epoch{1, "a"}, Epoch{2, "a"}, -1},
		{Epoch{2, "a"}, Epoch{2, "b"}, -1}, // two seeks at once: the greater region wins
		{Epoch{2, "b"}, Epoch{2, "b"}, 0},
		{Epoch{3, "a"}, Epoch{2, "z"}, 1},
	} {
		if got := tc.a.Compare(tc.b); got != tc.want {
			t.Errorf("%v vs %v: %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for _, s := range []string{"", "5:west"} {
		e, err := ParseEpoch(s)
		if err != nil || (s != "" && e.String() != s) {
			t.Errorf("ParseEpoch(%q) = %v, %v", s, e, err)
		}
	}
	if _, err := ParseEpoch("x:west"); err == nil {
		t.Error("ParseEpoch took x:west")
	}
}

func TestStateRoundTrip(t *testing.T) {
	st := State{Epoch: Epoch{2, "east"}, TakenMillis: 1234, Origins: []OriginAcks{{east, Ranges{{0, 4}, {6, 6}}}}}
	b, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || !got.SameAcks(st) || got.TakenMillis != 1234 {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, st)
	}
	for _, bad := range []string{
		`{"v":2,"epoch":{"n":0,"region":""}}`,
		`{"v":1,"origins":[{"region":"e","incarnation":1,"acked":[[5,6],[6,7]]}]}`,
		`{"v":1,"origins":[{"region":"e","incarnation":1,"acked":[[6,5]]}]}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode took %s", bad)
		}
	}
}

// benchIndex is an index of n single-message entries of two origins,
// interleaved, and a consumed set with every third entry left unacked.
func benchIndex(n int) (*Index, Consumed) {
	x := NewIndex()
	whole := map[mledger.Position]bool{}
	for i := range int64(n) {
		o := east
		if i%2 == 1 {
			o = west
		}
		x.Append(pos(i), Identity{o, i / 2, i / 2}, 0)
		if i%3 != 0 {
			whole[pos(i)] = true
		}
	}
	return x, acks{whole: whole}.consumed
}

// BenchmarkExport is one sync's export of a subscription whose backlog
// holds 10,000 entries with a third unacked (about 3,300 ranges).
func BenchmarkExport(b *testing.B) {
	x, consumed := benchIndex(10_000)
	for b.Loop() {
		x.Export(mledger.Position{Ledger: 1, Entry: -1}, consumed, Epoch{}, 10_000)
	}
}

// BenchmarkTranslate is one sync's translation of such a state in another
// region.
func BenchmarkTranslate(b *testing.B) {
	x, consumed := benchIndex(10_000)
	st, _ := x.Export(mledger.Position{Ledger: 1, Entry: -1}, consumed, Epoch{}, 10_000)
	for b.Loop() {
		x.Translate(st, mledger.Position{Ledger: 1, Entry: -1})
	}
}

// TestBehind: a state that names offsets of an origin past its last entry
// here is ahead of replication; once they arrive, trimmed or not, it is
// not. An origin with no entry here does not hold anything back.
func TestBehind(t *testing.T) {
	x := NewIndex()
	x.Append(pos(0), Identity{east, 0, 3}, 0)
	x.Append(pos(1), Identity{west, 0, 0}, 0)
	st := State{Origins: []OriginAcks{{east, Ranges{{0, 1}, {5, 5}}}, {west, Ranges{{0, 0}}}}}
	if !x.Behind(st) {
		t.Fatal("east 5 acked elsewhere, east 3 the last here: not behind")
	}
	x.Append(pos(2), Identity{east, 4, 5}, 0)
	x.TrimThrough(pos(2))
	if x.Behind(st) {
		t.Fatal("behind once east 5 arrived and was trimmed")
	}
	south := Origin{Region: "south", Incarnation: 1}
	if x.Behind(State{Origins: []OriginAcks{{south, Ranges{{0, 9}}}}}) {
		t.Fatal("behind on an origin with no entry here")
	}
}
