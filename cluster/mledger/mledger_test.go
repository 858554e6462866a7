package mledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// settle waits until the owner goroutine has finished what it was doing
// (a rollover after the last append, say).
func settle(t testing.TB, ml *ManagedLedger) {
	t.Helper()
	if err := ml.do(t.Context(), func() bool { return false }); err != nil {
		t.Fatal(err)
	}
}

// checkIndexes checks that the entries' indexes run on without gap or
// repeat: each is the previous one plus the entry's message count.
func checkIndexes(t testing.TB, es []Entry, start int64) int64 {
	t.Helper()
	idx := start
	var lastTS int64
	for _, e := range es {
		d := decode(t, e)
		if d.index != idx+int64(d.n) {
			t.Fatalf("entry %v: index %d, want %d + %d", e.Position, d.index, idx, d.n)
		}
		if d.ts < lastTS {
			t.Fatalf("entry %v: broker timestamp %d went back from %d", e.Position, d.ts, lastTS)
		}
		idx, lastTS = d.index, d.ts
	}
	return idx
}

func TestAppendReadEntryMetadata(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("a", testConfig()), "persistent://t/ns/basic")
	var msgs [][]byte
	idx := int64(-1)
	var prev Position
	for i := range 50 {
		n := 1 + i%5
		msg := testMessage(t, 'A', uint64(i), n, i)
		e.clock.Advance(time.Millisecond)
		p, err := ml.Append(t.Context(), msg, n)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !prev.Less(p) {
			t.Fatalf("append %d at %v, not after %v", i, p, prev)
		}
		prev = p
		msgs = append(msgs, msg)
		idx += int64(n)
	}
	if got, _ := ml.LastIndex(t.Context()); got != idx {
		t.Fatalf("LastIndex %d, want %d", got, idx)
	}
	es := readAll(t, ml)
	if len(es) != len(msgs) {
		t.Fatalf("read %d entries, want %d", len(es), len(msgs))
	}
	for i, en := range es {
		bem, msg, err := SplitEntry(en.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(msg, msgs[i]) {
			t.Fatalf("entry %d: message bytes differ", i)
		}
		// Zero copy: both halves alias the stored bytes.
		if &bem[0] != &en.Data[entryHeaderSize] || &msg[0] != &en.Data[entryHeaderSize+len(bem)] {
			t.Fatalf("entry %d: SplitEntry copied", i)
		}
	}
	if got := checkIndexes(t, es, -1); got != idx {
		t.Fatalf("last index %d, want %d", got, idx)
	}
	if _, err := ml.Append(t.Context(), msgs[0], 0); !errors.Is(err, ErrNoMessages) {
		t.Fatalf("append of 0 messages: %v", err)
	}
}

func TestEncodeEntryMatchesProto(t *testing.T) {
	for _, tc := range [][2]int64{{0, 0}, {1, 0}, {1764000000000, 41}, {1 << 62, 1<<63 - 1}} {
		want, err := proto.Marshal(pb.BrokerEntryMetadata_builder{
			BrokerTimestamp: proto.Uint64(uint64(tc[0])),
			Index:           proto.Uint64(uint64(tc[1])),
		}.Build())
		if err != nil {
			t.Fatal(err)
		}
		bem, msg, err := SplitEntry(encodeEntry(tc[0], tc[1], []byte{0x0e, 0x01}))
		if err != nil || !bytes.Equal(bem, want) || !bytes.Equal(msg, []byte{0x0e, 0x01}) {
			t.Fatalf("%v: metadata %x, want %x (%v)", tc, bem, want, err)
		}
	}
}

func TestSplitEntryRejectsBadFraming(t *testing.T) {
	good := encodeEntry(5, 7, []byte{0x0e, 0x01, 1, 2, 3})
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short", good[:4]},
		{"bad magic", append([]byte{0x0e, 0x01}, good[2:]...)},
		{"size past end", good[:entryHeaderSize+1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := SplitEntry(tc.data); !errors.Is(err, ErrBadEntry) {
				t.Fatalf("got %v, want ErrBadEntry", err)
			}
		})
	}
	if idx, err := EntryIndex(good); err != nil || idx != 7 {
		t.Fatalf("EntryIndex = %d, %v", idx, err)
	}
	if ts, err := EntryTimestamp(good); err != nil || ts != 5 {
		t.Fatalf("EntryTimestamp = %d, %v", ts, err)
	}
}

