package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/replsub"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

// TestDispatchScripts drives the dispatcher's state machine
// (dispatchState) from the scripts in testdata/dispatch, as the
// dispatcher goroutine does: a round plans, reads from a log and a cursor
// kept by the script, assigns and sends. Each command prints what the
// consumers were sent (and what Failover announced). The commands:
//
//	init type=<SubType> [partition=N] [max-read=N] [max-redeliveries=N] [dispatch-rate=<msgs a second>]
//	     [max-unacked-on-subscription=N]
//	append            one entry per input line: <key or -> [batch=N] [deliver-at=<ms>]
//	join <c> [type=<SubType>] [priority=N] [ranges=a-b,c-d] [queue=N] [max-unacked=N]
//	leave <c>
//	flow <c> <n>
//	freeze <c> / thaw <c>   the consumer's connection stops (resumes) taking frames
//	round [fail-replay]     rounds until nothing moves; fail-replay: replay reads fail
//	ack <c> <pos>... [cumulative] [ack-set=<bits>]
//	redeliver <c> [<pos>...]
//	resubscribe <c>
//	remote            another region's state: per line <pos> [remaining=<bits>]
//	crash             the broker restarts: the state is lost, the cursor kept
//	tick <ms>
//	delayed-delivery on|off   the topic's delayed delivery policy
//	state
//
// Positions are ledger 1's: <entry> or 1:<entry>. Bits are a batch's ack
// set, message 0 first, 1 for a message not acked.
func TestDispatchScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/dispatch", func(t *testing.T, path string) {
		h := &dispatchScript{t: t}
		datadriven.RunTest(t, path, h.run)
	})
}

// dispatchScript is one script's world: the state machine, its consumers,
// the topic's entries and the subscription's cursor.
type dispatchScript struct {
	t          *testing.T
	d          *dispatchState
	kind       pb.CommandSubscribe_SubType
	partition  int
	cfg        DispatchConfig
	consumers  map[string]*consumer
	frozen     map[string]bool
	entries    []mledger.Entry // ledger 1, entry i at i
	cursor     scriptCursor
	now        time.Time
	rate       *dispatchLimiter // the subscription's dispatch rate, if init set one
	maxUnacked atomic.Int64     // the subscription's unacked limit; 0: none
	delayedOff atomic.Bool      // the topic's delayed delivery is not active
	out        strings.Builder  // announcements, until printed
}

