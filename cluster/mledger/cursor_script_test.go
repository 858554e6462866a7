package mledger

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// TestCursorScripts drives one durable cursor of a real managed ledger
// (bookies and metadata store in memory, the factory's clock fake) through
// the scripts in testdata/cursor. The commands:
//
//	init [entries-per-ledger=N] [max-ranges=N] [start=earliest|latest] [trim-consumed]
//	                            trim-consumed: retention keeps nothing
//	                            consumed (Pulsar's default), instead of all
//	append <n>                  n entries; prints their positions
//	ack <pos>...                one Ack of every position given
//	ack-cumulative <pos>
//	read <n>                    prints what Read delivers
//	skip <n>                    prints how many Skip consumed
//	rewind
//	seek <pos> | reset <pos> | reset-after <pos>
//	is-acked <pos>...           IsAcked and Consumed of each position
//	trim                        retention runs; prints the ledgers left.
//	                            With trim-consumed a rollover also trims,
//	                            in the background: a script that appends
//	                            after acks trims before it looks.
//	persist                     the persistence interval passes: prints
//	                            what the cursor wrote, or that it had
//	                            nothing to write
//	reload                      the topic is closed (its cursor writes its
//	                            last state) and opened again
//	crash                       the process dies (nothing more is written);
//	                            another opens the topic and the cursor
//	state
//
// Every command that can change the cursor prints its state afterwards:
// mark-delete=<the last position of the consumed prefix>
// read=<the position reading resumes after> acked=[the individually acked
// ranges] backlog=<unconsumed entries>, and an error first if it refused.
//
// A position is <ledger>:<entry>, where ledger n is the n-th ledger the
// topic made (1 is the first; the real ids, which precreation may skip,
// never show); a ledger number the topic has not made names no ledger.
// A range is <ledger>:<from>..<to>.
//
// The clock moves only in persist, so whatever the scripts show as written
// or lost is exact: a change is written one CursorPersistInterval after the
// previous write, and a crash loses every change since. The one write that
// needs no persist is a restored cursor's first change, which goes out at
// once (it has no previous write to wait after); the harness waits for it
// and prints it.
func TestCursorScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/cursor", func(t *testing.T, path string) {
		h := &cursorScript{t: t}
		datadriven.RunTest(t, path, h.run)
	})
}

const scriptTopic = "script"

// unknownLedger is added to a ledger number the topic has not made, so
// that it names no ledger, comes after every ledger the topic made (real
// ids carry the region's number in their high bits, below 1<<62) and
// prints back as that number.
const unknownLedger = 1 << 62

// cursorScript is one script's world: an environment, the process that
// owns the topic, and the topic's cursor.
type cursorScript struct {
	t       *testing.T
	e       *env
	cfg     Config
	process int // processes started, so far: each is a factory of its own
	ml      *ManagedLedger
	c       *Cursor
	// ledgers are the real ids of the topic's ledgers, in the order it
	// made them: ledger n of the scripts is ledgers[n-1].
	ledgers []int64
	// rev is the ModRevision of the cursor's record as last seen.
	rev int64
	// writtenSinceOpen: the cursor has written since it was opened, so
	// its next write waits for the interval.
	writtenSinceOpen bool
	seq              uint64
}