// TestAppendThenRunsBeforeTheWake: an append's then callback runs with
// the entry's position before the readers waiting at the tail are woken
// and before its future is done; the broker queues a producer's receipt
// there, ahead of any dispatch of the entry.
func TestAppendThenRunsBeforeTheWake(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("a", testConfig()), "then")
	for i := range 50 {
		changed := ml.Changed()
		ran := make(chan Position, 1)
		f, err := ml.AppendAsync(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1, func(p Position, err error) {
			select {
			case <-changed:
				t.Errorf("append %d: readers woken before then ran", i)
			default:
			}
			if err != nil {
				t.Errorf("append %d: then got %v", i, err)
			}
			ran <- p
		})
		if err != nil {
			t.Fatal(err)
		}
		<-changed
		select {
		case p := <-ran:
			if got, err := f.Wait(t.Context()); err != nil || got != p {
				t.Fatalf("append %d: future %v, %v; then had %v", i, got, err, p)
			}
		default:
			t.Fatalf("append %d: readers woken, then not run", i)
		}
	}
}

// TestRolloverSeamless pipelines appends across many rollovers and reads
// them back across every ledger boundary, in order, with a continuous
// index.
func TestRolloverSeamless(t *testing.T) { testRolloverSeamless(t, newEnv) }

func testRolloverSeamless(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 7
	ml := e.open(e.factory("a", cfg), "roll")
	cur, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	const total = 500
	futs := make([]*AppendFuture, 0, total)
	for i := range total {
		f, err := ml.AppendAsync(t.Context(), testMessage(t, 'A', uint64(i), 1+i%3, 0), 1+i%3, nil)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	var prev Position
	for i, f := range futs {
		p, err := f.Wait(t.Context())
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if i > 0 && !prev.Less(p) {
			t.Fatalf("append %d confirmed at %v, not after %v", i, p, prev)
		}
		prev = p
	}
	settle(t, ml)
	if n := len(ml.Ledgers()); n < 10 {
		t.Fatalf("%d ledgers, want 10 or more", n)
	}
	var got []Entry
	for len(got) < total {
		es, err := cur.ReadOrWait(t.Context(), 64)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, es...)
	}
	for i, en := range got {
		if d := decode(t, en); d.seq != uint64(i) {
			t.Fatalf("entry %d at %v holds seq %d", i, en.Position, d.seq)
		}
	}
	checkIndexes(t, got, -1)
	// Reading from a fixed position also crosses boundaries.
	es, err := ml.ReadAt(t.Context(), got[5].Position, 30)
	if err != nil || len(es) != 30 || es[29].Position != got[34].Position {
		t.Fatalf("ReadAt across ledgers: %d entries, %v", len(es), err)
	}
	if b := cur.Backlog(); b != total {
		t.Fatalf("backlog %d, want %d", b, total)
	}
	if err := cur.AckCumulative(got[total-1].Position); err != nil {
		t.Fatal(err)
	}
	if b := cur.Backlog(); b != 0 {
		t.Fatalf("backlog %d after acking everything", b)
	}
}

func TestRolloverBySizeAndAge(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxSizePerLedger = 4 << 10
	cfg.MaxLedgerRolloverTime = time.Hour
	cfg.MinLedgerRolloverTime = 10 * time.Minute
	ml := e.open(e.factory("a", cfg), "size-age")
	// Over the size limit but younger than the minimum age: no rollover.
	for i := range 10 {
		if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, ml)
	if n := len(ml.Ledgers()); n != 1 {
		t.Fatalf("%d ledgers before the minimum age, want 1", n)
	}
	e.clock.Advance(11 * time.Minute)
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 10, 1, 1000), 1); err != nil {
		t.Fatal(err)
	}
	settle(t, ml)
	if n := len(ml.Ledgers()); n != 2 {
		t.Fatalf("%d ledgers after the size limit and minimum age, want 2", n)
	}
	// Age: a ledger with entries rolls over on housekeeping alone once it
	// is older than the maximum.
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 11, 1, 10), 1); err != nil {
		t.Fatal(err)
	}
	housekeep := func() {
		if err := ml.onOwner(t.Context(), ml.housekeeping); err != nil {
			t.Fatal(err)
		}
	}
	housekeep()
	if n := len(ml.Ledgers()); n != 2 {
		t.Fatalf("%d ledgers before the maximum age, want 2", n)
	}
	e.clock.Advance(61 * time.Minute)
	housekeep()
	if n := len(ml.Ledgers()); n != 3 {
		t.Fatalf("%d ledgers after the maximum age, want 3", n)
	}
	// An empty ledger never rolls over on age.
	e.clock.Advance(2 * time.Hour)
	housekeep()
	if n := len(ml.Ledgers()); n != 3 {
		t.Fatalf("%d ledgers: an empty ledger rolled over", n)
	}
	if got := len(readAll(t, ml)); got != 12 {
		t.Fatalf("read %d entries, want 12", got)
	}
}

// TestRetention: only ledgers wholly behind every durable cursor, a
// cursor owned by another process included, are deleted, and a lagging
// cursor pins its ledgers until it moves.
func TestRetention(t *testing.T) { testRetention(t, newEnv) }

