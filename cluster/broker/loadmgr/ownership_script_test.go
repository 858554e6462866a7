package loadmgr

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// TestOwnershipScripts drives bundle ownership (ownership.go, placement.go,
// probe.go, handoff.go) from the scripts in testdata/ownership: real load
// managers of several brokers of one region, over one in-memory metadata
// store whose leases expire on a fake clock. Each broker's advertised
// service URL is a loopback listener of the script's, so that a lookup's
// probe of an owner gets the answer the script chose (it answers, it is
// refused, or it closes unanswered). The brokers run their watch of unload
// requests, as Start starts it; the leader's loop and the load reports do
// not run. Each command waits for what it set off to settle, then prints it.
//
//	broker <id> [draining] [rate=<msgs/s>]
//	                  a broker starts (revoking its previous run's session)
//	                  and registers; draining and rate go into its record
//	lookup <via> <bundle> [here] [async]
//	                  a lookup through broker via (BundleOwner; here:
//	                  ClaimBundle, a topic load); async: if it waits for an
//	                  owner's lease to end, leave it waiting
//	unload <bundle> via=<id> [to=<id>] [async]
//	                  an admin unload made on broker via (UnloadBundle);
//	                  async: leave it waiting for the owner to let go
//	await             the answer of the async lookup or unload
//	drain <id>        broker id drains (Drain)
//	expire <id> [hold]
//	                  etcd ends broker id's session lease; hold: its unload
//	                  of every topic (onLost) blocks until `unloaded <id>`
//	unloaded <id>     the held unload of broker id returns
//	kill <id>         broker id's process dies: probes are refused, and its
//	                  lease lapses one TTL later
//	hang <id>         broker id's process hangs: probes are closed
//	                  unanswered, and its lease lapses one TTL later
//	restart <id>      a new process of broker id starts (the old one dies)
//	tick <duration>   the fake clock moves on (lease expiry, probe memory)
//	owners            the ownership keys: bundle, owner, session lease,
//	                  unload request
//	brokers           the registrations: id, session lease, flags
//
// Besides its answer, a command prints what it set off, sorted: the probes
// a broker's port got ("probe of b1: answered"), and what the load manager
// asked of a broker's topics ("b1: unload every topic", "b1: hand off
// bundle 0 to b2"). The namespace is t/ns, with four even bundles, named 0
// to 3. A session lease is named <broker>.<n>, the n-th session of that
// broker id. Each broker breaks placement ties with its own source of the
// same fixed seed, so a script's draws repeat.
func TestOwnershipScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/ownership", func(t *testing.T, path string) {
		h := newOwnershipScript(t)
		datadriven.RunTest(t, path, h.run)
	})
}

// ownershipScript is one script's region.
type ownershipScript struct {
	t       *testing.T
	clock   *clockwork.FakeClock
	store   *scriptStore
	bundles []topology.Bundle
	brokers map[string]*scriptBroker // the live process of each id
	dead    []*scriptBroker          // processes that died, closed at the end
	events  scriptEvents
	// leases names every session lease a broker held: <broker>.<n>.
	leases   map[meta.LeaseID]string
	sessions map[string]int // by broker id: sessions so far
	// pending is the answer of the async command under way, if any.
	pending chan string
}

// scriptBroker is one broker process: its load manager, the topics it
// pretends to serve, and the listener its probes reach.
type scriptBroker struct {
	id     string
	m      *Manager
	topics *scriptTopics
	probe  *probeListener
}

func newOwnershipScript(t *testing.T) *ownershipScript {
	clock := clockwork.NewFakeClock()
	cfg := meta.DefaultMemoryConfig()
	cfg.Clock = clock
	mem, err := meta.NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &ownershipScript{t: t, clock: clock, store: &scriptStore{Memory: mem}, bundles: evenBundles(t, 4),
		brokers: map[string]*scriptBroker{}, leases: map[meta.LeaseID]string{}, sessions: map[string]int{}}
	// Cleanups run last first: the brokers close before the store.
	t.Cleanup(func() { mem.Close() })
	t.Cleanup(func() {
		if h.pending != nil {
			t.Error("the script ends with an async command it did not await")
		}
		for _, b := range h.brokers {
			b.topics.release()
			b.m.Close(context.Background())
		}
		for _, b := range h.dead {
			b.m.Close(context.Background())
		}
	})
	return h
}