func (h *cursorScript) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "init" && h.c == nil {
		td.Fatalf(t, "init first")
	}
	switch td.Cmd {
	case "init":
		if h.e != nil {
			td.Fatalf(t, "one init a script")
		}
		h.cfg = testConfig()
		h.cfg.CursorPersistInterval = time.Second
		if td.HasArg("entries-per-ledger") {
			td.ScanArgs(t, "entries-per-ledger", &h.cfg.MaxEntriesPerLedger)
		}
		if td.HasArg("max-ranges") {
			td.ScanArgs(t, "max-ranges", &h.cfg.MaxPersistedAckRanges)
		}
		if td.HasArg("trim-consumed") {
			h.cfg.RetentionTime, h.cfg.RetentionSize = 0, 0
		}
		start := Earliest
		if td.HasArg("start") {
			var s string
			td.ScanArgs(t, "start", &s)
			if s == "latest" {
				start = Latest
			} else if s != "earliest" {
				td.Fatalf(t, "start=%s: earliest or latest", s)
			}
		}
		h.e = newEnv(h.t)
		h.openTopic(start)
		return h.state()
	case "append":
		n := h.intArg(td, 0)
		var ps []Position
		for range n {
			p, err := h.ml.Append(h.t.Context(), testMessage(h.t, 'A', h.seq, 1, 0), 1)
			if err != nil {
				td.Fatalf(t, "append: %v", err)
			}
			h.seq++
			ps = append(ps, p)
		}
		h.learnLedgers()
		return h.positions(ps) + "\n"
	case "ack":
		var ps []Position
		for i := range td.CmdArgs {
			ps = append(ps, h.position(td, i))
		}
		return h.changed(h.c.Ack(ps...))
	case "ack-cumulative":
		return h.changed(h.c.AckCumulative(h.position(td, 0)))
	case "read":
		es, err := h.c.Read(h.t.Context(), h.intArg(td, 0))
		if err != nil {
			td.Fatalf(t, "read: %v", err)
		}
		ps := make([]Position, len(es))
		for i, en := range es {
			ps[i] = en.Position
		}
		out := "nothing"
		if len(ps) > 0 {
			out = h.positions(ps)
		}
		return out + "\n" + h.state()
	case "skip":
		k, err := h.c.Skip(int64(h.intArg(td, 0)))
		return fmt.Sprintf("skipped %d\n", k) + h.changed(err)
	case "rewind":
		return h.changed(h.c.Rewind())
	case "seek":
		return h.changed(h.c.Seek(h.position(td, 0)))
	case "reset":
		return h.changed(h.c.Reset(h.position(td, 0)))
	case "reset-after":
		return h.changed(h.c.ResetAfter(h.position(td, 0)))
	case "is-acked":
		var b strings.Builder
		for i := range td.CmdArgs {
			p := h.position(td, i)
			fmt.Fprintf(&b, "%s acked=%v consumed=%v\n", h.pos(p), h.c.IsAcked(p), h.c.Consumed(p))
		}
		return b.String()
	case "trim":
		if err := h.ml.Trim(h.t.Context()); err != nil {
			td.Fatalf(t, "trim: %v", err)
		}
		var left []string
		for _, id := range h.ml.Ledgers() {
			left = append(left, h.ledgerNumber(id))
		}
		return "ledgers " + strings.Join(left, " ") + "\n" + h.state()
	case "persist":
		return h.persist()
	case "reload":
		if err := h.ml.Close(h.t.Context()); err != nil {
			td.Fatalf(t, "close: %v", err)
		}
		out := "closed, " + h.stored()
		h.openTopic(Earliest)
		return out + "reopened: " + h.state()
	case "crash":
		h.ml.crash()
		out := "crashed, " + h.stored()
		h.openTopic(Earliest)
		return out + "reopened: " + h.state()
	case "state":
		return h.state()
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

// openTopic starts a process, opens the topic there, and opens or creates
// its cursor.
func (h *cursorScript) openTopic(start InitialPosition) {
	h.process++
	f := h.e.factory(fmt.Sprintf("p%d", h.process), h.cfg)
	h.ml = h.e.open(f, scriptTopic)
	_, err := h.e.store.Get(h.t.Context(), h.key())
	existed := err == nil
	if h.c, err = h.ml.OpenCursor(h.t.Context(), "sub", start); err != nil {
		h.t.Fatalf("open cursor: %v", err)
	}
	h.rev = h.record().ModRevision
	// A created cursor's record was its first write; a restored one has
	// written nothing yet.
	h.writtenSinceOpen = !existed
	h.learnLedgers()
}

// changed prints the outcome of a command that changes the cursor when it
// succeeds, and waits for the write a restored cursor makes at once.
func (h *cursorScript) changed(err error) string {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %s\n", h.translate(err.Error()))
	} else if !h.writtenSinceOpen {
		h.awaitWrite()
		b.WriteString("written at once, " + h.stored())
	}
	b.WriteString(h.state())
	return b.String()
}

// persist lets the persistence interval pass, and waits for the write it
// brings.
func (h *cursorScript) persist() string {
	h.c.mu.Lock()
	dirty := h.c.dirty
	h.c.mu.Unlock()
	if !dirty {
		return "nothing to write, " + h.stored()
	}
	ctx, cancel := context.WithTimeout(h.t.Context(), testkit.WaitDeadline)
	defer cancel()
	// The managed ledger's housekeeping ticker and the cursor's
	// persistence timer are the clock's only waiters: a changed cursor
	// sets its timer an interval after its last write, and the clock has
	// not moved since.
	if err := h.e.clock.BlockUntilContext(ctx, 2); err != nil {
		h.t.Fatalf("the persistence timer was never set: %v", err)
	}
	h.e.clock.Advance(h.cfg.CursorPersistInterval)
	h.awaitWrite()
	return "written, " + h.stored()
}

