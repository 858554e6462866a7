package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// TestTaskScripts drives one replication task (task.run, the real one)
// from the scripts in testdata/task: the east region's topic is written
// through a real managed ledger on in-memory bookies, the task reads it
// with its real tailer and ledger client, keeps its real cursor in an
// in-memory metadata store, and publishes with its real remote.Producer to
// a fake west broker over in-memory connections. Each script runs in a
// synctest bubble: time moves only with advance (and publish's
// millisecond), and every command returns once every goroutine is blocked,
// so what it prints is all that the command caused. The commands:
//
//	publish [n=N] [batch=M] [replicate-to=r,..] [replicated-from=r]
//	                           N entries of M messages each (default 1, 1);
//	                           prints their positions
//	cursor create [at=earliest|latest]
//	                           the topic's owner creates meridian.repl.west
//	start                      a worker claims the task's key and runs the
//	                           task (task 1, 2...: the tasks started before
//	                           go on until they stop)
//	stop                       the worker stops the last task started (it
//	                           persists first)
//	lose-lease                 the last task's key goes, as when its worker
//	                           froze past its lease; the task runs on
//	roll                       the topic's owner moves: its ledger is closed,
//	                           a new owner opens the topic on a new ledger
//	advance <duration>
//	remote hold|answer         the west broker keeps (or answers) its receipts
//	remote release             it answers the receipts it kept
//	remote refuse <seq>        it answers the SEND of that sequence id with
//	                           a SEND_ERROR (PersistenceError), once
//	remote drop                it closes every connection
//	remote down|up             it refuses (accepts) new connections
//	policy [ttl=<seconds>] [rate=<msgs>/<seconds>]
//	                           sets the topic's message TTL (0: none) and
//	                           replicator dispatch rate
//	stats                      what the task reports (taskStats)
//
// Every command prints, after its own output, what happened meanwhile:
// what the west broker saw ("west: ..."), each SEND with its sequence ids
// (the source's offsets) and what became of it (stored, duplicate: the
// west broker's dedup on them; held, refused), and "connection refused"
// once however many attempts failed; the stored cursor when it moved
// ("cursor: <pos>", ledgers numbered in the order met); and a task
// stopping ("task N: ..."). "ok" when nothing did.
//
// The task's retry backoff is jittered (up to half of each wait, from a
// source the task does not take from its worker), so a script that waits
// out a failure advances past the longest wait the jitter allows (1s holds
// the first few retries and a persist interval): the output then does not
// depend on the draw.
func TestTaskScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/task", func(t *testing.T, path string) {
		synctest.Test(t, func(t *testing.T) {
			h := newTaskScript(t)
			datadriven.RunTest(t, path, h.run)
		})
	})
}

const (
	scriptRegion = "east"
	scriptRemote = "west"
	scriptTopic  = "persistent://public/default/orders"
)

// taskScript is one script's world.
type taskScript struct {
	t       *testing.T
	ctx     context.Context
	store   *meta.Memory
	bookies *ledgertest.Cluster
	gstore  *global.Store
	cache   *global.Cache
	owner   *mledger.Factory // the topic's owning broker
	ml      *mledger.ManagedLedger
	owners  int // how many owners the topic has had
	worker  *Worker
	west    *fakeWest
	tasks   []*task          // in the order started
	clients []*ledger.Client // closed last

	ledgers     map[int64]int  // ledger id -> its number in the script, from 1, for short positions
	shownCursor string         // the cursor last printed
	stopShown   map[*task]bool // the tasks printed as stopped
}

var discard = slog.New(slog.DiscardHandler)