func (h *ownershipScript) run(t *testing.T, td *datadriven.TestData) string {
	h.t = t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch td.Cmd {
	case "broker":
		id := td.CmdArgs[0].Key
		if h.brokers[id] != nil {
			td.Fatalf(t, "broker %s is running", id)
		}
		b := h.startBroker(ctx, id)
		if td.HasArg("draining") || td.HasArg("rate") {
			var rate float64
			td.MaybeScanArgs(t, "rate", &rate)
			err := b.m.own.updateRecord(ctx, func(r *BrokerRecord) {
				r.Draining = td.HasArg("draining")
				if td.HasArg("rate") {
					r.Load = &LoadReport{MsgRateIn: rate}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		return h.print("ok")
	case "lookup":
		b := h.broker(td, 0)
		bundle := h.bundle(td, 1)
		watching := h.store.signalWatch(b.m.own.bundleKey("t", "ns", bundle))
		return h.call(ctx, t, td, watching, "waiting for the owner's lease to end", func(ctx context.Context) string {
			lookup := b.m.BundleOwner
			if td.HasArg("here") {
				lookup = b.m.ClaimBundle
			}
			owner, mine, err := lookup(ctx, "t", "ns", bundle)
			switch {
			case err != nil:
				return "error: " + err.Error()
			case mine:
				return "owner " + owner.BrokerID + " (mine)"
			}
			return "owner " + owner.BrokerID
		})
	case "await":
		if h.pending == nil {
			td.Fatalf(t, "no async command to await")
		}
		r := receive(ctx, t, "the async command", h.pending)
		h.pending = nil
		h.settle()
		return h.print(r)
	case "unload":
		var via, to string
		td.ScanArgs(t, "via", &via)
		td.MaybeScanArgs(t, "to", &to)
		b := h.brokers[via]
		if b == nil {
			td.Fatalf(t, "no broker %s", via)
		}
		bundle := h.bundle(td, 0)
		// requestUnload watches the key once its request is in.
		watching := h.store.signalWatch(b.m.own.bundleKey("t", "ns", bundle))
		return h.call(ctx, t, td, watching, "waiting for the owner to let go", func(ctx context.Context) string {
			return errString(b.m.UnloadBundle(ctx, "t", "ns", bundle, to))
		})
	case "drain":
		h.broker(td, 0).m.Drain(ctx)
		h.settle()
		return h.print("ok")
	case "expire":
		b := h.broker(td, 0)
		hold := td.HasArg("hold")
		if hold {
			b.topics.holdUnload()
		}
		if !h.store.Expire(b.m.own.liveLeaseID()) {
			td.Fatalf(t, "broker %s holds no lease", b.id)
		}
		if hold {
			receive(ctx, t, "the unload of every topic", b.topics.unloading)
			return h.print("ok")
		}
		h.settle()
		return h.print("ok")
	case "unloaded":
		h.broker(td, 0).topics.release()
		h.settle()
		return h.print("ok")
	case "kill", "hang":
		b := h.broker(td, 0)
		h.stop(b, td.Cmd == "kill")
		return h.print("ok")
	case "restart":
		id := td.CmdArgs[0].Key
		if b := h.brokers[id]; b != nil {
			h.stop(b, true)
		}
		h.startBroker(ctx, id)
		return h.print("ok")
	case "tick":
		d, err := time.ParseDuration(td.CmdArgs[0].Key)
		if err != nil {
			td.Fatalf(t, "tick: %v", err)
		}
		h.clock.Advance(d)
		h.settle()
		return h.print("ok")
	case "owners":
		return h.owners(ctx)
	case "brokers":
		return h.registrations(ctx)
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

// call runs a lookup or an unload, and prints its answer once the region
// has settled. With the command's async argument it returns at once if the
// call starts waiting (waiting closes), printing waitingFor: await prints
// its answer.
func (h *ownershipScript) call(ctx context.Context, t *testing.T, td *datadriven.TestData, waiting <-chan struct{},
	waitingFor string, call func(context.Context) string) string {
	if h.pending != nil && td.HasArg("async") {
		td.Fatalf(t, "an async command is under way: await it first")
	}
	done := make(chan string, 1)
	go func() {
		// Not the command's ctx: an async call outlives the command.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- call(cctx)
	}()
	if !td.HasArg("async") {
		r := receive(ctx, t, td.Cmd, done)
		h.settle()
		return h.print(r)
	}
	select {
	case r := <-done:
		h.settle()
		return h.print(r)
	case <-waiting:
		h.pending = done
		return h.print(waitingFor)
	case <-ctx.Done():
		t.Fatalf("waited in vain for %s", td.Cmd)
		return ""
	}
}

// receive returns what ch gives, failing the test if nothing comes before
// ctx ends.
func receive[T any](ctx context.Context, t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waited in vain for %s", what)
		var zero T
		return zero
	}
}

func errString(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// startBroker starts a process of broker id, as Start does but for the
// leader's loop and the load reports.
func (h *ownershipScript) startBroker(ctx context.Context, id string) *scriptBroker {
	b := &scriptBroker{id: id, topics: &scriptTopics{id: id, bundles: h.bundles, events: &h.events},
		probe: listenProbes(h.t, id, &h.events)}
	cfg := testConfig(id)
	cfg.Self.ServiceURL = b.probe.url
	cfg.Clock = h.clock
	m, err := New(cfg, h.store, nil, nil, b.topics, discardLogger(), testRand())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := m.own.start(ctx); err != nil {
		h.t.Fatal(err)
	}
	m.wg.Go(m.watchUnloads)
	b.m = m
	h.brokers[id] = b
	h.nameLeases()
	return b
}

// stop ends broker b's process: its probes are refused (killed) or closed
// unanswered (hung), its loops stop, and its lease's keep-alive stops, so
// that the lease lapses one TTL later. A dead process unloads nothing.
func (h *ownershipScript) stop(b *scriptBroker, refuse bool) {
	b.probe.stop(refuse)
	b.topics.dead.Store(true)
	b.topics.release()
	b.m.cancel()
	b.m.wg.Wait()
	b.m.own.mu.Lock()
	l, stopLease := b.m.own.mu.lease, b.m.own.mu.stopLease
	b.m.own.mu.Unlock()
	if l != nil {
		stopLease()
		// The store arms the lease's expiry before it closes Done: a tick
		// from now on ends it.
		<-l.Done()
	}
	delete(h.brokers, b.id)
	h.dead = append(h.dead, b)
	h.settle()
}

// settle waits until what a command set off has run its course: the
// leases whose time is up have ended, every broker has taken the end of
// its lease in hand (onLost has returned), and no hand-off is under way.
func (h *ownershipScript) settle() {
	h.t.Helper()
	testkit.WaitFor(h.t, "the region to settle", func() bool {
		for id := range h.leases {
			remaining, _, err := h.store.TimeToLive(context.Background(), id)
			if err == nil && remaining == 0 {
				return false // its expiry is on its way
			}
		}
		for _, b := range append(slices.Collect(maps.Values(h.brokers)), h.dead...) {
			if !b.quiet() {
				return false
			}
		}
		return true
	})
	h.nameLeases()
}

// quiet reports whether the broker has no lease end to take in hand, no
// unload of topics under way but one the script holds, and no hand-off.
func (b *scriptBroker) quiet() bool {
	o := b.m.own
	o.mu.Lock()
	lost := (o.mu.unloading != nil && !b.topics.holding()) || (o.mu.lease != nil && ended(o.mu.lease))
	o.mu.Unlock()
	b.m.handoffs.Lock()
	handing := len(b.m.handoffs.keys) > 0
	b.m.handoffs.Unlock()
	return !lost && !handing
}

// nameLeases names the current session lease of every running broker that
// has not been named yet.
func (h *ownershipScript) nameLeases() {
	for _, id := range slices.Sorted(maps.Keys(h.brokers)) {
		l := h.brokers[id].m.own.liveLeaseID()
		if _, named := h.leases[l]; l == meta.NoLease || named {
			continue
		}
		h.sessions[id]++
		h.leases[l] = fmt.Sprintf("%s.%d", id, h.sessions[id])
	}
}

func (h *ownershipScript) leaseName(l meta.LeaseID) string {
	if name, ok := h.leases[l]; ok {
		return name
	}
	return fmt.Sprintf("unknown lease %x", int64(l))
}

func (h *ownershipScript) broker(td *datadriven.TestData, i int) *scriptBroker {
	if len(td.CmdArgs) <= i {
		td.Fatalf(h.t, "%s: a broker id is missing", td.Cmd)
	}
	b := h.brokers[td.CmdArgs[i].Key]
	if b == nil {
		td.Fatalf(h.t, "%s: no running broker %s", td.Cmd, td.CmdArgs[i].Key)
	}
	return b
}

func (h *ownershipScript) bundle(td *datadriven.TestData, i int) topology.Bundle {
	if len(td.CmdArgs) <= i {
		td.Fatalf(h.t, "%s: a bundle is missing", td.Cmd)
	}
	n, err := strconv.Atoi(td.CmdArgs[i].Key)
	if err != nil || n < 0 || n >= len(h.bundles) {
		td.Fatalf(h.t, "%s: bundle %q, want 0 to %d", td.Cmd, td.CmdArgs[i].Key, len(h.bundles)-1)
	}
	return h.bundles[n]
}

// print returns the events the command set off, then its result.
func (h *ownershipScript) print(result string) string {
	h.nameLeases()
	return strings.Join(append(h.events.take(), result), "\n")
}

// owners prints the ownership keys, one a line: <bundle> <owner> under
// <session>, and the unload request it carries.
func (h *ownershipScript) owners(ctx context.Context) string {
	h.nameLeases()
	kvs, _, err := h.store.List(ctx, meta.Prefix(meta.RegionKey(testRegion, "owners")))
	if err != nil {
		h.t.Fatal(err)
	}
	own := ownership{region: testRegion} // parseBundleKey needs only the region
	lines := []string{}
	for _, kv := range kvs {
		_, _, b, err := own.parseBundleKey(kv.Key)
		if err != nil {
			h.t.Fatal(err)
		}
		v, err := decodeBundleOwner(kv)
		if err != nil {
			h.t.Fatal(err)
		}
		line := fmt.Sprintf("%d: %s under %s", slices.Index(h.bundles, b), v.BrokerID, h.leaseName(kv.Lease))
		if v.Unload != nil {
			line += " unload requested"
			if v.Unload.Destination != "" {
				line += " to " + v.Unload.Destination
			}
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// registrations prints the live brokers' registrations, one a line.
func (h *ownershipScript) registrations(ctx context.Context) string {
	h.nameLeases()
	brokers, err := liveBrokers(ctx, h.store, testRegion)
	if err != nil {
		h.t.Fatal(err)
	}
	lines := []string{}
	for _, b := range brokers {
		line := b.BrokerID + " under " + h.leaseName(b.Lease)
		if b.Draining {
			line += " draining"
		}
		if b.Load != nil {
			line += fmt.Sprintf(" rate=%g", messageRate(b.Load))
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// scriptEvents is what the brokers' topics did, in the order of the lines
// once sorted: concurrent hand-offs (a drain) record in any order.
type scriptEvents struct {
	mu    sync.Mutex
	lines []string
}

func (e *scriptEvents) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, fmt.Sprintf(format, args...))
}

func (e *scriptEvents) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	lines := e.lines
	e.lines = nil
	slices.Sort(lines)
	return lines
}

// scriptTopics is a broker's Topics: it records what the load manager asks
// of them. Its UnloadAll can be held, to look at the broker meanwhile.
type scriptTopics struct {
	id      string
	bundles []topology.Bundle // named by their index in the script
	events  *scriptEvents
	dead    atomic.Bool // the process died: it records nothing more

	mu        sync.Mutex
	held      chan struct{} // non-nil: UnloadAll waits for it to close
	unloading chan struct{} // UnloadAll sends on it when held
}

func (s *scriptTopics) Sample() Sample { return Sample{} }

func (s *scriptTopics) HandOff(ctx context.Context, tenant, ns string, b topology.Bundle, move func(context.Context) *Owner) int {
	to := "nobody: key deleted"
	if dest := move(ctx); dest != nil {
		to = dest.BrokerID
	}
	if !s.dead.Load() {
		s.events.add("%s: hand off bundle %d to %s", s.id, slices.Index(s.bundles, b), to)
	}
	return 0
}

func (s *scriptTopics) UnloadAll(context.Context) {
	if s.dead.Load() {
		return
	}
	s.events.add("%s: unload every topic", s.id)
	s.mu.Lock()
	held, unloading := s.held, s.unloading
	s.mu.Unlock()
	if held != nil {
		unloading <- struct{}{}
		<-held
	}
}

func (s *scriptTopics) holdUnload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.unloading = make(chan struct{}), make(chan struct{}, 1)
}

// holding reports whether UnloadAll is held.
func (s *scriptTopics) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held != nil
}

// release lets a held UnloadAll return.
func (s *scriptTopics) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		close(s.held)
		s.held = nil
	}
}

// scriptStore is the memory store, telling the script when a watch of a
// key it waits on starts: a lookup waiting for a silent owner's lease.
type scriptStore struct {
	*meta.Memory
	mu       sync.Mutex
	watching map[string]chan struct{}
}

// signalWatch returns a channel closed when a watch of key starts.
func (s *scriptStore) signalWatch(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watching == nil {
		s.watching = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	s.watching[key] = ch
	return ch
}

func (s *scriptStore) Watch(ctx context.Context, prefix string, fromRev int64) <-chan meta.WatchResponse {
	s.mu.Lock()
	if ch, ok := s.watching[prefix]; ok {
		close(ch)
		delete(s.watching, prefix)
	}
	s.mu.Unlock()
	return s.Memory.Watch(ctx, prefix, fromRev)
}

// probeListener is the port a broker advertises: it answers a probe while
// the process runs, then either refuses it (the port closed) or closes it
// unanswered (a hung process).
type probeListener struct {
	url    string
	ln     net.Listener
	hung   atomic.Bool
	wg     sync.WaitGroup
	closed sync.Once
}

// listenProbes listens for the probes of broker id, recording each in
// events before it answers, so that the lookup that probed finds it
// recorded.
func listenProbes(t *testing.T, id string, events *scriptEvents) *probeListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &probeListener{url: "pulsar://" + ln.Addr().String(), ln: ln}
	p.wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if p.hung.Load() {
				events.add("probe of %s: closed unanswered", id)
			} else {
				events.add("probe of %s: answered", id)
				_, _ = nc.Write([]byte{0}) // a reply began: alive
			}
			nc.Close()
		}
	})
	t.Cleanup(p.close)
	return p
}

// stop makes the port refuse probes (refuse) or close them unanswered.
func (p *probeListener) stop(refuse bool) {
	if refuse {
		p.close()
		return
	}
	p.hung.Store(true)
}

func (p *probeListener) close() {
	p.closed.Do(func() {
		p.ln.Close()
		p.wg.Wait()
	})
}
