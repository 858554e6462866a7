package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// fakeTopics answers from a table: partition counts by canonical name, and
// every topic served at url.
type fakeTopics struct {
	url        string
	partitions map[string]int
	lookups    *broker.LookupPermits
}

func (f *fakeTopics) LookupPermits() *broker.LookupPermits { return f.lookups }

func (f *fakeTopics) Lookup(_ context.Context, t topology.TopicName, _ broker.LookupOptions) (broker.Location, error) {
	if t.Namespace == "missing" {
		return broker.Location{}, fmt.Errorf("%w: namespace %s", wire.ErrTopicNotFound, t.NamespaceName())
	}
	return broker.Location{ServiceURL: f.url}, nil
}

func (f *fakeTopics) Partitions(_ context.Context, t topology.TopicName) (int, error) {
	if t.Namespace == "missing" {
		return 0, fmt.Errorf("%w: namespace %s", wire.ErrTopicNotFound, t.NamespaceName())
	}
	return f.partitions[t.String()], nil
}

func (f *fakeTopics) Topic(context.Context, topology.TopicName, bool) (*broker.Topic, error) {
	return nil, fmt.Errorf("%w: no topics here", wire.ErrServiceNotReady)
}

func (f *fakeTopics) TopicsOfNamespace(context.Context, string, string) ([]string, error) {
	return nil, nil
}

func (f *fakeTopics) Schema(context.Context, topology.TopicName, []byte) (schema.Info, schema.Version, error) {
	return schema.Info{}, 0, fmt.Errorf("%w: no schemas here", wire.ErrTopicNotFound)
}

func (f *fakeTopics) GetOrCreateSchema(context.Context, topology.TopicName, *pb.Schema) (schema.Version, error) {
	return 0, fmt.Errorf("%w: no schemas here", wire.ErrTopicNotFound)
}

type testServer struct {
	*broker.Server
	addr string
}

func startServer(t *testing.T, mutate func(*broker.Config)) *testServer {
	t.Helper()
	return startServerWith(t, mutate, nil)
}

// startServerWith starts a server on the fake topics, or on what wrap
// makes of them.
func startServerWith(t *testing.T, mutate func(*broker.Config), wrap func(*fakeTopics) broker.Topics) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "pulsar://" + ln.Addr().String()
	cfg := broker.DefaultConfig(url)
	if mutate != nil {
		mutate(&cfg)
	}
	fake := &fakeTopics{url: url, partitions: map[string]int{"persistent://public/default/orders": 3},
		lookups: broker.NewLookupPermits(broker.DefaultServiceConfig("r", "b", url).MaxConcurrentLookups)}
	var topics broker.Topics = fake
	if wrap != nil {
		topics = wrap(fake)
	}
	s, err := broker.NewServer(cfg, topics, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; !errors.Is(err, broker.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String()}
}

func TestPartitionsWithPulsarClientGo(t *testing.T) {
	s := startServer(t, nil)
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:              "pulsar://" + s.addr,
		OperationTimeout: 5 * time.Second,
		Logger:           pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.TopicPartitions("persistent://public/default/orders")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"persistent://public/default/orders-partition-0",
		"persistent://public/default/orders-partition-1",
		"persistent://public/default/orders-partition-2",
	}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Fatalf("TopicPartitions = %v, want %v", parts, want)
	}
	// A short name reaches the broker normalised: it answers for public/default.
	if parts, err := client.TopicPartitions("orders"); err != nil || len(parts) != 3 {
		t.Fatalf("short name: %v, %v", parts, err)
	}
	if parts, err := client.TopicPartitions("persistent://public/default/plain"); err != nil || len(parts) != 1 {
		t.Fatalf("non-partitioned topic: %v, %v", parts, err)
	}
	if _, err := client.TopicPartitions("persistent://public/missing/x"); err == nil {
		t.Fatal("a failed lookup reached the client as success")
	}
}