func (h *dispatchScript) run(t *testing.T, td *datadriven.TestData) string {
	h.t = t
	if td.Cmd != "init" && h.d == nil {
		td.Fatalf(t, "init first")
	}
	switch td.Cmd {
	case "init":
		h.kind = subType(t, td, "type")
		h.partition = -1
		h.cfg = DefaultDispatchConfig()
		scanOptional(t, td, "partition", &h.partition)
		scanOptional(t, td, "max-read", &h.cfg.MaxReadEntries)
		scanOptional(t, td, "max-redeliveries", &h.cfg.MaxRedeliveries)
		h.entries = nil
		h.cursor = scriptCursor{markDelete: -1, readAfter: -1, acked: map[int64]bool{}, entries: &h.entries}
		h.now = time.UnixMilli(1_000)
		h.rate = nil
		maxUnacked := 0
		scanOptional(t, td, "max-unacked-on-subscription", &maxUnacked)
		h.maxUnacked.Store(int64(maxUnacked))
		h.delayedOff.Store(false)
		if td.HasArg("dispatch-rate") {
			var msgs int64
			td.ScanArgs(t, "dispatch-rate", &msgs)
			h.rate = &dispatchLimiter{}
			h.rate.set(global.DispatchRate{DispatchThrottlingRateInMsg: msgs, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}, true, h.now)
		}
		h.restart()
		return "ok"
	case "append":
		var out []string
		for line := range strings.SplitSeq(strings.TrimSpace(td.Input), "\n") {
			p := mledger.Position{Ledger: 1, Entry: int64(len(h.entries))}
			h.entries = append(h.entries, scriptEntry(t, p, strings.Fields(line)))
			out = append(out, p.String())
		}
		return strings.Join(out, " ")
	case "join":
		name := td.CmdArgs[0].Key
		kind := h.kind
		if td.HasArg("type") {
			kind = subType(t, td, "type")
		}
		queue, maxUnacked, priority := 1000, 50_000, 0
		scanOptional(t, td, "queue", &queue)
		scanOptional(t, td, "max-unacked", &maxUnacked)
		scanOptional(t, td, "priority", &priority)
		c := &consumer{c: &conn{msgs: newMsgQueue(queue, 1<<20)}, id: uint64(len(h.consumers)), name: name,
			priority: int32(priority), maxUnacked: maxUnacked}
		var ksm *pb.KeySharedMeta
		if td.HasArg("ranges") {
			var spec string
			td.ScanArgs(t, "ranges", &spec)
			ksm = stickyRanges(t, spec)
		}
		if err := h.d.addConsumer(c, kind, ksm, 0, "s", h.cursor.readPosition()); err != nil {
			return h.print("error: " + err.Error())
		}
		h.consumers[name] = c
		return h.print("")
	case "leave":
		h.d.removeConsumer(h.consumer(td, 0))
		return h.print("")
	case "flow":
		n, err := strconv.ParseUint(td.CmdArgs[1].Key, 10, 32)
		if err != nil {
			td.Fatalf(t, "flow: %v", err)
		}
		h.d.flow(h.consumer(td, 0), uint32(n))
		return h.print("")
	case "freeze", "thaw":
		h.frozen[td.CmdArgs[0].Key] = td.Cmd == "freeze"
		return h.print("")
	case "round":
		// ack-while-reading=(c,pos...): consumer c acks pos while the
		// first round reads, between its plan and its end.
		var whileReading func()
		for _, arg := range td.CmdArgs {
			if arg.Key == "ack-while-reading" && len(arg.Vals) > 1 {
				var ids []*pb.MessageIdData
				for _, v := range arg.Vals[1:] {
					p := parsePosition(t, v)
					ids = append(ids, pb.MessageIdData_builder{LedgerId: proto.Uint64(uint64(p.Ledger)),
						EntryId: proto.Uint64(uint64(p.Entry))}.Build())
				}
				c := h.consumers[arg.Vals[0]]
				whileReading = func() {
					if ignored, err := h.d.ack(&h.cursor, c, false, ids); err != nil {
						fmt.Fprintf(&h.out, "ignored %d: %v\n", ignored, err)
					}
				}
			}
		}
		h.rounds(td.HasArg("fail-replay"), whileReading)
		return h.print("")
	case "ack":
		c := h.consumer(td, 0)
		var ackSet []int64
		if td.HasArg("ack-set") {
			var bits string
			td.ScanArgs(t, "ack-set", &bits)
			ackSet = parseBits(t, bits)
		}
		var ids []*pb.MessageIdData
		for _, arg := range td.CmdArgs[1:] {
			if len(arg.Vals) > 0 || arg.Key == "cumulative" {
				continue
			}
			p := parsePosition(t, arg.Key)
			ids = append(ids, pb.MessageIdData_builder{LedgerId: proto.Uint64(uint64(p.Ledger)),
				EntryId: proto.Uint64(uint64(p.Entry)), AckSet: ackSet}.Build())
		}
		ignored, err := h.d.ack(&h.cursor, c, td.HasArg("cumulative"), ids)
		if err != nil {
			fmt.Fprintf(&h.out, "ignored %d: %v\n", ignored, err)
		}
		return h.print("")
	case "redeliver":
		var only map[mledger.Position]bool
		for _, arg := range td.CmdArgs[1:] {
			if only == nil {
				only = map[mledger.Position]bool{}
			}
			only[parsePosition(t, arg.Key)] = true
		}
		h.d.redeliver(h.consumer(td, 0), only, true)
		return h.print("")
	case "resubscribe":
		h.d.resubscribed(h.consumer(td, 0))
		return h.print("")
	case "remote":
		var applies []replsub.Apply
		for line := range strings.SplitSeq(strings.TrimSpace(td.Input), "\n") {
			f := strings.Fields(line)
			a := replsub.Apply{Pos: parsePosition(t, f[0])}
			if len(f) > 1 {
				a.Remaining = parseBits(t, strings.TrimPrefix(f[1], "remaining="))
			}
			applies = append(applies, a)
		}
		if err := h.d.applyRemote(&h.cursor, applies); err != nil {
			return h.print("error: " + err.Error())
		}
		return h.print("")
	case "crash":
		h.cursor.readAfter = h.cursor.markDelete
		h.restart()
		return "ok"
	case "tick":
		ms, err := strconv.Atoi(td.CmdArgs[0].Key)
		if err != nil {
			td.Fatalf(t, "tick: %v", err)
		}
		h.now = h.now.Add(time.Duration(ms) * time.Millisecond)
		return "ok"
	case "delayed-delivery":
		h.delayedOff.Store(td.CmdArgs[0].Key == "off")
		return "ok"
	case "state":
		return h.state()
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

// restart starts the state machine afresh, with no consumer: the first
// init, or a broker that crashed.
func (h *dispatchScript) restart() {
	h.d = &dispatchState{}
	h.d.init(h.kind, h.partition, h.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(c *consumer, active bool) {
		state := "inactive"
		if active {
			state = "active"
		}
		fmt.Fprintf(&h.out, "%s: %s\n", c.name, state)
	}, func() {})
	h.consumers, h.frozen = map[string]*consumer{}, map[string]bool{}
	if h.rate != nil {
		h.d.rates = []*dispatchLimiter{h.rate}
	}
	h.d.unackedLimit = &h.maxUnacked
	h.d.delayedOff = &h.delayedOff
}

func (h *dispatchScript) consumer(td *datadriven.TestData, arg int) *consumer {
	c := h.consumers[td.CmdArgs[arg].Key]
	if c == nil {
		td.Fatalf(h.t, "no consumer %q", td.CmdArgs[arg].Key)
	}
	return c
}

// rounds runs dispatch rounds as the dispatcher goroutine does, until one
// moves nothing, and takes from the connections what they were sent.
func (h *dispatchScript) rounds(failReplay bool, whileReading func()) {
	for range 100 {
		h.drain()
		p, ok := h.d.plan(h.now, h.cursor.markDeletePosition())
		if !ok {
			return
		}
		var read []mledger.Entry
		var unread []mledger.Position
		readNew := p.readNew
		for i, q := range p.replay {
			if h.cursor.IsAcked(q) {
				continue
			}
			if failReplay {
				unread, readNew = p.replay[i:], readNew && !p.inOrder
				break
			}
			read = append(read, h.entries[q.Entry])
		}
		fresh := 0
		if readNew {
			es := h.cursor.read(p.budget)
			fresh = len(es)
			read = append(read, es...)
		}
		if whileReading != nil {
			whileReading()
			whileReading = nil
		}
		read = h.d.endRound(p, unread, read)
		sent := h.d.send(h.d.assign(read, p.now))
		h.d.settle(p, p.now, sent)
		if len(sent) == 0 && fresh == 0 {
			h.drain()
			return
		}
	}
	h.t.Fatal("dispatch rounds never settle")
}

// drain prints what each connection that is not frozen was sent.
func (h *dispatchScript) drain() {
	for _, name := range slices.Sorted(maps.Keys(h.consumers)) {
		if h.frozen[name] {
			continue
		}
		for {
			o, ok, _ := h.consumers[name].c.msgs.pop()
			if !ok {
				break
			}
			m := o.cmd.GetMessage()
			fmt.Fprintf(&h.out, "%s <- 1:%d", name, m.GetMessageId().GetEntryId())
			if n := m.GetRedeliveryCount(); n > 0 {
				fmt.Fprintf(&h.out, " redelivered=%d", n)
			}
			if len(m.GetAckSet()) > 0 {
				md, _, err := wire.DecodeMessage(o.msg)
				if err != nil {
					h.t.Fatal(err)
				}
				fmt.Fprintf(&h.out, " ack-set=%s", formatBits(m.GetAckSet(), int(md.GetNumMessagesInBatch())))
			}
			h.out.WriteString("\n")
		}
	}
}

// print returns what happened since the last command, or fallback.
func (h *dispatchScript) print(fallback string) string {
	out := h.out.String()
	h.out.Reset()
	if fallback != "" {
		out += fallback + "\n"
	}
	if out == "" {
		return "ok"
	}
	return out
}

// state prints the consumers (permits/unacked and what they hold), the
// replay set, the delayed entries and the cursor.
func (h *dispatchScript) state() string {
	var b strings.Builder
	for _, c := range h.d.consumers {
		fmt.Fprintf(&b, "%s: permits=%d unacked=%d", c.name, c.permits, c.unacked)
		if c == h.d.active {
			b.WriteString(" active")
		}
		if c.joinedAfter != nil {
			fmt.Fprintf(&b, " joined-after=%v", *c.joinedAfter)
		}
		var held []mledger.Position
		for p, pe := range h.d.pending {
			if pe.c == c {
				held = append(held, p)
			}
		}
		fmt.Fprintf(&b, " pending=%v\n", sortedPositions(held))
	}
	fmt.Fprintf(&b, "replay=%v\n", slices.SortedFunc(maps.Keys(h.d.replay), mledger.Position.Compare))
	if len(h.d.delayed) > 0 {
		var delayed []string
		for _, e := range slices.SortedFunc(slices.Values(h.d.delayed), func(a, b delayedEntry) int { return a.pos.Compare(b.pos) }) {
			delayed = append(delayed, fmt.Sprintf("%v@%d", e.pos, e.at))
		}
		fmt.Fprintf(&b, "delayed=%v\n", delayed)
	}
	fmt.Fprintf(&b, "cursor: mark-delete=1:%d read=1:%d\n", h.cursor.markDelete, h.cursor.readAfter)
	return b.String()
}

// scriptCursor is the subscription's cursor as the scripts need it: what
// is acked, and where reading has got to.
type scriptCursor struct {
	entries    *[]mledger.Entry
	acked      map[int64]bool // individually acked, above markDelete
	markDelete int64
	readAfter  int64
}

func (c *scriptCursor) Ack(ps ...mledger.Position) error {
	for _, p := range ps {
		if p.Entry >= int64(len(*c.entries)) {
			return fmt.Errorf("%w: %v", mledger.ErrInvalidPosition, p)
		}
		c.acked[p.Entry] = true
	}
	c.advance()
	return nil
}

func (c *scriptCursor) AckCumulative(p mledger.Position) error {
	for e := c.markDelete + 1; e <= p.Entry; e++ {
		c.acked[e] = true
	}
	c.advance()
	return nil
}

func (c *scriptCursor) advance() {
	for c.acked[c.markDelete+1] {
		c.markDelete++
		delete(c.acked, c.markDelete)
	}
	c.readAfter = max(c.readAfter, c.markDelete)
}

func (c *scriptCursor) IsAcked(p mledger.Position) bool {
	return p.Entry <= c.markDelete || c.acked[p.Entry]
}

func (c *scriptCursor) Consumed(p mledger.Position) bool {
	return p.Ledger == 1 && p.Entry >= 0 && p.Entry < int64(len(*c.entries)) && c.IsAcked(p)
}

func (c *scriptCursor) markDeletePosition() mledger.Position {
	return mledger.Position{Ledger: 1, Entry: c.markDelete}
}

func (c *scriptCursor) readPosition() mledger.Position {
	return mledger.Position{Ledger: 1, Entry: c.readAfter}
}

// read returns up to n entries after the read position, not acked.
func (c *scriptCursor) read(n int) []mledger.Entry {
	var out []mledger.Entry
	for e := c.readAfter + 1; e < int64(len(*c.entries)) && len(out) < n; e++ {
		c.readAfter = e
		if !c.acked[e] {
			out = append(out, (*c.entries)[e])
		}
	}
	return out
}

// scriptEntry is a stored entry at p: fields are its key ("-": none), then
// batch=N and deliver-at=<ms>.
func scriptEntry(t *testing.T, p mledger.Position, fields []string) mledger.Entry {
	t.Helper()
	md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(p.Entry)),
		PublishTime: proto.Uint64(1)}
	if len(fields) > 0 && fields[0] != "-" {
		md.PartitionKey = proto.String(fields[0])
	}
	payload := []byte("x")
	for _, f := range fields[min(1, len(fields)):] {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("entry field %q: %v", f, err)
		}
		switch k {
		case "batch":
			md.NumMessagesInBatch = proto.Int32(int32(n))
			payload = bytes.Repeat([]byte("x"), 16*n)
		case "deliver-at":
			md.DeliverAtTime = proto.Int64(int64(n))
		default:
			t.Fatalf("entry field %q unknown", f)
		}
	}
	msg, err := wire.AppendMessage(nil, md.Build(), payload)
	if err != nil {
		t.Fatal(err)
	}
	data := binary.BigEndian.AppendUint16(nil, wire.MagicBrokerEntryMetadata)
	data = binary.BigEndian.AppendUint32(data, 0) // an empty BrokerEntryMetadata
	return mledger.Entry{Position: p, Data: append(data, msg...)}
}