func testRetention(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 10
	cfg.RetentionTime, cfg.RetentionSize = 0, 0
	f := e.factory("a", cfg)
	ml := e.open(f, "ret")
	sub, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	repl, err := OpenExternalCursor(t.Context(), e.store, region, "ret", "meridian.repl.eu-west", Position{ml.Ledgers()[0], -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ml.OpenCursor(t.Context(), "meridian.repl.eu-west", Earliest); !errors.Is(err, ErrCursorOwnedElsewhere) {
		t.Fatalf("opening a foreign cursor as owned: %v", err)
	}
	var ps []Position
	for i := range 125 {
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	settle(t, ml)
	ledgers := ml.Ledgers()
	if len(ledgers) < 12 {
		t.Fatalf("%d ledgers, want 12 or more", len(ledgers))
	}
	// sub consumes 55 entries: ledgers 0..4 are behind it, but repl is at
	// the start and pins everything.
	if err := sub.AckCumulative(ps[54]); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the watch to see the foreign cursor", func() bool { _, ok := ml.ForeignCursors()["meridian.repl.eu-west"]; return ok })
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, ledgers) {
		t.Fatalf("a lagging foreign cursor did not pin its ledgers: %v -> %v", ledgers, got)
	}
	// The replicator moves to the middle of ledger 2: ledgers 0 and 1 go.
	if err := repl.MarkDelete(t.Context(), ps[24]); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the watch to see the move", func() bool { return ml.ForeignCursors()["meridian.repl.eu-west"] == ps[24] })
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, ledgers[2:]) {
		t.Fatalf("after the foreign cursor moved: %v, want %v", got, ledgers[2:])
	}
	for _, id := range ledgers[:2] {
		if _, err := f.client.Metadata(t.Context(), id); !errors.Is(err, ledger.ErrLedgerNotFound) {
			t.Fatalf("deleted ledger %d: metadata %v", id, err)
		}
	}
	// Now the owned cursor lags (at 54, in ledger 5): the replicator
	// moving to the end frees ledgers 2..4 only.
	if err := repl.MarkDelete(t.Context(), ps[124]); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the watch to see the move", func() bool { return ml.ForeignCursors()["meridian.repl.eu-west"] == ps[124] })
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, ledgers[5:]) {
		t.Fatalf("with the owned cursor lagging: %v, want %v", got, ledgers[5:])
	}
	// Reading still starts at the right place, and the backlog is right.
	if b := sub.Backlog(); b != 125-55 {
		t.Fatalf("backlog %d, want %d", b, 125-55)
	}
	es, err := sub.Read(t.Context(), 1)
	if err != nil || len(es) != 1 || es[0].Position != ps[55] {
		t.Fatalf("read after trim: %v %v", es, err)
	}
	// The last ledger is never deleted, even when fully consumed.
	if err := sub.AckCumulative(ps[124]); err != nil {
		t.Fatal(err)
	}
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); len(got) != 1 || got[0] != ledgers[len(ledgers)-1] {
		t.Fatalf("after everything is consumed: %v", got)
	}
}

// TestRetentionClosedCursorPins: a durable cursor that is not open (a
// subscription without a consumer, or one not opened since a restart)
// still pins its ledgers, and so does one closing; deleting it releases
// them.
func TestRetentionClosedCursorPins(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 5
	cfg.RetentionTime, cfg.RetentionSize = 0, 0
	f := e.factory("a", cfg)
	ml := e.open(f, "dormant")
	idle, err := ml.OpenCursor(t.Context(), "idle", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	// Close's first step alone (stop drops the live position): the trims
	// on the owner goroutine (after each rollover here) may run between it
	// and the end of Close.
	first := ml.Ledgers()[0]
	idle.stop(true)
	for i := range 30 {
		if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, ml)
	before := ml.Ledgers()
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); got[0] != first || !slices.Equal(got, before) {
		t.Fatalf("a closing cursor did not pin ledger %d: %v, then %v after a trim", first, before, got)
	}
	if err := idle.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, before) {
		t.Fatalf("a closed cursor did not pin: %v -> %v", before, got)
	}
	// The same after a restart, with the cursor never opened.
	if err := ml.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ml = e.open(f, "dormant")
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got[:len(before)], before) {
		t.Fatalf("a cursor not opened since the restart did not pin: %v -> %v", before, got)
	}
	if err := ml.DeleteCursor(t.Context(), "idle"); err != nil {
		t.Fatal(err)
	}
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); len(got) != 1 {
		t.Fatalf("after deleting the only cursor: %v, want only the last ledger", got)
	}
}