// rawClient speaks the protocol by hand, for what pulsar-client-go cannot
// be made to do.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
	w  *wire.Writer
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, r: wire.NewReader(nc, 0), w: wire.NewWriter(nc)}
}

func (c *rawClient) send(cmd *pb.BaseCommand) {
	c.t.Helper()
	if err := c.w.WriteCommand(cmd); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next command other than a PING (which it answers).
func (c *rawClient) next() (*pb.BaseCommand, error) {
	for {
		var f wire.Frame
		if err := c.r.ReadFrame(&f); err != nil {
			return nil, err
		}
		if f.Command.GetType() != pb.BaseCommand_PING {
			return f.Command, nil
		}
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build())
	}
}

func (c *rawClient) connect(version int32) *pb.CommandConnected {
	c.t.Helper()
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: pb.CommandConnect_builder{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(version),
	}.Build()}.Build())
	cmd, err := c.next()
	if err != nil || cmd.GetType() != pb.BaseCommand_CONNECTED {
		c.t.Fatalf("after CONNECT: %v, %v", cmd, err)
	}
	return cmd.GetConnected()
}

// closed reports whether the server closed the connection (reading returns
// an error other than a timeout).
func (c *rawClient) closed() bool {
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, err := c.next(); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func TestConnectAndLookup(t *testing.T) {
	s := startServer(t, nil)
	c := dialRaw(t, s.addr)
	if got := c.connect(20).GetProtocolVersion(); got != 20 {
		t.Fatalf("answered v%d to a v20 client", got)
	}
	if got := dialRaw(t, s.addr).connect(99).GetProtocolVersion(); got != int32(pb.ProtocolVersion_v21) {
		t.Fatalf("answered v%d to a v99 client, want the server's v21", got)
	}

	lookup := func(id uint64, topic string) *pb.CommandLookupTopicResponse {
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: pb.CommandLookupTopic_builder{
			Topic: proto.String(topic), RequestId: proto.Uint64(id),
		}.Build()}.Build())
		cmd, err := c.next()
		if err != nil || cmd.GetType() != pb.BaseCommand_LOOKUP_RESPONSE {
			t.Fatalf("lookup %s: %v, %v", topic, cmd, err)
		}
		return cmd.GetLookupTopicResponse()
	}
	ok := lookup(1, "my-topic")
	if ok.GetRequestId() != 1 || ok.GetResponse() != pb.CommandLookupTopicResponse_Connect ||
		ok.GetBrokerServiceUrl() != "pulsar://"+s.addr || !ok.GetAuthoritative() {
		t.Fatalf("lookup answered %v", ok)
	}
	for _, tc := range []struct {
		topic string
		code  pb.ServerError
	}{
		{"a/b", pb.ServerError_InvalidTopicName},
		{"persistent://public/missing/x", pb.ServerError_TopicNotFound},
	} {
		failed := lookup(2, tc.topic)
		if !failed.HasResponse() || failed.GetResponse() != pb.CommandLookupTopicResponse_Failed || failed.GetError() != tc.code {
			t.Fatalf("lookup %s answered %v, want Failed with %v", tc.topic, failed, tc.code)
		}
	}
}