func newTaskScript(t *testing.T) *taskScript {
	ctx := t.Context()
	h := &taskScript{t: t, ctx: ctx, bookies: ledgertest.NewCluster(), west: newFakeWest(), ledgers: map[int64]int{},
		shownCursor: "none", stopShown: map[*task]bool{}}
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	check(t, err)
	h.store = store
	t.Cleanup(h.close)
	for _, id := range []string{"bka", "bkb", "bkc"} {
		h.bookies.AddBookie(id)
		check(t, ledgertest.Register(ctx, store, scriptRegion, id, "", false))
	}
	h.gstore, err = global.NewStore(store, global.DefaultConfig())
	check(t, err)
	for _, r := range []string{scriptRegion, scriptRemote} {
		_, err := h.gstore.CreateCluster(ctx, r, global.ClusterData{BrokerServiceURL: "pulsar://" + r + ":6650"})
		check(t, err)
	}
	both := []string{scriptRegion, scriptRemote}
	_, err = h.gstore.CreateTenant(ctx, "public", global.TenantInfo{AllowedClusters: both})
	check(t, err)
	_, err = h.gstore.CreateNamespace(ctx, "public", "default", global.Policies{ReplicationClusters: both})
	check(t, err)
	tn, err := topology.ParseTopicName(scriptTopic)
	check(t, err)
	rcpt, err := h.gstore.CreateTopic(ctx, tn, global.TopicPolicies{})
	check(t, err)
	h.cache, err = global.StartCache(h.gstore, global.DefaultCacheConfig())
	check(t, err)
	check(t, h.cache.Await(ctx, rcpt))

	h.openOwner()

	cfg := DefaultConfig(scriptRegion)
	cfg.WorkerID = "w1" // the tasks' keys name w1, w2... (start)
	cfg.Tailer.Region = scriptRegion
	cfg.Remote.Dial = h.west.dial
	h.worker = &Worker{cfg: cfg, store: store, ledgers: h.ledgerClient("replicator"), policies: h.cache, log: discard,
		tasks: map[taskID]*task{}, states: newStateBoard(scriptRegion, cfg.WorkerID, store, cfg.StatsInterval, cfg.Clock, discard)}
	check(t, cfg.Validate())
	return h
}

// close stops everything the script started, so that the bubble ends
// with no goroutine left.
func (h *taskScript) close() {
	ctx := context.WithoutCancel(h.ctx)
	for _, tk := range h.tasks {
		tk.cancel()
		<-tk.done
	}
	if h.owner != nil {
		h.owner.Close(ctx)
	}
	for _, c := range h.clients {
		c.Close()
	}
	if h.cache != nil {
		h.cache.Close()
	}
	h.west.close()
	h.store.Close()
}

// ledgerClient is a ledger client of the region's bookies, as the named
// process.
func (h *taskScript) ledgerClient(name string) *ledger.Client {
	c, err := ledger.New(ledger.DefaultConfig(scriptRegion, 1), h.store, h.bookies.Client(name), discard, rand.New(rand.NewPCG(1, 2)))
	check(h.t, err)
	h.clients = append(h.clients, c)
	return c
}

// openOwner makes a new owner of the topic (a broker) and opens it there.
func (h *taskScript) openOwner() {
	h.owners++
	cfg := mledger.DefaultConfig(scriptRegion)
	cfg.EnsembleSize, cfg.WriteQuorum, cfg.AckQuorum = 3, 2, 2
	cfg.MinLedgerRolloverTime = 0
	cfg.HousekeepingInterval = time.Hour
	cfg.RetentionTime, cfg.RetentionSize = -1, -1
	f, err := mledger.NewFactory(cfg, h.ledgerClient(fmt.Sprintf("broker-%d", h.owners)), h.store, discard)
	check(h.t, err)
	h.owner = f
	h.ml, err = f.Open(h.ctx, scriptTopic)
	check(h.t, err)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *taskScript) run(t *testing.T, td *datadriven.TestData) string {
	h.t = t
	var out strings.Builder
	switch td.Cmd {
	case "publish":
		h.publish(td, &out)
	case "cursor":
		h.createCursor(td)
	case "start":
		h.start()
	case "stop":
		tk := h.last()
		tk.cancel()
		<-tk.done
	case "lose-lease":
		tk := h.last()
		check(t, h.store.Delete(h.ctx, tk.id.key(scriptRegion), tk.rev))
	case "roll":
		check(t, h.owner.Close(h.ctx))
		h.openOwner()
	case "advance":
		if len(td.CmdArgs) != 1 {
			t.Fatalf("advance: want one duration, got %v", td.CmdArgs)
		}
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		check(t, err)
		time.Sleep(d)
	case "remote":
		h.west.do(t, td.CmdArgs)
	case "policy":
		h.policy(td)
	case "stats":
		st := h.last().stats.snapshot(time.Now())
		fmt.Fprintf(&out, "connected=%v out=%d expired=%d mark-delete=%s\n", st.Connected, st.MsgOutCounter, st.MsgExpiredCounter, h.pos(st.MarkDelete))
		if st.LastError != "" {
			fmt.Fprintf(&out, "last error: %s\n", st.LastError)
		}
	default:
		t.Fatalf("unknown command %q", td.Cmd)
	}
	synctest.Wait()
	h.happened(&out)
	if out.Len() == 0 {
		return "ok\n"
	}
	return out.String()
}

// last is the task started last.
func (h *taskScript) last() *task {
	if len(h.tasks) == 0 {
		h.t.Fatal("no task started yet")
	}
	return h.tasks[len(h.tasks)-1]
}