func subType(t *testing.T, td *datadriven.TestData, key string) pb.CommandSubscribe_SubType {
	var name string
	td.ScanArgs(t, key, &name)
	v, ok := pb.CommandSubscribe_SubType_value[name]
	if !ok {
		td.Fatalf(t, "no subscription type %q", name)
	}
	return pb.CommandSubscribe_SubType(v)
}

func scanOptional(t *testing.T, td *datadriven.TestData, key string, dest *int) {
	if td.HasArg(key) {
		td.ScanArgs(t, key, dest)
	}
}

// stickyRanges parses "a-b,c-d" into a STICKY Key_Shared declaration.
func stickyRanges(t *testing.T, spec string) *pb.KeySharedMeta {
	var ranges []*pb.IntRange
	for r := range strings.SplitSeq(spec, ",") {
		a, b, _ := strings.Cut(r, "-")
		start, err1 := strconv.Atoi(a)
		end, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil {
			t.Fatalf("range %q", r)
		}
		ranges = append(ranges, pb.IntRange_builder{Start: proto.Int32(int32(start)), End: proto.Int32(int32(end))}.Build())
	}
	return pb.KeySharedMeta_builder{KeySharedMode: pb.KeySharedMode_STICKY.Enum(), HashRanges: ranges}.Build()
}

func parsePosition(t *testing.T, s string) mledger.Position {
	s = strings.TrimPrefix(s, "1:")
	e, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("position %q: %v", s, err)
	}
	return mledger.Position{Ledger: 1, Entry: e}
}

// parseBits reads an ack set written message 0 first ("0110").
func parseBits(t *testing.T, s string) []int64 {
	set := make([]int64, (len(s)+63)/64)
	for i, ch := range s {
		switch ch {
		case '1':
			set[i/64] |= 1 << (i % 64)
		case '0':
		default:
			t.Fatalf("bits %q", s)
		}
	}
	return set
}

func formatBits(set []int64, n int) string {
	var b strings.Builder
	for i := range n {
		if set[i/64]&(1<<(i%64)) != 0 {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

func sortedPositions(ps []mledger.Position) []mledger.Position {
	return slices.SortedFunc(slices.Values(ps), mledger.Position.Compare)
}