// consumedLedgers opens topic on a factory of cfg (five entries a
// ledger), runs opened on it, appends 20 entries and has one cursor
// consume them all: four ledgers, three of them consumed and closed.
func consumedLedgers(t *testing.T, e *env, cfg Config, topic string, opened func(*ManagedLedger)) *ManagedLedger {
	t.Helper()
	cfg.MaxEntriesPerLedger = 5
	ml := e.open(e.factory("a", cfg), topic)
	if opened != nil {
		opened(ml)
	}
	sub, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var last Position
	for i := range 20 {
		if last, err = ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.AckCumulative(last); err != nil {
		t.Fatal(err)
	}
	settle(t, ml)
	return ml
}

func TestRetentionPolicyKeepsConsumedLedgers(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.RetentionTime = time.Hour
	cfg.RetentionSize = -1
	ml := consumedLedgers(t, e, cfg, "policy", nil)
	before := ml.Ledgers()
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, before) {
		t.Fatalf("consumed ledgers deleted within the retention time: %v -> %v", before, got)
	}
	e.clock.Advance(61 * time.Minute)
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); len(got) != 1 {
		t.Fatalf("after the retention time: %v, want only the last ledger", got)
	}
}

// TestSetRetention: a topic's own policy replaces the factory's: kept
// forever, consumed ledgers stay; set to keep nothing, they go.
func TestSetRetention(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.RetentionTime, cfg.RetentionSize = 0, 0
	ml := consumedLedgers(t, e, cfg, "set-retention", func(ml *ManagedLedger) { ml.SetRetention(-1, -1) })
	before := ml.Ledgers()
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, before) {
		t.Fatalf("consumed ledgers deleted though kept forever: %v -> %v", before, got)
	}
	ml.SetRetention(0, 0)
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); len(got) != 1 {
		t.Fatalf("keeping nothing: %v, want only the last ledger", got)
	}
}

// TestBadInput: bad positions, seeks past the end and acks of unknown
// positions fail clearly and change nothing.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	ml := e.open(e.factory("a", testConfig()), "bad")
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var ps []Position
	for i := range 10 {
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := c.Ack(ps[3]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    Position
		want bool
	}{{ps[3], true}, {ps[4], false}, {Position{ps[3].Ledger + 1000, 0}, false}, {Position{-1, 0}, false}} {
		if got := c.Consumed(tc.p); got != tc.want {
			t.Errorf("Consumed(%v) = %v, want %v (IsAcked %v)", tc.p, got, tc.want, c.IsAcked(tc.p))
		}
	}
	if _, err := c.Read(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	type snap struct {
		md, rp  Position
		backlog int64
		ranges  int
	}
	take := func() snap { return snap{c.MarkDeletePosition(), c.ReadPosition(), c.Backlog(), c.AckedRanges()} }
	before := take()
	last := ps[9]
	for _, tc := range []struct {
		name string
		op   func() error
		want error
	}{
		{"ack unknown ledger", func() error { return c.Ack(Position{last.Ledger + 1000, 0}) }, ErrInvalidPosition},
		{"ack past the end", func() error { return c.Ack(Position{last.Ledger, last.Entry + 1}) }, ErrInvalidPosition},
		{"ack negative entry", func() error { return c.Ack(Position{last.Ledger, -1}) }, ErrInvalidPosition},
		{"ack batch with one bad", func() error { return c.Ack(ps[5], Position{last.Ledger, 99}) }, ErrInvalidPosition},
		{"cumulative ack past the end", func() error { return c.AckCumulative(Position{last.Ledger, 50}) }, ErrInvalidPosition},
		{"seek past the end", func() error { return c.Seek(Position{last.Ledger, last.Entry + 2}) }, ErrSeekPastEnd},
		{"reset past the end", func() error { return c.Reset(Position{last.Ledger + 5, 0}) }, ErrSeekPastEnd},
		{"seek to an unknown ledger", func() error { return c.Seek(Position{0, 0}) }, ErrInvalidPosition},
		{"read at a bad position", func() error { _, err := ml.ReadAt(t.Context(), Position{last.Ledger, 77}, 1); return err }, ErrInvalidPosition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err.Error() == tc.want.Error() {
				t.Fatalf("error %q names no position", err)
			}
			if after := take(); after != before {
				t.Fatalf("state changed: %+v -> %+v", before, after)
			}
		})
	}
}

func TestTerminate(t *testing.T) { testTerminate(t, newEnv) }

func testTerminate(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 4
	f := e.factory("a", cfg)
	ml := e.open(f, "term")
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1); err != nil {
			t.Fatal(err)
		}
	}
	last, err := ml.Terminate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if last != ml.LastConfirmed() {
		t.Fatalf("Terminate returned %v, last confirmed %v", last, ml.LastConfirmed())
	}
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 10, 1, 0), 1); !errors.Is(err, ErrTerminated) {
		t.Fatalf("append after terminate: %v", err)
	}
	n := 0
	for {
		es, err := c.ReadOrWait(t.Context(), 3)
		if errors.Is(err, ErrEndOfTopic) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(es)
	}
	if n != 10 {
		t.Fatalf("read %d entries before the end of the topic, want 10", n)
	}
	if err := ml.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ml2 := e.open(f, "term")
	if !ml2.Terminated() {
		t.Fatal("terminated flag lost on reopen")
	}
	if _, err := ml2.Append(t.Context(), testMessage(t, 'A', 10, 1, 0), 1); !errors.Is(err, ErrTerminated) {
		t.Fatalf("append after reopening a terminated topic: %v", err)
	}
	if got := len(readAll(t, ml2)); got != 10 {
		t.Fatalf("read %d after reopen, want 10", got)
	}
}

