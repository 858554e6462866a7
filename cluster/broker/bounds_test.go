package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// gatedTopics holds every Lookup and Partitions call until open is closed,
// counting the calls in progress and the most seen at once.
type gatedTopics struct {
	*fakeTopics
	open          chan struct{}
	inFlight, max atomic.Int64
}

func gate(f *fakeTopics) *gatedTopics { return &gatedTopics{fakeTopics: f, open: make(chan struct{})} }

func (g *gatedTopics) hold(ctx context.Context) error {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedTopics) Lookup(ctx context.Context, t topology.TopicName, opts broker.LookupOptions) (broker.Location, error) {
	if err := g.hold(ctx); err != nil {
		return broker.Location{}, err
	}
	return g.fakeTopics.Lookup(ctx, t, opts)
}

func (g *gatedTopics) Partitions(ctx context.Context, t topology.TopicName) (int, error) {
	if err := g.hold(ctx); err != nil {
		return 0, err
	}
	return g.fakeTopics.Partitions(ctx, t)
}

// startGated starts a server on gated topics, and a raw client connected
// to it.
func startGated(t *testing.T, mutate func(*broker.Config)) (*testServer, *gatedTopics, *rawClient) {
	t.Helper()
	var g *gatedTopics
	s := startServerWith(t, mutate, func(f *fakeTopics) broker.Topics { g = gate(f); return g })
	rc := dialRaw(t, s.addr)
	rc.connect(20)
	return s, g, rc
}

func lookupCmd(req uint64) *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: pb.CommandLookupTopic_builder{
		Topic: proto.String("persistent://public/default/t"), RequestId: proto.Uint64(req)}.Build()}.Build()
}

func partitionsCmd(req uint64) *pb.BaseCommand {
	return pb.BaseCommand_builder{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: pb.CommandPartitionedTopicMetadata_builder{
		Topic: proto.String("persistent://public/default/orders"), RequestId: proto.Uint64(req)}.Build()}.Build()
}

// beforePong reads until a PONG and returns the commands before it.
func (c *rawClient) beforePong() []*pb.BaseCommand {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(receiveWait))
	defer c.nc.SetReadDeadline(time.Time{})
	var before []*pb.BaseCommand
	for {
		cmd, err := c.next()
		if err != nil {
			c.t.Fatalf("waiting for PONG: %v", err)
		}
		if cmd.GetType() == pb.BaseCommand_PONG {
			return before
		}
		before = append(before, cmd)
	}
}

var pingCmd = pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build()

// TestLookupBound: past the topics' lookup permits (the Service's
// MaxConcurrentLookups), a LOOKUP or a PARTITIONED_METADATA is answered
// TooManyRequests at once, with Pulsar's text, and counted; the ones in
// progress are answered when they end, and their permits serve the next.
func TestLookupBound(t *testing.T) {
	var g *gatedTopics
	s := startServerWith(t, nil, func(f *fakeTopics) broker.Topics {
		f.lookups = broker.NewLookupPermits(2)
		g = gate(f)
		return g
	})
	rc := dialRaw(t, s.addr)
	rc.connect(20)
	rc.send(lookupCmd(1))
	rc.send(partitionsCmd(2))
	testkit.WaitFor(t, "two lookups in progress", func() bool { return g.inFlight.Load() == 2 })

	rc.send(lookupCmd(3))
	resp := rc.expect(pb.BaseCommand_LOOKUP_RESPONSE).GetLookupTopicResponse()
	if resp.GetRequestId() != 3 || resp.GetResponse() != pb.CommandLookupTopicResponse_Failed ||
		resp.GetError() != pb.ServerError_TooManyRequests || resp.GetMessage() != "Failed due to too many pending lookup requests" {
		t.Fatalf("third lookup: %v, want request 3 failed with TooManyRequests", resp)
	}
	rc.send(partitionsCmd(4))
	pm := rc.expect(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE).GetPartitionMetadataResponse()
	if pm.GetRequestId() != 4 || pm.GetError() != pb.ServerError_TooManyRequests {
		t.Fatalf("partitioned metadata past the bound: %v, want TooManyRequests", pm)
	}
	if n := s.LimitCounts().LookupsRefused; n != 2 {
		t.Fatalf("LookupsRefused = %d, want 2", n)
	}

	close(g.open)
	answered := map[uint64]bool{}
	for len(answered) < 2 {
		cmd, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		switch cmd.GetType() {
		case pb.BaseCommand_LOOKUP_RESPONSE:
			r := cmd.GetLookupTopicResponse()
			answered[r.GetRequestId()] = r.GetResponse() == pb.CommandLookupTopicResponse_Connect
		case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
			r := cmd.GetPartitionMetadataResponse()
			answered[r.GetRequestId()] = r.GetPartitions() == 3
		}
	}
	if !answered[1] || !answered[2] {
		t.Fatalf("the lookups in progress were answered %v, want both served", answered)
	}
	rc.send(lookupCmd(5))
	if r := rc.expect(pb.BaseCommand_LOOKUP_RESPONSE).GetLookupTopicResponse(); r.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("a lookup once the permits are back: %v", r)
	}
}

