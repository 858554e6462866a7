package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// The tests of this file assert behaviour only (who is disconnected, who
// receives what, that closes return); the timing figures are the e2e
// tests'. Their bounds are small so that they run fast, and the deadlines
// they wait under only bound a failure.

// liveBounds are small liveness bounds: a peer that takes none of its bytes
// is found within seconds. They apply to the tests' pulsar-client-go
// clients too, which a loaded machine can stall for a second or more: so
// not smaller, or a live client is disconnected (and its Key_Shared keys
// move) as well.
func liveBounds(cfg *brokertest.Config) {
	cfg.Broker.KeepAliveInterval = 5 * time.Second
	cfg.Broker.WriteTimeout = 3 * time.Second
	cfg.Broker.MessageQueue = 64
	cfg.Broker.MessageQueueBytes = 256 << 10
	cfg.Service.CloseTimeout = 2 * time.Second
}

// frozenConsumer subscribes a raw consumer (id 1) with permits, then never
// reads again: a consumer process stopped in a debugger. Its socket's
// receive buffer is small, so that the broker's writes to it stall soon.
func frozenConsumer(t *testing.T, addr, topic, sub string, kind pb.CommandSubscribe_SubType, permits uint32) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	rc := &rawClient{t: t, nc: nc, r: wire.NewReader(nc, 0), w: wire.NewWriter(nc)}
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(topic), Subscription: proto.String(sub), SubType: kind.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), ConsumerName: proto.String("frozen"),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_SUCCESS)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
		ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(permits)}.Build()}.Build())
	return rc
}