func TestTailingReadAndCache(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.CacheMaxBytes = 64 << 10
	cfg.MaxEntriesPerLedger = 50
	ml := e.open(e.factory("a", cfg), "tail")
	reader, err := ml.OpenNonDurableCursor("reader", Latest)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ml.OpenCursor(t.Context(), "sub", Latest)
	if err != nil {
		t.Fatal(err)
	}
	const total = 300
	errc := appendInBackground(context.Background(), t, ml, total, 200)
	for _, c := range []*Cursor{reader, sub} {
		var seq uint64
		for seq < total {
			es, err := c.ReadOrWait(t.Context(), 16)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range es {
				if d := decode(t, en); d.seq != seq {
					t.Fatalf("%s: got seq %d, want %d", c.Name(), d.seq, seq)
				}
				seq++
			}
			ml.mu.Lock()
			b := ml.cache.bytes
			ml.mu.Unlock()
			if b > cfg.CacheMaxBytes {
				t.Fatalf("cache holds %d bytes, over its %d", b, cfg.CacheMaxBytes)
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if st := ml.Stats(); st.CacheHits == 0 || st.Entries != total || st.Cursors != 2 || st.StorageSize <= 0 {
		t.Fatalf("stats %+v", st)
	}
	// Both cursors have read everything: nothing stays cached.
	ml.mu.Lock()
	left := len(ml.cache.entries)
	ml.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d entries cached behind every cursor", left)
	}
	// Non-durable cursors are not persisted.
	if _, err := e.store.Get(t.Context(), CursorKey(region, "tail", "reader")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("non-durable cursor in the store: %v", err)
	}
}

func TestFindByTime(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 6
	ml := e.open(e.factory("a", cfg), "time")
	var ps []Position
	var ts []int64
	for i := range 40 {
		e.clock.Advance(time.Second)
		ts = append(ts, e.clock.Now().UnixMilli())
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, i := range []int{0, 1, 5, 6, 17, 39} {
		p, ok, err := ml.FindByTime(t.Context(), ts[i])
		if err != nil || !ok || p != ps[i] {
			t.Fatalf("FindByTime(ts[%d]) = %v %v %v, want %v", i, p, ok, err, ps[i])
		}
		if p, ok, _ := ml.FindByTime(t.Context(), ts[i]-500); !ok || p != ps[i] {
			t.Fatalf("FindByTime(just before ts[%d]) = %v, want %v", i, p, ps[i])
		}
	}
	if _, ok, err := ml.FindByTime(t.Context(), ts[39]+1); ok || err != nil {
		t.Fatalf("FindByTime after the last entry: ok=%v err=%v", ok, err)
	}
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.ResetToTime(t.Context(), ts[20]); err != nil || p != ps[20] {
		t.Fatalf("ResetToTime = %v, %v", p, err)
	}
	if b := c.Backlog(); b != 20 {
		t.Fatalf("backlog after reset %d, want 20", b)
	}
	es, err := c.Read(t.Context(), 1)
	if err != nil || len(es) != 1 || es[0].Position != ps[20] {
		t.Fatalf("read after reset: %v %v", es, err)
	}
}

// TestCursorPersistence: a durable cursor writes its state at most once
// per CursorPersistInterval, exactly when the interval since its last write
// is over, with every change made before then; at most
// MaxPersistedAckRanges ranges are written, and what was not written is
// delivered again after a reopen. The clock is fake, so the bounds are
// exact.
func TestCursorPersistence(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	cs := &countingStore{Store: mem}
	e := newEnvOn(t, cs, 3)
	cfg := testConfig()
	cfg.CursorPersistInterval = time.Second
	cfg.MaxPersistedAckRanges = 3
	f := e.factory("a", cfg)
	ml := e.open(f, "persist")
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	created := e.clock.Now() // creating the record was the cursor's first write
	var ps []Position
	for i := range 40 {
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	key := CursorKey(region, "persist", "sub")
	stored := func() cursorValue {
		t.Helper()
		kv, err := e.store.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeCursor(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// From here on only the cursor writes to the store: the appends are
	// confirmed and no ledger is near its rollover.
	w0 := cs.writes.Load()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// waitTimer waits until the cursor's persistence timer is set: the
	// managed ledger's housekeeping ticker and that timer are the clock's
	// only waiters.
	waitTimer := func() {
		t.Helper()
		if err := e.clock.BlockUntilContext(ctx, 2); err != nil {
			t.Fatalf("the persistence timer was never set: %v", err)
		}
	}
	// A burst of acks while the clock stands still.
	for i := 0; i < 20; i += 2 {
		if err := c.Ack(ps[i+1]); err != nil { // leave every even entry a hole
			t.Fatal(err)
		}
	}
	if err := c.Ack(ps[0]); err != nil { // mark-delete moves to ps[1]
		t.Fatal(err)
	}
	waitTimer()
	e.clock.Advance(created.Add(cfg.CursorPersistInterval).Sub(e.clock.Now()) - time.Nanosecond)
	if w := cs.writes.Load() - w0; w != 0 {
		t.Fatalf("%d writes within the interval after the cursor was created", w)
	}
	e.clock.Advance(time.Nanosecond)
	testkit.WaitFor(t, "the write at the end of the interval", func() bool { return cs.writes.Load()-w0 == 1 })
	// The one write holds all eleven acks.
	first := stored()
	if first.MarkDelete != ps[1] {
		t.Fatalf("written at mark-delete %v, want %v", first.MarkDelete, ps[1])
	}
	// The cap: 9 holes after ps[1] leave 9 ranges; 3 are written, the
	// lowest, and the value says it was truncated.
	if len(first.Acked) != 3 || !first.Truncated || first.Acked[0] != [3]int64{ps[3].Ledger, ps[3].Entry, ps[3].Entry} {
		t.Fatalf("stored ranges %v truncated=%v", first.Acked, first.Truncated)
	}
	firstWrite := e.clock.Now()
	// The next change is written exactly one interval after that write.
	if err := c.SetProperty("k", "v"); err != nil {
		t.Fatal(err)
	}
	waitTimer()
	e.clock.Advance(cfg.CursorPersistInterval - time.Nanosecond)
	if w := cs.writes.Load() - w0; w != 1 {
		t.Fatalf("%d writes, want still 1, %v after the first", w, e.clock.Since(firstWrite))
	}
	e.clock.Advance(time.Nanosecond)
	testkit.WaitFor(t, "the second write", func() bool { return cs.writes.Load()-w0 == 2 })
	if second := stored(); second.Properties["k"] != "v" {
		t.Fatalf("second write holds properties %v", second.Properties)
	}
	// A mark-delete rate of 4 a second paces a cursor's writes at 250ms.
	// The clock first moves past any write "sub" has scheduled (one
	// scheduled at the old pace keeps its time), and "paced" starts
	// after the change: its creation is its first write.
	e.clock.Advance(cfg.CursorPersistInterval)
	ml.SetMarkDeleteRate(4)
	paced, err := ml.OpenCursor(t.Context(), "paced", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	pacedCreated := e.clock.Now()
	testkit.WaitFor(t, "the paced cursor's creation", func() bool { return cs.writes.Load()-w0 == 3 })
	if err := paced.Ack(ps[0]); err != nil {
		t.Fatal(err)
	}
	waitTimer()
	e.clock.Advance(250*time.Millisecond - time.Nanosecond)
	if w := cs.writes.Load() - w0; w != 3 {
		t.Fatalf("%d writes, want still 3, %v after the paced cursor was created", w, e.clock.Since(pacedCreated))
	}
	e.clock.Advance(time.Nanosecond)
	testkit.WaitFor(t, "the paced cursor's write at the mark-delete rate", func() bool { return cs.writes.Load()-w0 == 4 })
	if err := ml.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// After reopening, the ranges past the cap are delivered again; the
	// ones written are not.
	ml2 := e.open(f, "persist")
	c2, err := ml2.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	if c2.MarkDeletePosition() != ps[1] || c2.Properties()["k"] != "v" {
		t.Fatalf("restored at %v with %v", c2.MarkDeletePosition(), c2.Properties())
	}
	es, err := c2.Read(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []Position
	for _, en := range es {
		got = append(got, en.Position)
	}
	want := []Position{ps[2], ps[4], ps[6], ps[8], ps[9], ps[10], ps[11], ps[12], ps[13], ps[14], ps[15], ps[16], ps[17], ps[18], ps[19]}
	want = append(want, ps[20:]...)
	if !slices.Equal(got, want) {
		t.Fatalf("redelivered %v\nwant %v", got, want)
	}
}

// TestCursorOwnershipLost: a cursor written by someone else makes the
// owner stop; it does not write over the winner.
func TestCursorOwnershipLost(t *testing.T) { testCursorOwnershipLost(t, newEnv) }

func testCursorOwnershipLost(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	ml := e.open(e.factory("a", testConfig()), "cursor-lost")
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ml.Append(t.Context(), testMessage(t, 'A', 0, 1, 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	key := CursorKey(region, "cursor-lost", "sub")
	kv, err := e.store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := encodeCursor(cursorValue{MarkDelete: Position{p.Ledger, -1}, Properties: map[string]string{"owner": "other"}})
	if _, err := e.store.Update(t.Context(), key, theirs, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(p); err != nil {
		t.Fatal(err)
	}
	// The write comes due once the persistence timer, the clock's second
	// waiter after the housekeeping ticker, is set.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatalf("the persistence timer was never set: %v", err)
	}
	e.clock.Advance(testConfig().CursorPersistInterval)
	select {
	case <-ml.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("ownership loss not reported")
	}
	if !errors.Is(ml.Err(), ErrOwnershipLost) {
		t.Fatalf("Err = %v", ml.Err())
	}
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 1, 1, 0), 1); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("append after losing ownership: %v", err)
	}
	kv, err = e.store.Get(t.Context(), key)
	if err != nil || !bytes.Equal(kv.Value, theirs) {
		t.Fatalf("the winner's cursor was overwritten: %s %v", kv.Value, err)
	}
}

// TestSplitBrain: a second instance opens the topic while the first keeps
// appending. The first's appends fail from then on, and none of its entries
// appears after the second's first entry.
func TestSplitBrain(t *testing.T) { testSplitBrain(t, newEnv) }

func testSplitBrain(t *testing.T, newEnv func(testing.TB) *env) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := newEnv(t)
			cfg := testConfig()
			cfg.MaxEntriesPerLedger = 20
			fa, fb := e.factory("a", cfg), e.factory("b", cfg)
			a := e.open(fa, "split")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			aDone := make(chan error, 1)
			aAppended := make(chan struct{})
			go func() {
				var futs []*AppendFuture
				var err error
				for i := 0; ; i++ {
					if i == 30 {
						close(aAppended)
					}
					var f *AppendFuture
					if f, err = a.AppendAsync(ctx, testMessage(t, 'A', uint64(i), 1, 0), 1, nil); err != nil {
						break
					}
					futs = append(futs, f)
					if len(futs) > 64 {
						if _, err = futs[0].Wait(ctx); err != nil {
							break
						}
						futs = futs[1:]
					}
				}
				aDone <- err
			}()
			<-aAppended
			// B takes over. If A rolls over between B's read of the list and
			// B's CAS, B's open loses (ErrFenced) and A rightly keeps the
			// topic; B then tries again, as a broker that still holds the
			// bundle would, and each try fences A's newest ledger.
			var b *ManagedLedger
			for try := 0; b == nil; try++ {
				var err error
				b, err = fb.Open(t.Context(), "split")
				if errors.Is(err, ErrFenced) && try < 20 {
					continue
				}
				if err != nil {
					t.Fatalf("B's open: %v", err)
				}
			}
			r := rand.New(rand.NewPCG(seed, 9))
			for i := range 20 + r.IntN(20) {
				if _, err := b.Append(t.Context(), testMessage(t, 'B', uint64(i), 1, 0), 1); err != nil {
					t.Fatal(err)
				}
			}
			err := <-aDone
			if !errors.Is(err, ErrFenced) {
				t.Fatalf("the loser's append failed with %v, want ErrFenced", err)
			}
			select {
			case <-a.Lost():
			default:
				t.Fatal("the loser did not report the loss")
			}
			if _, err := a.Append(t.Context(), testMessage(t, 'A', 999, 1, 0), 1); !errors.Is(err, ErrFenced) {
				t.Fatalf("the loser's next append: %v", err)
			}
			es := readAll(t, b)
			seenB := false
			for _, en := range es {
				d := decode(t, en)
				if d.writer == 'B' {
					seenB = true
				} else if seenB {
					t.Fatalf("entry %v of the loser after the winner's first", en.Position)
				}
			}
			checkIndexes(t, es, -1)
			if !seenB {
				t.Fatal("no entry of the winner")
			}
		})
	}
}

// TestCrashRecovery drops the owner without Close in the middle of an
// append-and-ack stream, then reopens as another process.
func TestCrashRecovery(t *testing.T) { testCrashRecovery(t, newEnv, 1, 2, 3, 4) }

func testCrashRecovery(t *testing.T, newEnv func(testing.TB) *env, seeds ...uint64) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			crashRecovery(t, newEnv(t), seed)
		})
	}
}

