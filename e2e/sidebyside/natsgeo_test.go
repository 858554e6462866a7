//go:build e2e

package sidebyside

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/meridian-mq/meridian/e2e"
)

// natsRegions are the NATS side's regions, one single-server cluster
// each, named as Meridian's so that the tables line up. The first is the
// origin.
var natsRegions = []string{"r1", "r2", "r3"}

// natsGeo is three nats-server clusters of one server each, JetStream on
// file storage, joined by gateways into one super-cluster. Every gateway
// listens behind an e2e.Link of e2e.GeoLinkLatency one way and advertises
// the link's address, and every server names the other gateways by their
// links, so all traffic between regions (the replication, and
// JetStream's meta group) passes through the links and is counted there.
// A region's clients connect to its server directly, as Meridian's
// clients do to their region's broker.
type natsGeo struct {
	servers []*natsServer // in natsRegions order
	runs    int           // names each measurement's streams
}

// natsServer is one region's nats-server process and the link in front of
// its gateway.
type natsServer struct {
	region    string
	clientURL string
	link      *e2e.Link
	cmd       *exec.Cmd
	pid       atomic.Int64 // read by the links' Source
	exited    chan struct{}
	conn      *nats.Conn
	js        jetstream.JetStream
}

// freePort is a free loopback port, found by listening on port 0.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNATSGeo starts the three servers (pinned to the env's cores) and
// their links, and returns once JetStream accepts a stream in every
// region; syncAlways sets `sync_interval: always` (an fsync after every
// write, before the ack), otherwise the default applies (every 2
// minutes). Everything stops when the test ends.
func startNATSGeo(ctx context.Context, t *testing.T, e *env, syncAlways bool) *natsGeo {
	t.Helper()
	dir := t.TempDir()
	g := &natsGeo{}
	gatewayPorts := map[string]int{}
	for _, r := range natsRegions {
		s := &natsServer{region: r, exited: make(chan struct{})}
		gatewayPorts[r] = freePort(t)
		cfg := e2e.DefaultLinkConfig("nats-gateway-"+r, "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", gatewayPorts[r]))
		cfg.Shape = e2e.Shape{Latency: e2e.GeoLinkLatency}
		cfg.Source = g.regionOf
		l, err := e2e.StartLink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		s.link = l
		g.servers = append(g.servers, s)
	}
	sync := ""
	if syncAlways {
		sync = ", sync_interval: always"
	}
	for _, s := range g.servers {
		clientPort, clusterPort := freePort(t), freePort(t)
		s.clientURL = fmt.Sprintf("nats://127.0.0.1:%d", clientPort)
		var remotes []string
		for _, o := range g.servers {
			if o != s {
				remotes = append(remotes, fmt.Sprintf("{name: %s, url: \"nats://%s\"}", o.region, o.link.Addr()))
			}
		}
		// A JetStream server with a gateway runs clustered, and a
		// clustered server needs a route: one to itself stands for its
		// one-server cluster.
		conf := fmt.Sprintf(`server_name: %[1]s
listen: 127.0.0.1:%[2]d
jetstream { store_dir: %[3]q%[8]s }
cluster { name: %[1]s, listen: 127.0.0.1:%[4]d, routes: ["nats-route://127.0.0.1:%[4]d"] }
gateway {
  name: %[1]s
  listen: 127.0.0.1:%[5]d
  advertise: %[6]q
  gateways: [%[7]s]
}
`, s.region, clientPort, filepath.Join(dir, s.region), clusterPort, gatewayPorts[s.region], s.link.Addr(), strings.Join(remotes, ", "), sync)
		path := filepath.Join(dir, s.region+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		log, err := os.Create(filepath.Join(dir, s.region+".log"))
		if err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(e.natsServer, "-c", path)
		s.cmd.Stdout, s.cmd.Stderr = log, log
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("start nats-server %s: %v", s.region, err)
		}
		s.pid.Store(int64(s.cmd.Process.Pid))
		go func() {
			_ = s.cmd.Wait()
			log.Close()
			close(s.exited)
		}()
		t.Cleanup(func() { s.stop(t) })
		e.pin(t, s.cmd.Process.Pid)
	}
	for _, s := range g.servers {
		s.connect(ctx, t)
	}
	g.waitJetStream(ctx, t)
	return g
}

// regionOf names the region whose server holds the socket at peer (a
// connection accepted at self), for the links' CutFrom; "" for any other
// process.
func (g *natsGeo) regionOf(peer, self net.Addr) string {
	for _, s := range g.servers {
		if pid := int(s.pid.Load()); pid != 0 && e2e.HeldBy(peer, self, pid) {
			return s.region
		}
	}
	return ""
}