// TestKeepAlive drives the keep-alive with a fake clock: at each interval
// the server pings both clients; the one that answers stays connected, and
// the silent one is closed at the first check after two intervals without
// a frame from it.
func TestKeepAlive(t *testing.T) {
	clock := clockwork.NewFakeClock()
	const interval = 200 * time.Millisecond // passed on the fake clock only
	s := startServer(t, func(c *broker.Config) { c.KeepAliveInterval, c.Clock = interval, clock })
	alive := dialRaw(t, s.addr)
	alive.connect(20)
	silent := dialRaw(t, s.addr)
	silent.connect(20)
	// The deadlines bound a failure only.
	alive.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	silent.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := clock.BlockUntilContext(t.Context(), 2); err != nil { // each connection's keep-alive ticker
		t.Fatal(err)
	}

	// roundTrip has the alive client send a PING and read up to the PONG
	// (answering the server's pings on the way): the server has then read
	// a frame from it at the clock's current time.
	roundTrip := func() {
		t.Helper()
		alive.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
		if cmd, err := alive.next(); err != nil || cmd.GetType() != pb.BaseCommand_PONG {
			t.Fatalf("a client answering pings: %v, %v, want PONG", cmd, err)
		}
	}
	// A check finds the silent client idle for one interval, then two:
	// not more than two, so it is pinged each time.
	for i := 1; i <= 2; i++ {
		clock.Advance(interval)
		roundTrip()
		var f wire.Frame
		if err := silent.r.ReadFrame(&f); err != nil || f.Command.GetType() != pb.BaseCommand_PING {
			t.Fatalf("silent client at interval %d: %v, %v, want PING", i, f.Command, err)
		}
	}
	clock.Advance(interval)
	roundTrip()
	var f wire.Frame
	err := silent.r.ReadFrame(&f)
	if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
		t.Fatalf("a client silent for three intervals: %v, %v; want the connection closed", f.Command, err)
	}
	roundTrip() // still connected
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	s := startServer(t, func(c *broker.Config) {
		c.ConnectTimeout = 200 * time.Millisecond
		c.MaxMessageSize = 64 << 10
	})
	bystander := dialRaw(t, s.addr)
	bystander.connect(20)

	frame := func(cmd *pb.BaseCommand) []byte {
		b, err := wire.AppendCommand(nil, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	connect := frame(pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: pb.CommandConnect_builder{
		ClientVersion: proto.String("raw"), ProtocolVersion: proto.Int32(20)}.Build()}.Build())
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"oversized frame", append(connect, 0, 0x10, 0, 0, 0, 0, 0, 0)},
		{"command before CONNECT", frame(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())},
		{"unsupported command", append(connect, frame(pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(),
			Send: pb.CommandSend_builder{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)}.Build()}.Build())...)},
		{"nothing at all (connect timeout)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.addr)
			if _, err := c.nc.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if !c.closed() {
				t.Fatal("connection still open")
			}
		})
	}
	// The bystander is still served.
	bystander.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
	if cmd, err := bystander.next(); err != nil || cmd.GetType() != pb.BaseCommand_PONG {
		t.Fatalf("bystander after bad input elsewhere: %v, %v", cmd, err)
	}
	testkit.WaitFor(t, "only the bystander to remain", func() bool { return s.Connections() == 1 })
}

func TestConfigValidate(t *testing.T) {
	if err := broker.DefaultConfig("pulsar://localhost:6650").Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*broker.Config){
		"no service URL":     func(c *broker.Config) { c.ServiceURL = "" },
		"keep-alive too low": func(c *broker.Config) { c.KeepAliveInterval = time.Millisecond },
		"connect timeout":    func(c *broker.Config) { c.ConnectTimeout = 0 },
		"message size":       func(c *broker.Config) { c.MaxMessageSize = 0 },
		"write queue":        func(c *broker.Config) { c.WriteQueue = 1 },
		"write queue bytes":  func(c *broker.Config) { c.WriteQueueBytes = 1 << 10 },
		"connections":        func(c *broker.Config) { c.MaxConnections = -1 },
		"connections per IP": func(c *broker.Config) { c.MaxConnectionsPerIP = -1 },
		"pending publishes":  func(c *broker.Config) { c.MaxPendingPublishes = -1 },
		"pending bytes":      func(c *broker.Config) { c.MaxPendingPublishBytes = -1 },
		"requests":           func(c *broker.Config) { c.MaxRequestsPerConnection = 0 },
		"no clock":           func(c *broker.Config) { c.Clock = nil },
	} {
		cfg := broker.DefaultConfig("pulsar://localhost:6650")
		mutate(&cfg)
		if err := cfg.Validate(); !errors.Is(err, broker.ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
}