func crashRecovery(t *testing.T, e *env, seed uint64) {
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 25
	cfg.CursorPersistInterval = 20 * time.Millisecond
	r := rand.New(rand.NewPCG(seed, 3))
	a := e.open(e.factory("a", cfg), "crash")
	names := []string{"s1", "s2", "s3"}
	cursors := map[string]*Cursor{}
	for _, n := range names {
		c, err := a.OpenCursor(t.Context(), n, Earliest)
		if err != nil {
			t.Fatal(err)
		}
		cursors[n] = c
	}
	ctx, cancel := context.WithCancel(t.Context())
	confirmed := make(chan Position, 10000)
	appDone := make(chan struct{})
	go func() {
		defer close(appDone)
		defer close(confirmed)
		var futs []*AppendFuture
		for i := 0; ctx.Err() == nil; i++ {
			f, err := a.AppendAsync(ctx, testMessage(t, 'A', uint64(i), 1+i%4, 0), 1+i%4, nil)
			if err != nil {
				break
			}
			futs = append(futs, f)
			for len(futs) > 0 {
				select {
				case <-futs[0].Done():
				default:
					if len(futs) < 32 {
						goto next
					}
					<-futs[0].Done()
				}
				if p, err := futs[0].Result(); err == nil {
					confirmed <- p
				}
				futs = futs[1:]
			}
		next:
		}
		for _, f := range futs {
			if p, err := f.Result(); err == nil {
				confirmed <- p
			}
		}
	}()
	// Consume: each cursor reads, acks some entries individually and
	// sometimes cumulatively, until 300 entries have been confirmed.
	var got []Position
	for len(got) < 300 {
		got = append(got, <-confirmed)
		for _, n := range names {
			c := cursors[n]
			es, err := c.Read(t.Context(), 8)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range es {
				if r.IntN(3) > 0 {
					if err := c.Ack(en.Position); err != nil {
						t.Fatal(err)
					}
				}
			}
			if r.IntN(10) == 0 && len(es) > 0 {
				if err := c.AckCumulative(es[0].Position); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The cursors' writes come due as the run goes on.
		e.clock.Advance(cfg.CursorPersistInterval)
	}
	// Crash: appends are still in flight and cursor writes pending.
	atCrash := map[string]Position{}
	for _, n := range names {
		atCrash[n] = cursors[n].MarkDeletePosition()
	}
	a.crash()
	cancel()
	<-appDone
	for p := range confirmed {
		got = append(got, p)
	}
	persisted := map[string]Position{}
	for _, n := range names {
		kv, err := e.store.Get(t.Context(), CursorKey(region, "crash", n))
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeCursor(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		persisted[n] = v.MarkDelete
	}

	// On etcd, a write the crashed instance had in flight (a rollover's
	// CAS, cancelled by the crash) may still be applied after crash
	// returns; a new owner that meets it while opening is told ErrFenced,
	// as a broker taking over would be, and opens again.
	fb := e.factory("b", cfg)
	b, err := fb.Open(t.Context(), "crash")
	for i := 0; errors.Is(err, ErrFenced) && i < 3; i++ {
		t.Logf("open crash: %v; opening again", err)
		b, err = fb.Open(t.Context(), "crash")
	}
	if err != nil {
		t.Fatalf("open crash: %v", err)
	}
	es := readAll(t, b)
	have := map[Position]bool{}
	for _, en := range es {
		have[en.Position] = true
	}
	for _, p := range got {
		if !have[p] {
			t.Fatalf("confirmed entry %v lost in the crash", p)
		}
	}
	lastIdx := checkIndexes(t, es, -1)
	p, err := b.Append(t.Context(), testMessage(t, 'B', 0, 3, 0), 3)
	if err != nil {
		t.Fatal(err)
	}
	after, err := b.ReadAt(t.Context(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := decode(t, after[0]); d.index != lastIdx+3 {
		t.Fatalf("index after reopen %d, want %d", d.index, lastIdx+3)
	}
	for _, n := range names {
		c, err := b.OpenCursor(t.Context(), n, Earliest)
		if err != nil {
			t.Fatal(err)
		}
		md := c.MarkDeletePosition()
		if md.Less(persisted[n]) || atCrash[n].Less(md) {
			t.Fatalf("cursor %s restored at %v: persisted %v, at crash %v", n, md, persisted[n], atCrash[n])
		}
	}
	t.Logf("seed %d: %d confirmed, %d stored, %d ledgers", seed, len(got), len(es), len(b.Ledgers()))
}

func TestDeleteTopic(t *testing.T) { testDeleteTopic(t, newEnv) }

func testDeleteTopic(t *testing.T, newEnv func(testing.TB) *env) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 3
	f := e.factory("a", cfg)
	ml := e.open(f, "gone")
	if _, err := ml.OpenCursor(t.Context(), "sub", Earliest); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExternalCursor(t.Context(), e.store, region, "gone", "meridian.repl.x", Position{}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, ml)
	ledgers := ml.Ledgers()
	if err := ml.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ledgers {
		if _, err := f.client.Metadata(t.Context(), id); !errors.Is(err, ledger.ErrLedgerNotFound) {
			t.Fatalf("ledger %d left: %v", id, err)
		}
	}
	kvs, _, err := e.store.List(t.Context(), cursorPrefix(region, "gone"))
	if err != nil || len(kvs) != 0 {
		t.Fatalf("cursors left: %d %v", len(kvs), err)
	}
	if _, err := e.store.Get(t.Context(), ListKey(region, "gone")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("record left: %v", err)
	}
}