// stop ends the server: SIGTERM, then SIGKILL if it has not exited
// within 10 s.
func (s *natsServer) stop(t *testing.T) {
	if s.conn != nil {
		s.conn.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Logf("nats-server %s (pid %d) did not exit on SIGTERM: SIGKILL", s.region, s.cmd.Process.Pid)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// connect dials the server, retrying until it listens.
func (s *natsServer) connect(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		nc, err := nats.Connect(s.clientURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err == nil {
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(20000), jetstream.WithPublishAsyncTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			s.conn, s.js = nc, js
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("nats-server %s exited: %v", s.region, s.cmd.ProcessState)
		case <-ctx.Done():
			t.Fatalf("connect to nats-server %s: %v (%v)", s.region, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitJetStream waits until a stream can be created in every region: the
// super-cluster's meta group has a leader and knows every server.
func (g *natsGeo) waitJetStream(ctx context.Context, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, s := range g.servers {
		name := "READY_" + s.region
		for {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := s.js.CreateStream(cctx, jetstream.StreamConfig{Name: name, Subjects: []string{"ready." + s.region},
				Storage: jetstream.FileStorage, Placement: &jetstream.Placement{Cluster: s.region}})
			ccancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("JetStream in %s: %v (%v)", s.region, err, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
		if err := s.js.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
}

// cut cuts region off both ways, as e2e.Bed.CutRegion does: every
// connection into its gateway's link, and every connection its server
// makes through the others'.
func (g *natsGeo) cut(region string) {
	for _, s := range g.servers {
		if s.region == region {
			s.link.Cut()
		} else {
			s.link.CutFrom(region)
		}
	}
}

// restore ends cut(region).
func (g *natsGeo) restore(region string) {
	for _, s := range g.servers {
		if s.region == region {
			s.link.Restore()
		} else {
			s.link.RestoreFrom(region)
		}
	}
}

// natsRun is one measurement's streams, publisher and consumers: a stream
// in the origin, sourced by one stream in each other region, which a
// consumer there reads.
type natsRun struct {
	g       *natsGeo
	subject string
	origin  string
	copies  map[string]string // region -> its sourcing stream
	sends   *natsSends
	arrived map[string]*natsArrivals
	stops   []func()
}

// newRun creates the streams (the origin's in r1, and r2's and r3's
// sourcing it) and starts a consumer in r2 and r3.
func (g *natsGeo) newRun(ctx context.Context, t *testing.T) *natsRun {
	t.Helper()
	g.runs++
	r := &natsRun{g: g, subject: fmt.Sprintf("geo.run%d", g.runs), origin: fmt.Sprintf("ORIGIN_%d", g.runs),
		copies: map[string]string{}, sends: &natsSends{}, arrived: map[string]*natsArrivals{}}
	origin := g.servers[0]
	if _, err := origin.js.CreateStream(ctx, jetstream.StreamConfig{Name: r.origin, Subjects: []string{r.subject},
		Storage: jetstream.FileStorage, Placement: &jetstream.Placement{Cluster: origin.region}}); err != nil {
		t.Fatalf("stream %s in %s: %v", r.origin, origin.region, err)
	}
	for _, s := range g.servers[1:] {
		name := fmt.Sprintf("COPY_%s_%d", s.region, g.runs)
		if _, err := s.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Storage: jetstream.FileStorage,
			Placement: &jetstream.Placement{Cluster: s.region}, Sources: []*jetstream.StreamSource{{Name: r.origin}}}); err != nil {
			t.Fatalf("stream %s in %s sourcing %s: %v", name, s.region, r.origin, err)
		}
		r.copies[s.region] = name
		a := &natsArrivals{at: map[int64]time.Time{}}
		c, err := s.js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatalf("consumer of %s in %s: %v", name, s.region, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) { a.record(m.Data(), time.Now()) })
		if err != nil {
			t.Fatalf("consume %s in %s: %v", name, s.region, err)
		}
		r.stops = append(r.stops, cc.Stop)
		r.arrived[s.region] = a
	}
	return r
}

// close stops the consumers and deletes the run's streams.
func (r *natsRun) close(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, stop := range r.stops {
		stop()
	}
	for _, s := range r.g.servers[1:] {
		if err := s.js.DeleteStream(ctx, r.copies[s.region]); err != nil {
			t.Errorf("delete stream %s: %v", r.copies[s.region], err)
		}
	}
	if err := r.g.servers[0].js.DeleteStream(ctx, r.origin); err != nil {
		t.Errorf("delete stream %s: %v", r.origin, err)
	}
}

// natsSend is one publish: when it was made and when its ack came.
type natsSend struct {
	sentAt, ackedAt time.Time
	failed          bool
}

// natsSends are a publisher's sends, by message number.
type natsSends struct {
	mu sync.Mutex
	s  []natsSend
}

// snapshot copies the sends so far.
func (s *natsSends) snapshot() []natsSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]natsSend(nil), s.s...)
}

// acked is how many of the sends so far have an ack, and the numbers of
// the messages that do.
func (s *natsSends) acked() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for i, snd := range s.s {
		if !snd.ackedAt.IsZero() {
			out = append(out, int64(i))
		}
	}
	return out
}

// natsArrivals records when each message number first arrived in a
// region.
type natsArrivals struct {
	mu   sync.Mutex
	at   map[int64]time.Time
	dups int
}

// record notes the arrival of the message whose payload is b.
func (a *natsArrivals) record(b []byte, now time.Time) {
	n, err := natsNumber(b)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.at[n]; seen {
		a.dups++
		return
	}
	a.at[n] = now
}

// arrivedAt returns when message n arrived, if it did.
func (a *natsArrivals) arrivedAt(n int64) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[n]
	return at, ok
}

// count is how many of ns have arrived.
func (a *natsArrivals) count(ns []int64) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := 0
	for _, n := range ns {
		if _, ok := a.at[n]; ok {
			c++
		}
	}
	return c
}