// TestRequestsPerConnectionBound: at MaxRequestsPerConnection requests in
// progress the connection is not read (a PING behind them waits) until one
// ends, and no more than the bound ever run at once.
func TestRequestsPerConnectionBound(t *testing.T) {
	s, g, rc := startGated(t, func(c *broker.Config) { c.MaxRequestsPerConnection = 2 })
	for req := uint64(1); req <= 3; req++ {
		rc.send(lookupCmd(req))
	}
	rc.send(pingCmd)
	testkit.WaitFor(t, "the reader to pause behind two requests", func() bool {
		return g.inFlight.Load() == 2 && s.LimitCounts().ReadPauses == 1
	})
	close(g.open)
	if len(rc.beforePong()) == 0 {
		t.Fatal("PONG before any lookup was answered: the reader read past the bound")
	}
	if m := g.max.Load(); m > 2 {
		t.Fatalf("%d requests ran at once, bound 2", m)
	}
}

// TestConnectionBounds: past MaxConnections, and past MaxConnectionsPerIP
// from one address, a new connection is answered Pulsar's ERROR
// (NotAllowedError, before CONNECT) and closed, and counted; a place freed
// is taken again.
func TestConnectionBounds(t *testing.T) {
	s := startServer(t, func(c *broker.Config) { c.MaxConnections, c.MaxConnectionsPerIP = 3, 2 })
	dialFrom := func(ip string) *rawClient {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &rawClient{t: t, nc: nc, r: wire.NewReader(nc, 0), w: wire.NewWriter(nc)}
	}
	refused := func(rc *rawClient, why string) {
		t.Helper()
		cmd := rc.expect(pb.BaseCommand_ERROR).GetError()
		if cmd.GetError() != pb.ServerError_NotAllowedError || cmd.GetRequestId() != ^uint64(0) || !strings.HasPrefix(cmd.GetMessage(), why) {
			t.Fatalf("refusal: %v, want NotAllowedError %q", cmd, why)
		}
		if !rc.closed() {
			t.Fatal("a refused connection stayed open")
		}
	}
	a := dialFrom("127.0.0.1")
	a.connect(20)
	dialFrom("127.0.0.1").connect(20)
	refused(dialFrom("127.0.0.1"), "Reached the maximum number of connections on address 127.0.0.1")
	dialFrom("127.0.0.2").connect(20)
	refused(dialFrom("127.0.0.3"), "Reached the maximum number of connections")
	if n := s.LimitCounts().ConnectionsRefused; n != 2 {
		t.Fatalf("ConnectionsRefused = %d, want 2", n)
	}
	a.nc.Close()
	testkit.WaitFor(t, "the closed connection to leave", func() bool { return s.Connections() == 2 })
	dialFrom("127.0.0.1").connect(20)
}