// happened prints what the west broker saw, the cursor's move and the
// tasks' stops since the last command.
func (h *taskScript) happened(out *strings.Builder) {
	for _, e := range h.west.takeEvents() {
		fmt.Fprintf(out, "west: %s\n", e)
	}
	if c := h.storedCursor(); c != h.shownCursor {
		fmt.Fprintf(out, "cursor: %s\n", c)
		h.shownCursor = c
	}
	for i, tk := range h.tasks {
		select {
		case <-tk.done:
		default:
			continue
		}
		if h.stopShown[tk] {
			continue
		}
		h.stopShown[tk] = true
		if h.lostTask(tk) {
			fmt.Fprintf(out, "task %d: stopped, its key lost\n", i+1)
		} else {
			fmt.Fprintf(out, "task %d: stopped\n", i+1)
		}
	}
}

// storedCursor is meridian.repl.west's position in the store, or "none".
func (h *taskScript) storedCursor() string {
	c, err := mledger.OpenExternalCursor(h.ctx, h.store, scriptRegion, scriptTopic, CursorPrefix+scriptRemote, mledger.Position{}, mledger.WithoutCreate())
	if errors.Is(err, mledger.ErrNoCursor) {
		return "none"
	}
	check(h.t, err)
	return h.pos(c.MarkDeletePosition())
}

// pos prints p with its ledger numbered in the order the script met its
// ledgers (L1, L2...): the ids themselves carry the region's number in
// their high bits and would hide what matters.
func (h *taskScript) pos(p mledger.Position) string {
	if p == (mledger.Position{}) {
		return "start"
	}
	n, ok := h.ledgers[p.Ledger]
	if !ok {
		n = len(h.ledgers) + 1
		h.ledgers[p.Ledger] = n
	}
	return fmt.Sprintf("L%d:%d", n, p.Entry)
}

// lostTask reports whether tk told its worker it lost its key.
func (h *taskScript) lostTask(tk *task) bool {
	h.worker.mu.Lock()
	defer h.worker.mu.Unlock()
	return slices.Contains(h.worker.lost, tk)
}

func (h *taskScript) publish(td *datadriven.TestData, out *strings.Builder) {
	n, batch := 1, 1
	var to []string
	var from string
	for _, a := range td.CmdArgs {
		switch a.Key {
		case "n":
			n = atoi(h.t, value(h.t, a))
		case "batch":
			batch = atoi(h.t, value(h.t, a))
		case "replicate-to":
			to = strings.Split(value(h.t, a), ",")
		case "replicated-from":
			from = value(h.t, a)
		default:
			h.t.Fatalf("publish: unknown argument %q", a.Key)
		}
	}
	var positions []string
	for range n {
		md := pb.MessageMetadata_builder{ProducerName: proto.String("app"), SequenceId: proto.Uint64(0),
			PublishTime: proto.Uint64(uint64(time.Now().UnixMilli())), ReplicateTo: to}
		if batch > 1 {
			md.NumMessagesInBatch = proto.Int32(int32(batch))
		}
		if from != "" {
			md.ReplicatedFrom = proto.String(from)
		}
		msg, err := wire.AppendMessage(nil, md.Build(), []byte("payload"))
		check(h.t, err)
		pos, err := h.ml.Append(h.ctx, msg, batch)
		check(h.t, err)
		positions = append(positions, h.pos(pos))
	}
	fmt.Fprintln(out, strings.Join(positions, " "))
	// The writer sends its LAC explicitly once idle for a millisecond;
	// until then a reader does not see the last entry.
	time.Sleep(time.Millisecond)
}

func (h *taskScript) createCursor(td *datadriven.TestData) {
	var at mledger.Position // earliest: before the topic's first entry
	switch td.FullCmd() {
	case "cursor create", "cursor create at=earliest":
	case "cursor create at=latest":
		at = h.ml.LastConfirmed()
	default:
		h.t.Fatalf("want cursor create [at=earliest|latest], got %s", td.FullCmd())
	}
	_, err := mledger.CreateExternalCursor(h.ctx, h.store, scriptRegion, scriptTopic, CursorPrefix+scriptRemote, at)
	check(h.t, err)
}