func (h *cursorScript) awaitWrite() {
	testkit.WaitFor(h.t, "the cursor's write", func() bool { return h.record().ModRevision != h.rev })
	h.rev = h.record().ModRevision
	h.writtenSinceOpen = true
}

func (h *cursorScript) key() string { return CursorKey(region, scriptTopic, "sub") }

func (h *cursorScript) record() meta.KV {
	kv, err := h.e.store.Get(h.t.Context(), h.key())
	if err != nil {
		h.t.Fatalf("the cursor's record: %v", err)
	}
	return kv
}

// stored prints the cursor's record.
func (h *cursorScript) stored() string {
	v, err := decodeCursor(h.record().Value)
	if err != nil {
		h.t.Fatalf("the cursor's record: %v", err)
	}
	rs := make([]entryRange, len(v.Acked))
	for i, r := range v.Acked {
		rs[i] = entryRange{r[0], r[1], r[2]}
	}
	out := fmt.Sprintf("stored: mark-delete=%s acked=%s", h.pos(v.MarkDelete), h.ranges(rs))
	if v.Truncated {
		out += " truncated"
	}
	return out + "\n"
}

func (h *cursorScript) state() string {
	c := h.c
	c.mu.Lock()
	md, read, acked := c.st.markDelete, c.st.readAfter, c.st.acked.clone()
	c.mu.Unlock()
	return fmt.Sprintf("mark-delete=%s read=%s acked=%s backlog=%d\n", h.pos(md), h.pos(read), h.ranges(acked.ranges), c.Backlog())
}

// learnLedgers numbers the ledgers the topic has made since last seen.
func (h *cursorScript) learnLedgers() {
	for _, id := range h.ml.Ledgers() {
		if n := len(h.ledgers); n == 0 || id > h.ledgers[n-1] {
			h.ledgers = append(h.ledgers, id)
		}
	}
}

func (h *cursorScript) ledgerNumber(id int64) string {
	for i, l := range h.ledgers {
		if l == id {
			return strconv.Itoa(i + 1)
		}
	}
	if id > unknownLedger {
		return strconv.FormatInt(id-unknownLedger, 10)
	}
	return fmt.Sprintf("id%d", id)
}

func (h *cursorScript) pos(p Position) string {
	return fmt.Sprintf("%s:%d", h.ledgerNumber(p.Ledger), p.Entry)
}

// positions prints ps, entries in a row of one ledger as one range.
func (h *cursorScript) positions(ps []Position) string {
	var rs []entryRange
	for _, p := range ps {
		if n := len(rs); n > 0 && rs[n-1].Ledger == p.Ledger && rs[n-1].To+1 == p.Entry {
			rs[n-1].To = p.Entry
			continue
		}
		rs = append(rs, entryRange{p.Ledger, p.Entry, p.Entry})
	}
	return strings.Trim(h.ranges(rs), "[]")
}

func (h *cursorScript) ranges(rs []entryRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = h.pos(r.first())
		if r.To != r.From {
			parts[i] += fmt.Sprintf("..%d", r.To)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

var positionInText = regexp.MustCompile(`(\d+):(-?\d+)`)

// translate writes the positions an error names as the scripts do.
func (h *cursorScript) translate(s string) string {
	return positionInText.ReplaceAllStringFunc(s, func(m string) string {
		l, e, _ := strings.Cut(m, ":")
		id, _ := strconv.ParseInt(l, 10, 64)
		return h.ledgerNumber(id) + ":" + e
	})
}

// position reads argument i as a position.
func (h *cursorScript) position(td *datadriven.TestData, i int) Position {
	s := td.CmdArgs[i].Key
	l, e, ok := strings.Cut(s, ":")
	n, err1 := strconv.Atoi(l)
	entry, err2 := strconv.ParseInt(e, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		td.Fatalf(h.t, "position %q: want <ledger>:<entry>", s)
	}
	if n >= 1 && n <= len(h.ledgers) {
		return Position{h.ledgers[n-1], entry}
	}
	return Position{unknownLedger + int64(n), entry}
}

func (h *cursorScript) intArg(td *datadriven.TestData, i int) int {
	if len(td.CmdArgs) <= i {
		td.Fatalf(h.t, "%s: argument %d missing", td.Cmd, i+1)
	}
	n, err := strconv.Atoi(td.CmdArgs[i].Key)
	if err != nil {
		td.Fatalf(h.t, "%s: %v", td.Cmd, err)
	}
	return n
}