// TestConnectFrameBound: before CONNECT a client may send only a small
// frame, so a client that has not said who it is cannot make the broker
// wait for (and buffer) a message-sized frame; it is closed at once, long
// before ConnectTimeout, and CONNECT and large frames after it still work.
func TestConnectFrameBound(t *testing.T) {
	s := startServer(t, func(c *broker.Config) { c.ConnectTimeout = time.Minute })
	c := dialRaw(t, s.addr)
	if _, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if !c.closed() {
		t.Fatal("a connection that declared a 1 MiB frame before CONNECT stayed open")
	}
	testkit.WaitFor(t, "the refused connection to leave", func() bool { return s.Connections() == 0 })
}

// TestPendingPublishesPauseReading: a connection at MaxPendingPublishes
// SENDs without their receipt is not read (a PING behind them waits), and
// is read again once half of them are answered; nothing fails.
func TestPendingPublishesPauseReading(t *testing.T) {
	storage := newStorage(t)
	r := startBroker(t, storage, func(c *brokertest.Config) { c.Broker.MaxPendingPublishes = 4 })
	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topicFor(t)), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("p"),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)

	// Every add is answered 2 s late: the receipts come well after the
	// PONG would, if the PING were read.
	storage.Bookies.SetDelay(func(_, _ string, op ledgertest.Op, _ int64, back bool) time.Duration {
		if op == ledgertest.OpAdd && back {
			return 2 * time.Second
		}
		return 0
	})
	for seq := range uint64(4) {
		rc.sendMessage(1, "p", seq, []byte(fmt.Sprint("m", seq)))
	}
	rc.send(pingCmd)
	before := rc.beforePong()
	for _, cmd := range before {
		if cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("got %v, want receipts and a PONG", cmd)
		}
	}
	receipts := len(before)
	if receipts < 2 {
		t.Fatalf("PONG after %d receipts, want at least 2: the reader resumes only at half the bound", receipts)
	}
	if n := r.Server().LimitCounts().ReadPauses; n != 1 {
		t.Fatalf("ReadPauses = %d, want 1", n)
	}
	for ; receipts < 4; receipts++ {
		rc.expect(pb.BaseCommand_SEND_RECEIPT)
	}
}