// start claims the task's key and runs the task, as Worker.reconcile and
// startTask do. Every task shares the one Worker: what a task uses of it
// (its configuration, store, ledger client and policies) is the same for
// any worker of the region, and the key's revision is the task's own.
func (h *taskScript) start() {
	id := taskID{Topic: scriptTopic, Remote: scriptRemote}
	worker := fmt.Sprintf("w%d", len(h.tasks)+1)
	rev, err := h.store.Create(h.ctx, id.key(scriptRegion), []byte(worker), meta.NoLease)
	if errors.Is(err, meta.ErrExists) {
		h.t.Fatal("start: the task's key is held; stop the task or lose its lease first")
	}
	check(h.t, err)
	ctx, cancel := context.WithCancel(h.ctx)
	tk := &task{id: id, w: h.worker, rev: rev, log: discard, cancel: cancel, done: make(chan struct{}), stats: newTaskStats(id)}
	h.tasks = append(h.tasks, tk)
	h.worker.states.add(tk.stats)
	go tk.run(ctx)
}

func (h *taskScript) policy(td *datadriven.TestData) {
	tn, err := topology.ParseTopicName(scriptTopic)
	check(h.t, err)
	_, rcpt, err := h.gstore.UpdateTopic(h.ctx, tn, func(p *global.TopicPolicies) error {
		for _, a := range td.CmdArgs {
			switch a.Key {
			case "ttl":
				ttl := atoi(h.t, value(h.t, a))
				p.MessageTTLInSeconds = &ttl
			case "rate":
				msgs, period, ok := strings.Cut(value(h.t, a), "/")
				if !ok {
					h.t.Fatalf("policy: %s, want rate=<msgs>/<seconds>", a)
				}
				b, err := json.Marshal(global.DispatchRate{DispatchThrottlingRateInMsg: int64(atoi(h.t, msgs)),
					DispatchThrottlingRateInByte: -1, RatePeriodInSecond: atoi(h.t, period)})
				check(h.t, err)
				if p.Extra == nil {
					p.Extra = global.Extra{}
				}
				p.Extra[global.ExtraReplicatorDispatchRate] = b
			default:
				h.t.Fatalf("policy: unknown argument %q", a.Key)
			}
		}
		return nil
	})
	check(h.t, err)
	check(h.t, h.cache.Await(h.ctx, rcpt))
}

// value is a's one value (key=value).
func value(t *testing.T, a datadriven.CmdArg) string {
	if len(a.Vals) != 1 {
		t.Fatalf("%s: want %s=<one value>", a, a.Key)
	}
	return a.Vals[0]
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	check(t, err)
	return n
}

// fakeWest is the west region's broker as the task's producer sees it: it
// answers LOOKUP, PRODUCER, SEND and PING over in-memory connections, and
// deduplicates SENDs as a broker does for a replication producer, on the
// highest sequence id stored (DESIGN §5), which outlives connections.
type fakeWest struct {
	wg sync.WaitGroup

	mu      sync.Mutex
	down    bool
	hold    bool
	refuse  map[uint64]bool
	highest int64 // the highest sequence id stored; -1: none
	held    []func()
	conns   []net.Conn
	events  []string
}

func newFakeWest() *fakeWest { return &fakeWest{highest: -1, refuse: map[uint64]bool{}} }

func (f *fakeWest) dial(ctx context.Context, network, address string) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		// Once per command: how many attempts a span of time holds
		// depends on the backoff's jitter.
		if !slices.Contains(f.events, "connection refused") {
			f.events = append(f.events, "connection refused")
		}
		return nil, fmt.Errorf("dial %s: connection refused", address)
	}
	client, server := net.Pipe()
	f.conns = append(f.conns, server)
	f.wg.Go(func() { f.serve(server) })
	return client, nil
}

func (f *fakeWest) close() {
	f.mu.Lock()
	f.down = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeWest) takeEvents() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.events
	f.events = nil
	return e
}

func (f *fakeWest) do(t *testing.T, args []datadriven.CmdArg) {
	const want = "want remote hold|answer|release|refuse <seq>|drop|down|up"
	if len(args) == 0 || (args[0].Key == "refuse") != (len(args) == 2) || len(args) > 2 {
		t.Fatal(want)
	}
	var refuse uint64
	if args[0].Key == "refuse" {
		var err error
		refuse, err = strconv.ParseUint(args[1].Key, 10, 64)
		check(t, err)
	}
	f.mu.Lock()
	var release []func()
	switch args[0].Key {
	case "hold":
		f.hold = true
	case "answer":
		f.hold = false
	case "release":
		release, f.held = f.held, nil
	case "refuse":
		f.refuse[refuse] = true
	case "drop":
		for _, c := range f.conns {
			c.Close()
		}
		f.conns = nil
	case "down":
		f.down = true
	case "up":
		f.down = false
	default:
		f.mu.Unlock()
		t.Fatal(want)
	}
	f.mu.Unlock()
	for _, answer := range release {
		answer()
	}
}