// natsPayload is message n's bytes: "n|", then padding to size.
func natsPayload(n int64, size int) []byte {
	b := []byte(strconv.FormatInt(n, 10) + "|")
	return append(b, strings.Repeat("x", max(0, size-len(b)))...)
}

// natsNumber reads back the message number natsPayload put in b.
func natsNumber(b []byte) (int64, error) {
	head, _, ok := strings.Cut(string(b[:min(len(b), 24)]), "|")
	if !ok {
		return 0, fmt.Errorf("sidebyside: payload %.24q is not n|...", b)
	}
	return strconv.ParseInt(head, 10, 64)
}

// publish sends rate msg/s of e2e.GeoPayloadSize bytes to the run's
// subject in the origin, paced as Meridian's producers are (e2e.Paced),
// with async publishes whose acks one goroutine collects in order. It
// returns a function that stops the sending and waits for every ack.
func (r *natsRun) publish(ctx context.Context, t *testing.T, rate int) (stop func()) {
	t.Helper()
	js := r.g.servers[0].js
	futures := make(chan jetstream.PubAckFuture, 20000)
	loop, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(futures)
		err := e2e.Paced(loop, time.Second/time.Duration(rate), func(n int64) {
			r.sends.mu.Lock()
			r.sends.s = append(r.sends.s, natsSend{sentAt: time.Now()})
			r.sends.mu.Unlock()
			f, err := js.PublishAsync(r.subject, natsPayload(n, e2e.GeoPayloadSize))
			if err != nil {
				r.sends.mu.Lock()
				r.sends.s[n].failed = true
				r.sends.mu.Unlock()
				return
			}
			futures <- f
		})
		if err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		for f := range futures {
			select {
			case <-f.Ok():
				n, err := natsNumber(f.Msg().Data)
				if err != nil {
					t.Error(err)
					continue
				}
				r.sends.mu.Lock()
				r.sends.s[n].ackedAt = time.Now()
				r.sends.mu.Unlock()
			case err := <-f.Err():
				if !errors.Is(err, context.Canceled) {
					t.Logf("publish: %v", err)
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// start publishes (publish) and returns once the first message has
// arrived in both destinations: the measurements' window starts there,
// as Meridian's does.
func (r *natsRun) start(ctx context.Context, t *testing.T, rate int) (stop func()) {
	t.Helper()
	stop = r.publish(ctx, t, rate)
	for len(r.sends.acked()) == 0 {
		sleepCtx(ctx, t, 10*time.Millisecond)
	}
	for region := range r.arrived {
		r.waitArrived(ctx, t, region, []int64{0}, "the first message")
	}
	return stop
}

// waitArrived waits until every one of ns has arrived in region.
func (r *natsRun) waitArrived(ctx context.Context, t *testing.T, region string, ns []int64, what string) {
	t.Helper()
	a := r.arrived[region]
	for a.count(ns) < len(ns) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d messages arrived in %s: %v", what, a.count(ns), len(ns), region, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// linkBytes is how many bytes each region's gateway link carried in.
func (g *natsGeo) linkBytes() map[string]int64 {
	out := map[string]int64{}
	for _, s := range g.servers {
		out[s.region] = s.link.Bytes().Up
	}
	return out
}

// check fails the test unless every destination received each
// acknowledged message once, and its link carried at least the payload
// bytes replicated to it since before: no traffic went around the links.
func (r *natsRun) check(t *testing.T, acked []int64, before map[string]int64) {
	t.Helper()
	after := r.g.linkBytes()
	for region, a := range r.arrived {
		if got := a.count(acked); got != len(acked) {
			t.Errorf("NATS %s received %d of the %d acknowledged messages", region, got, len(acked))
		}
		a.mu.Lock()
		dups := a.dups
		a.mu.Unlock()
		if dups > 0 {
			t.Errorf("NATS %s received %d messages twice", region, dups)
		}
		in := after[region] - before[region]
		t.Logf("NATS %s's gateway link carried %d bytes in for %d replicated messages (%d payload bytes)", region, in, len(acked), len(acked)*e2e.GeoPayloadSize)
		if in < int64(len(acked)*e2e.GeoPayloadSize) {
			t.Errorf("NATS %s's link carried %d bytes towards it, less than the %d payload bytes replicated to it: replication went around the link", region, in, len(acked)*e2e.GeoPayloadSize)
		}
	}
}

// measureLag is e2e.GeoBed.MeasureLag for NATS, defined the same way:
// the origin publishes rate msg/s to a new stream, the window starts when
// the first message has arrived in both destinations and lasts window,
// and a lag is a message's first arrival at a consumer in r2 or r3 minus
// the time its publish was made.
func (g *natsGeo) measureLag(ctx context.Context, t *testing.T, rate int, window time.Duration) e2e.Lag {
	t.Helper()
	r := g.newRun(ctx, t)
	defer r.close(ctx, t)
	before := g.linkBytes()
	began := time.Now()
	stop := r.start(ctx, t, rate)
	steady := time.Now()
	sleepCtx(ctx, t, window)
	ran := time.Since(steady)
	stop()
	acked := r.sends.acked()
	for region := range r.arrived {
		r.waitArrived(ctx, t, region, acked, fmt.Sprintf("%d msg/s", rate))
	}
	r.check(t, acked, before)
	sends := r.sends.snapshot()
	out := e2e.Lag{Start: steady, Warmup: steady.Sub(began), Window: ran}
	for _, n := range acked {
		s := sends[n]
		if s.sentAt.Before(steady) || s.sentAt.Sub(steady) >= ran {
			continue
		}
		out.Publish = append(out.Publish, s.ackedAt.Sub(s.sentAt))
		for _, a := range r.arrived {
			at, _ := a.arrivedAt(n)
			out.Lags = append(out.Lags, at.Sub(s.sentAt))
		}
	}
	e2e.Percentile(out.Lags, 0) // sorts
	e2e.Percentile(out.Publish, 0)
	return out
}

// measureCatchUp is e2e.GeoBed.MeasureCatchUp for NATS: r2 cut off both
// ways for cut while r1 publishes rate msg/s, then restored; how long r2
// takes to hold every message r1 had acknowledged before the heal.
func (g *natsGeo) measureCatchUp(ctx context.Context, t *testing.T, rate int, cut time.Duration) e2e.CatchUp {
	t.Helper()
	r := g.newRun(ctx, t)
	defer r.close(ctx, t)
	before := g.linkBytes()
	stop := r.start(ctx, t, rate)
	g.cut("r2")
	sleepCtx(ctx, t, cut)
	pending := r.sends.acked()
	g.restore("r2")
	healAt := time.Now()
	dest := r.arrived["r2"]
	out := e2e.CatchUp{Backlog: len(pending) - dest.count(pending)}
	r.waitArrived(ctx, t, "r2", pending, "the catch-up")
	for _, n := range pending {
		if at, _ := dest.arrivedAt(n); at.Sub(healAt) > out.CaughtUp {
			out.CaughtUp = at.Sub(healAt)
		}
	}
	stop()
	acked := r.sends.acked()
	out.Resumed = out.CaughtUp
	dest.mu.Lock()
	for _, at := range dest.at {
		if d := at.Sub(healAt); d >= 0 && d < out.Resumed {
			out.Resumed = d
		}
	}
	dest.mu.Unlock()
	for region := range r.arrived {
		r.waitArrived(ctx, t, region, acked, "after the catch-up")
	}
	r.check(t, acked, before)
	return out
}

// sleepCtx waits d, a part of a schedule (not a wait for a condition).
func sleepCtx(ctx context.Context, t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}