// TestTopicLoadsQueue: with one topic load at a time, producers and
// consumers created at once on many new topics all succeed, their replies
// held while their loads wait.
func TestTopicLoadsQueue(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Service.MaxConcurrentTopicLoads = 1 })
	c := newClient(t, r.ServiceURL())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		topic := topicFor(t, fmt.Sprint(i))
		wg.Go(func() {
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err == nil {
				p.Close()
			}
			errs <- err
		})
		wg.Go(func() {
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err == nil {
				cons.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 8 loads waited for the one slot", r.Service().TopicLoadsQueued())
}

func TestServiceConfigValidateTopicLoads(t *testing.T) {
	cfg := broker.DefaultServiceConfig("r", "b", "pulsar://localhost:6650")
	if cfg.MaxConcurrentTopicLoads != 5000 {
		t.Fatalf("MaxConcurrentTopicLoads %d, want Pulsar's 5000", cfg.MaxConcurrentTopicLoads)
	}
	cfg.MaxConcurrentTopicLoads = 0
	if err := cfg.Validate(); !errors.Is(err, broker.ErrInvalidConfig) {
		t.Fatalf("no topic load slots: Validate() = %v", err)
	}
}

func TestServiceConfigValidateClock(t *testing.T) {
	cfg := broker.DefaultServiceConfig("r", "b", "pulsar://localhost:6650")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Clock = nil
	if err := cfg.Validate(); !errors.Is(err, broker.ErrInvalidConfig) {
		t.Fatalf("no clock: Validate() = %v", err)
	}
}

func TestServiceConfigValidateLookups(t *testing.T) {
	cfg := broker.DefaultServiceConfig("r", "b", "pulsar://localhost:6650")
	if cfg.MaxConcurrentLookups != 50_000 {
		t.Fatalf("MaxConcurrentLookups %d, want Pulsar's 50000", cfg.MaxConcurrentLookups)
	}
	cfg.MaxConcurrentLookups = 0
	if err := cfg.Validate(); !errors.Is(err, broker.ErrInvalidConfig) {
		t.Fatalf("no lookup permits: Validate() = %v", err)
	}
}

// TestLookupPermits: Acquire hands out at most its bound, refuses the next
// with TooManyRequests and counts it, and a permit given back (twice, by a
// careless caller, counts once) serves the next.
func TestLookupPermits(t *testing.T) {
	p := broker.NewLookupPermits(2)
	r1, err := p.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(); !errors.Is(err, wire.ErrTooManyRequests) {
		t.Fatalf("third permit: %v, want TooManyRequests", err)
	}
	r1()
	r1()
	if _, err := p.Acquire(); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := p.Acquire(); !errors.Is(err, wire.ErrTooManyRequests) {
		t.Fatalf("a double release freed two permits: %v", err)
	}
	if n := p.Refused(); n != 2 {
		t.Fatalf("Refused() = %d, want 2", n)
	}
}

// deafTopics holds every Lookup until open is closed, heeding no context:
// a call that outlives its connection.
type deafTopics struct {
	*fakeTopics
	entered chan struct{}
	open    chan struct{}
}

func (d *deafTopics) Lookup(ctx context.Context, t topology.TopicName, opts broker.LookupOptions) (broker.Location, error) {
	d.entered <- struct{}{}
	<-d.open
	return d.fakeTopics.Lookup(ctx, t, opts)
}

// TestServerCloseBounded: Close returns by its context's deadline, with
// ErrCloseIncomplete, while a request is stuck in a call that ignores the
// connection's context; once the call returns, the next Close finishes.
func TestServerCloseBounded(t *testing.T) {
	var d *deafTopics
	s := startServerWith(t, nil, func(f *fakeTopics) broker.Topics {
		d = &deafTopics{fakeTopics: f, entered: make(chan struct{}, 1), open: make(chan struct{})}
		return d
	})
	rc := dialRaw(t, s.addr)
	rc.connect(20)
	rc.send(lookupCmd(1))
	<-d.entered
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, broker.ErrCloseIncomplete) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a request stuck: %v, want ErrCloseIncomplete and the deadline", err)
	}
	close(d.open) // the cleanup's Close then finishes
}

// bigLookups answers every Lookup with a 64 KiB service URL: replies large
// enough for the reply queue's byte bound to matter before its count.
type bigLookups struct{ *fakeTopics }

func (b bigLookups) Lookup(context.Context, topology.TopicName, broker.LookupOptions) (broker.Location, error) {
	return broker.Location{ServiceURL: "pulsar://" + strings.Repeat("x", 64<<10)}, nil
}

// TestReplyQueueByteBound: a client that asks for large replies and never
// reads fills the reply queue's bytes (WriteQueueBytes) long before its
// count (WriteQueue) and is disconnected then, not at the write deadline.
func TestReplyQueueByteBound(t *testing.T) {
	s := startServerWith(t, func(c *broker.Config) {
		c.WriteQueueBytes = 256 << 10
		c.KeepAliveInterval = time.Minute // the write deadline: far past the wait below
	}, func(f *fakeTopics) broker.Topics { return bigLookups{f} })
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, nc: nc, r: wire.NewReader(nc, 0), w: wire.NewWriter(nc)}
	rc.connect(20)
	testkit.WaitFor(t, "the connection", func() bool { return s.Connections() == 1 })
	// 500 replies of 64 KiB: 32 MiB, more than loopback's socket buffers
	// hold and 4 times the bound past them, in half the count bound.
	for i := range 500 {
		if err := rc.w.WriteCommand(lookupCmd(uint64(i + 1))); err != nil {
			break // the broker closed the connection already
		}
	}
	if err := rc.w.Flush(); err != nil {
		t.Logf("flush: %v (the broker closed the connection already)", err)
	}
	testkit.WaitFor(t, "the broker to close the connection that reads none of its replies", func() bool { return s.Connections() == 0 })
}