func (f *fakeWest) serve(c net.Conn) {
	var wmu sync.Mutex
	w := wire.NewWriter(c)
	write := func(cmd *pb.BaseCommand) {
		wmu.Lock()
		defer wmu.Unlock()
		if w.WriteCommand(cmd) == nil {
			w.Flush()
		}
	}
	r := wire.NewReader(c, 0)
	for {
		var fr wire.Frame
		if err := r.ReadFrame(&fr); err != nil {
			return
		}
		f.mu.Lock()
		reply, later := f.handle(fr.Command, write)
		f.mu.Unlock()
		if reply != nil && !later {
			write(reply)
		}
	}
}

// handle runs under f.mu and returns the reply to cmd, if any; later
// says it is kept until release.
func (f *fakeWest) handle(cmd *pb.BaseCommand, write func(*pb.BaseCommand)) (reply *pb.BaseCommand, later bool) {
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: pb.CommandConnected_builder{
			ServerVersion: proto.String("fake west"), ProtocolVersion: proto.Int32(cmd.GetConnect().GetProtocolVersion()),
			MaxMessageSize: proto.Int32(wire.DefaultMaxMessageSize)}.Build()}.Build(), false
	case pb.BaseCommand_PING:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build(), false
	case pb.BaseCommand_LOOKUP:
		l := cmd.GetLookupTopic()
		return pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: pb.CommandLookupTopicResponse_builder{
			RequestId: proto.Uint64(l.GetRequestId()), Authoritative: proto.Bool(true), Response: pb.CommandLookupTopicResponse_Connect.Enum(),
			BrokerServiceUrl: proto.String("pulsar://" + scriptRemote + ":6650")}.Build()}.Build(), false
	case pb.BaseCommand_PRODUCER:
		p := cmd.GetProducer()
		f.events = append(f.events, fmt.Sprintf("producer %s (last sequence id %d)", p.GetProducerName(), f.highest))
		return pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: pb.CommandProducerSuccess_builder{
			RequestId: proto.Uint64(p.GetRequestId()), ProducerName: proto.String(p.GetProducerName()),
			LastSequenceId: proto.Int64(f.highest), ProducerReady: proto.Bool(true)}.Build()}.Build(), false
	case pb.BaseCommand_CLOSE_PRODUCER:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_SUCCESS.Enum(), Success: pb.CommandSuccess_builder{
			RequestId: proto.Uint64(cmd.GetCloseProducer().GetRequestId())}.Build()}.Build(), false
	case pb.BaseCommand_SEND:
		return f.send(cmd.GetSend(), write)
	}
	return nil, false
}

// send stores (or refuses, or drops as a duplicate) one SEND and returns
// its answer.
func (f *fakeWest) send(s *pb.CommandSend, write func(*pb.BaseCommand)) (reply *pb.BaseCommand, later bool) {
	seq, highest := s.GetSequenceId(), s.GetHighestSequenceId()
	what := fmt.Sprintf("send %d..%d (%d msgs)", seq, highest, s.GetNumMessages())
	if f.refuse[seq] {
		delete(f.refuse, seq)
		f.events = append(f.events, what+" refused")
		return pb.BaseCommand_builder{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: pb.CommandSendError_builder{
			ProducerId: proto.Uint64(s.GetProducerId()), SequenceId: proto.Uint64(seq), Error: pb.ServerError_PersistenceError.Enum(),
			Message: proto.String("west's bookies refused the entry")}.Build()}.Build(), false
	}
	fate := "stored"
	ledgerID, entryID := uint64(1), highest
	if int64(seq) <= f.highest {
		fate, ledgerID, entryID = "duplicate", ^uint64(0), ^uint64(0)
	} else {
		f.highest = int64(highest)
	}
	reply = pb.BaseCommand_builder{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: pb.CommandSendReceipt_builder{
		ProducerId: proto.Uint64(s.GetProducerId()), SequenceId: proto.Uint64(seq), HighestSequenceId: proto.Uint64(highest),
		MessageId: pb.MessageIdData_builder{LedgerId: proto.Uint64(ledgerID), EntryId: proto.Uint64(entryID)}.Build()}.Build()}.Build()
	if f.hold {
		f.events = append(f.events, what+" "+fate+", receipt held")
		f.held = append(f.held, func() { write(reply) })
		return reply, true
	}
	f.events = append(f.events, what+" "+fate)
	return reply, false
}