// keepPinging sends a PING every interval on rc and reads nothing, so that
// the broker's silence check never finds rc: only a write deadline can. It
// stops when the connection fails, or at the end of the test.
func keepPinging(t *testing.T, rc *rawClient, interval time.Duration) {
	ping, err := wire.AppendCommand(nil, pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rc.nc.SetWriteDeadline(time.Now().Add(interval))
				if _, err := rc.nc.Write(ping); err != nil {
					return
				}
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
}

// publishLarge sends n messages of size bytes each, "<i>|" at their start,
// with key "k<i%keys>", and waits for every receipt.
func publishLarge(p pulsar.Producer, n, size, keys int) error {
	errs := make(chan error, n)
	for i := range n {
		payload := make([]byte, size)
		copy(payload, strconv.Itoa(i)+"|")
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: payload, Key: fmt.Sprint("k", i%keys)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	return nil
}

// seq is the index publishLarge put at the start of a payload.
func seq(t *testing.T, m pulsar.Message) int {
	t.Helper()
	b := m.Payload()
	for i, ch := range b {
		if ch == '|' {
			n, err := strconv.Atoi(string(b[:i]))
			if err != nil {
				t.Fatalf("payload %q...: %v", b[:i], err)
			}
			return n
		}
	}
	t.Fatalf("payload without index: %q", b[:min(len(b), 20)])
	return 0
}

// TestFrozenConsumerIsSkipped: a consumer whose connection stops reading
// is skipped, the other consumer of its subscription keeps receiving, the
// write deadline disconnects the frozen one (it keeps pinging, so the
// silence check cannot), and its messages are redelivered to the other.
// For Key_Shared, the frozen consumer's keys wait for its disconnect and
// then reach the other consumer in per-key order.
func TestFrozenConsumerIsSkipped(t *testing.T) {
	for _, kind := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared} {
		t.Run(kind.String(), func(t *testing.T) {
			r := startBroker(t, nil, liveBounds)
			c := newClient(t, r.ServiceURL())
			topic := topicFor(t)
			ptype := pulsar.Shared
			if kind == pb.CommandSubscribe_Key_Shared {
				ptype = pulsar.KeyShared
			}
			live := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: ptype,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
			clientConns := r.Server().Connections()
			frozen := frozenConsumer(t, brokerAddr(r), topic, "s", kind, 1000)
			keepPinging(t, frozen, 100*time.Millisecond)

			const n, size, keys = 300, 64 << 10, 16
			published := make(chan error, 1)
			go func() { published <- publishLarge(p, n, size, keys) }()

			got := map[int]bool{}
			lastOfKey := map[string]int{}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for len(got) < n {
				m, err := live.Receive(ctx)
				if err != nil {
					t.Fatalf("live consumer has %d of %d messages: %v", len(got), n, err)
				}
				i := seq(t, m)
				if kind == pb.CommandSubscribe_Key_Shared {
					if last, ok := lastOfKey[m.Key()]; ok && i < last {
						t.Fatalf("key %s: message %d after %d", m.Key(), i, last)
					}
					lastOfKey[m.Key()] = i
				}
				got[i] = true
				live.Ack(m)
			}
			if err := <-published; err != nil {
				t.Fatal(err)
			}
			// The frozen consumer's messages could only reach the live one
			// through its disconnection.
			testkit.WaitFor(t, "the frozen consumer's disconnection", func() bool {
				return r.Server().Connections() == clientConns
			})
		})
	}
}

// TestHalfASendFrame: a producer that sends half a SEND frame and stops
// holds up no other producer of the topic, and the silence check
// disconnects it: on the third keep-alive tick after its last whole frame,
// the first at which it has been silent for more than two intervals, and
// not before. The protocol server runs on a fake clock, so the test moves
// time tick by tick instead of waiting out real intervals.
func TestHalfASendFrame(t *testing.T) {
	const interval = 30 * time.Second
	clock := clockwork.NewFakeClock()
	r := startBroker(t, nil, func(cfg *brokertest.Config) {
		liveBounds(cfg)
		cfg.Broker.KeepAliveInterval = interval
		cfg.Broker.Clock = clock
	})
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	clientConns := r.Server().Connections()

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)
	msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{
		ProducerName: proto.String("half"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli())),
	}.Build(), make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	frame, err := wire.AppendPayloadCommand(nil, pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0), NumMessages: proto.Int32(1)}.Build()}.Build(), nil, msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.nc.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}

	produce(t, p, "m", 20)
	for i := range 20 {
		if m := receive(t, cons); string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("got %q, want m%d", m.Payload(), i)
		}
	}

	// Every connection's keep-alive ticker runs before time moves, so that
	// each ticks at whole intervals from the connection's last frame.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, clientConns+1); err != nil {
		t.Fatalf("waiting for the connections' keep-alive tickers: %v", err)
	}
	// nextFrame reads rc's next frame without answering a PING, which
	// would count as a frame from the peer; the deadline only bounds a
	// failure.
	nextFrame := func() (pb.BaseCommand_Type, error) {
		rc.nc.SetReadDeadline(time.Now().Add(receiveWait))
		var f wire.Frame
		if err := rc.r.ReadFrame(&f); err != nil {
			return 0, err
		}
		return f.Command.GetType(), nil
	}
	for tick := 1; tick <= 2; tick++ {
		clock.Advance(interval)
		// Silent for tick intervals, not more than two: pinged, not closed.
		if typ, err := nextFrame(); err != nil || typ != pb.BaseCommand_PING {
			t.Fatalf("tick %d: the half-frame producer got %v, %v; want a PING", tick, typ, err)
		}
		// A round trip on the client's connection, so that its silence
		// never reaches the bound, whenever its PONGs arrive.
		produce(t, p, fmt.Sprint("tick", tick), 1)
	}
	clock.Advance(interval)
	typ, err := nextFrame()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("tick 3: the half-frame producer's connection is still open (read %v, %v)", typ, err)
	}
	testkit.WaitFor(t, "the half-frame producer's disconnection", func() bool {
		return r.Server().Connections() == clientConns
	})
}

// TestClosesWithAFrozenPeer: with a frozen consumer whose writes stall
// (and a write deadline far away), unloading its topic and closing the
// broker return within their bounds.
func TestClosesWithAFrozenPeer(t *testing.T) {
	r := startBroker(t, nil, func(cfg *brokertest.Config) {
		liveBounds(cfg)
		cfg.Broker.KeepAliveInterval = 10 * time.Minute
		cfg.Broker.WriteTimeout = 0 // the keep-alive interval
	})
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	live := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	frozenConsumer(t, brokerAddr(r), topic, "s", pb.CommandSubscribe_Shared, 1000)

	const n = 200
	if err := publishLarge(p, n, 64<<10, 1); err != nil {
		t.Fatal(err)
	}
	// The live consumer takes all it is given; the frozen one holds the
	// rest, in its queue and stalled socket.
	received := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := live.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		received++
		live.Ack(m)
	}
	if received >= n {
		t.Fatalf("the live consumer received all %d messages: the frozen one took none", n)
	}

	start := time.Now()
	r.Service().Unload(mustTopic(t, topic))
	if took := time.Since(start); took > 2*time.Second+5*time.Second {
		t.Fatalf("unload took %v with a frozen consumer, bound 2s", took)
	}
	start = time.Now()
	r.Close()
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("broker close took %v with a frozen consumer", took)
	}
}
