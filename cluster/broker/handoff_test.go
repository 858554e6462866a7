package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// handOffLoad is a producer sending and a consumer receiving on one
// topic while the test moves the topic's bundle: it records every send
// error and every delivery.
type handOffLoad struct {
	t     *testing.T
	total int

	sent     atomic.Int64 // receipts
	sendErrs atomic.Int64
	firstErr atomic.Value
	done     chan struct{} // closed when every send is answered

	mu       sync.Mutex
	received map[string]int // payload -> deliveries
}

// handOffQueue is the consumer's receiver queue. The consumer acks each
// message and waits for the broker's answer before taking the next, so
// every ack of a message taken before the old owner's seal counts; only
// the few it takes from its queue between the seal and CLOSE_CONSUMER are
// acked too late and delivered again by the new owner. A redelivery storm
// (cursor positions not persisted at close) would deliver again what was
// acked since the cursor's last periodic persist.
const handOffQueue = 100

// handOffBatch bounds the producer's batches: a consumer is sent whole
// batches, whatever its permits, so big ones would stretch the bound
// handOffQueue sets.
const handOffBatch = 10

// startHandOffLoad sends total messages asynchronously through c and
// consumes them all on subscription "s". The producer batches: an
// unbatched pulsar-client-go v0.19.0 producer that reconnects while it
// sends races with itself (grabCnx writes producerName and encryptor,
// which internalSingleSend reads on another goroutine), and the race
// detector fails the test for it; the batch path reads neither.
func startHandOffLoad(t *testing.T, c pulsar.Client, topic string, total int) *handOffLoad {
	l := &handOffLoad{t: t, total: total, done: make(chan struct{}), received: make(map[string]int)}
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: handOffQueue,
		AckWithResponse: true})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, SendTimeout: time.Minute, BatchingMaxMessages: handOffBatch})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			m, err := cons.Receive(ctx)
			if err != nil {
				return
			}
			l.mu.Lock()
			l.received[string(m.Payload())]++
			l.mu.Unlock()
			_ = cons.Ack(m) // refused after the seal: delivered again
		}
	})
	wg.Go(func() {
		var answered sync.WaitGroup
		for i := range total {
			answered.Add(1)
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					defer answered.Done()
					if err != nil {
						l.firstErr.CompareAndSwap(nil, err)
						l.sendErrs.Add(1)
						return
					}
					l.sent.Add(1)
				})
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // a steady stream, not one burst
			}
		}
		answered.Wait()
		close(l.done)
	})
	return l
}

// check waits for every send to be answered and every message to arrive,
// and fails on a send error, a lost message or a redelivery storm.
func (l *handOffLoad) check() {
	t := l.t
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("sends still unanswered: %d of %d receipted", l.sent.Load(), l.total)
	}
	if n := l.sendErrs.Load(); n > 0 {
		t.Fatalf("%d send errors, the first: %v", n, l.firstErr.Load())
	}
	testkit.WaitFor(t, "every message delivered", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.received) == l.total
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	again := 0
	var dups []string
	for m, n := range l.received {
		again += n - 1
		if n > 1 {
			dups = append(dups, m)
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		t.Logf("redelivered: %s .. %s", dups[0], dups[len(dups)-1])
	}
	// See handOffQueue: what the queue held when dispatch stopped, at
	// most, and a batch delivered past the last permit; twice, when the
	// client subscribed twice for the move (a SEND crossed the
	// CLOSE_PRODUCER, so the connection closed too, and pulsar-client-go
	// reconnects for each: TestSubscribeAgainRedelivers).
	if again > 2*(handOffQueue+handOffBatch) {
		t.Fatalf("%d redeliveries of %d messages: a redelivery storm", again, l.total)
	}
	t.Logf("%d messages, %d redelivered after the move", l.total, again)
}

// storedOnce reads topic from the start and fails if it holds a message
// twice or misses one: the hand-off stores each SEND once, even without
// deduplication.
func storedOnce(t *testing.T, c pulsar.Client, topic string, total int) {
	t.Helper()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := make(map[string]pulsar.MessageID)
	for range total {
		m := next(t, r)
		if first, ok := seen[string(m.Payload())]; ok {
			t.Fatalf("%q stored twice: at %v and at %v", m.Payload(), first, m.ID())
		}
		seen[string(m.Payload())] = m.ID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if m, err := r.Next(ctx); err == nil {
		t.Fatalf("stored more than %d messages: %q", total, m.Payload())
	}
}

// rawSession is a raw producer and a raw consumer (no permits, so it
// receives nothing) on topic, to read the CLOSE frames a hand-off sends.
func rawSession(t *testing.T, r *brokertest.Broker, topic string) *rawClient {
	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(7), RequestId: proto.Uint64(1)}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(topic), Subscription: proto.String("raw"), SubType: pb.CommandSubscribe_Shared.Enum(),
		ConsumerId: proto.Uint64(8), RequestId: proto.Uint64(2), ConsumerName: proto.String("raw"),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_SUCCESS)
	return rc
}

// expectAssigned reads rc until it has seen CLOSE_PRODUCER and
// CLOSE_CONSUMER, and fails unless both send the client to serviceURL.
func expectAssigned(t *testing.T, rc *rawClient, serviceURL string) {
	t.Helper()
	rc.nc.SetReadDeadline(time.Now().Add(time.Minute))
	defer rc.nc.SetReadDeadline(time.Time{})
	var producer, consumer bool
	for !producer || !consumer {
		cmd, err := rc.next()
		if err != nil {
			t.Fatalf("waiting for the CLOSE frames: %v", err)
		}
		switch cmd.GetType() {
		case pb.BaseCommand_CLOSE_PRODUCER:
			if got := cmd.GetCloseProducer().GetAssignedBrokerServiceUrl(); got != serviceURL {
				t.Fatalf("CLOSE_PRODUCER assigns %q, want %q", got, serviceURL)
			}
			producer = true
		case pb.BaseCommand_CLOSE_CONSUMER:
			if got := cmd.GetCloseConsumer().GetAssignedBrokerServiceUrl(); got != serviceURL {
				t.Fatalf("CLOSE_CONSUMER assigns %q, want %q", got, serviceURL)
			}
			consumer = true
		}
	}
}

// mustOwn fails unless r owns topic's bundle (claiming it when nobody
// does, as a first lookup through r does), and returns the topic's name.
func mustOwn(t *testing.T, r *brokertest.Broker, topic string) topology.TopicName {
	t.Helper()
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if owner, mine, err := r.Service().Owner(ctx, tn); err != nil || !mine {
		t.Fatalf("owner of %s: %+v (mine %v, err %v), want %s", topic, owner, mine, err, r.ID())
	}
	return tn
}

// ownedBy fails unless r owns topic's bundle and serves the topic, and
// from does not serve it.
func ownedBy(t *testing.T, r, from *brokertest.Broker, topic string) {
	t.Helper()
	tn := mustOwn(t, r, topic)
	if slices.Contains(from.Service().Loaded(), tn.String()) {
		t.Fatalf("%s still loaded on %s", topic, from.ID())
	}
	if !slices.Contains(r.Service().Loaded(), tn.String()) {
		t.Fatalf("%s not loaded on %s", topic, r.ID())
	}
}

// claimOn makes broker r the owner of topic's bundle and returns it.
func claimOn(t *testing.T, r *brokertest.Broker, topic string) topology.Bundle {
	t.Helper()
	b, err := r.Service().Bundle(mustOwn(t, r, topic))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// underLoad is a topic claimed by one broker, with a handOffLoad on it
// through client c and a raw session on its owner, once a third of the
// messages are receipted: the moment a test moves the bundle.
type underLoad struct {
	topic  string
	bundle topology.Bundle
	c      pulsar.Client
	load   *handOffLoad
	raw    *rawClient
}

// startUnderLoad claims topic on owner and starts total messages through
// a client of serviceURL.
func startUnderLoad(t *testing.T, owner *brokertest.Broker, serviceURL string, total int) underLoad {
	t.Helper()
	u := underLoad{topic: topicFor(t)}
	u.bundle = claimOn(t, owner, u.topic)
	u.c = newClient(t, serviceURL)
	u.load = startHandOffLoad(t, u.c, u.topic, total)
	u.raw = rawSession(t, owner, u.topic)
	testkit.WaitFor(t, "a third of the messages receipted", func() bool { return u.load.sent.Load() >= int64(total/3) })
	return u
}

// moved checks what every move promises: the CLOSE frames sent the
// clients to serviceURL (empty: none), no send failed, nothing was lost,
// redelivered past the bound, or stored twice.
func (u underLoad) moved(t *testing.T, serviceURL string) {
	t.Helper()
	expectAssigned(t, u.raw, serviceURL)
	u.load.check()
	storedOnce(t, u.c, u.topic, u.load.total)
}

// TestUnloadHandsOver unloads a bundle to the other broker while a
// producer sends and a consumer receives: no send fails, nothing is lost
// or stored twice, the clients move to the assigned broker (the CLOSE
// frames carry its URL) and the new owner serves the topic.
func TestUnloadHandsOver(t *testing.T) {
	storage := newStorage(t)
	a, b := startBroker(t, storage), startBroker(t, storage)
	u := startUnderLoad(t, a, a.ServiceURL(), 3000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Asked through the broker that does not own it: the request reaches
	// the owner through the key.
	if err := b.Service().LoadManager().UnloadBundle(ctx, "public", "default", u.bundle, b.ID()); err != nil {
		t.Fatalf("unload: %v", err)
	}
	u.moved(t, b.ServiceURL())
	ownedBy(t, b, a, u.topic)
}

// TestCloseHandsBundlesOver closes a broker under load: its bundles go to
// the other broker before its connections close, and the clients carry
// on there without a send error.
func TestCloseHandsBundlesOver(t *testing.T) {
	storage := newStorage(t)
	a, b := startBroker(t, storage), startBroker(t, storage)
	// Both brokers in the service URL: once a is gone, a lookup must
	// find a broker.
	u := startUnderLoad(t, a, a.ServiceURL()+","+brokerAddr(b), 3000)
	a.Close()
	u.moved(t, b.ServiceURL())
	mustOwn(t, b, u.topic)
}

// TestLateSendAfterAHandOff: a SEND that crosses, on the wire, the
// CLOSE_PRODUCER sending its client to another broker is dropped
// unanswered, and the connection stays for the client's other producers
// and consumers: the producer cannot register on it again ahead of that
// SEND, as it goes to the other broker.
func TestLateSendAfterAHandOff(t *testing.T) {
	storage := newStorage(t)
	a, b := startBroker(t, storage), startBroker(t, storage)
	topic := topicFor(t)
	bundle := claimOn(t, a, topic)
	rc := rawSession(t, a, topic)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Service().LoadManager().UnloadBundle(ctx, "public", "default", bundle, b.ID()); err != nil {
		t.Fatalf("unload: %v", err)
	}
	expectAssigned(t, rc, b.ServiceURL())
	rc.sendMessage(7, "raw", 0, []byte("late"))
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
	if before := rc.beforePong(); len(before) > 0 {
		t.Fatalf("the late SEND was answered: %v", before)
	}
}

// TestUnloadAlone unloads a bundle with no other broker to take it: the
// topic closes as an unload always closed it (CLOSE frames without a
// URL), the clients look it up again and carry on, on the same broker.
func TestUnloadAlone(t *testing.T) {
	a := startBroker(t, nil)
	u := startUnderLoad(t, a, a.ServiceURL(), 1000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Service().LoadManager().UnloadBundle(ctx, "public", "default", u.bundle, ""); err != nil {
		t.Fatalf("unload: %v", err)
	}
	u.moved(t, "")
}

// TestUnloadRequests: the requests that move nothing, and their errors.
func TestUnloadRequests(t *testing.T) {
	storage := newStorage(t)
	a, b := startBroker(t, storage), startBroker(t, storage)
	topic := topicFor(t)
	bundle := claimOn(t, a, topic)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := b.Service().LoadManager().UnloadBundle(ctx, "public", "default", bundle, a.ID()); !errors.Is(err, wire.ErrNotAllowed) {
		t.Fatalf("unload to its own owner: %v, want %v", err, wire.ErrNotAllowed)
	}
	free := topology.Bundle{Lower: 0, Upper: 0x40000000}
	if free == bundle {
		free = topology.Bundle{Lower: 0x40000000, Upper: 0x80000000}
	}
	if err := a.Service().LoadManager().UnloadBundle(ctx, "public", "default", free, ""); err != nil {
		t.Fatalf("unload of a bundle nobody owns: %v", err)
	}
	if _, err := a.Service().LoadManager().ResolveBroker(ctx, "nobody:80"); !errors.Is(err, loadmgr.ErrUnknownBroker) {
		t.Fatalf("resolve an unknown broker: %v, want %v", err, loadmgr.ErrUnknownBroker)
	}
	if id, err := a.Service().LoadManager().ResolveBroker(ctx, b.ID()); err != nil || id != b.ID() {
		t.Fatalf("resolve %s: %q, %v", b.ID(), id, err)
	}
	if _, err := a.Service().LoadManager().NamespaceBundles("public", "absent"); !errors.Is(err, wire.ErrTopicNotFound) {
		t.Fatalf("bundles of a namespace that does not exist: %v", err)
	}
	// The namespace unload reaches the owner (a) from b, and the bundle
	// goes to the only other broker.
	if err := b.Service().LoadManager().UnloadNamespace(ctx, "public", "default"); err != nil {
		t.Fatalf("namespace unload: %v", err)
	}
	mustOwn(t, b, topic)
}

// TestTopicUnloadReceiptsWhatItStored unloads one topic (the admin's
// topics unload, which no destination follows) while a producer sends to
// it on a namespace without deduplication: every SEND the broker took is
// receipted before CLOSE_PRODUCER, so the client resends only what was
// never stored and nothing is stored twice.
func TestTopicUnloadReceiptsWhatItStored(t *testing.T) {
	a := startBroker(t, nil)
	u := startUnderLoad(t, a, a.ServiceURL(), 3000)
	name, err := topology.ParseTopicName(u.topic)
	if err != nil {
		t.Fatal(err)
	}
	a.Service().Unload(name)
	u.moved(t, "")
}

// TestSendToAClosedProducer: a SEND that crosses the broker's
// CLOSE_PRODUCER on the wire closes the connection, as on Pulsar, but
// only after the frames queued before it are written (closing at once
// would lose the receipts a topic's close queued before its
// CLOSE_PRODUCER, and the client would store their messages again:
// TestTopicUnloadReceiptsWhatItStored). The connection ends with the
// broker's FIN, not a reset, even with the client's later SENDs unread:
// a reset would discard the frames the kernel had not yet delivered.
func TestSendToAClosedProducer(t *testing.T) {
	a := startBroker(t, nil)
	topic := topicFor(t)
	claimOn(t, a, topic)
	rc := dialRaw(t, brokerAddr(a))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}.Build()}.Build())
	name := rc.expect(pb.BaseCommand_PRODUCER_SUCCESS).GetProducerSuccess().GetProducerName()
	a.Service().Unload(mustTopic(t, topic))
	rc.expect(pb.BaseCommand_CLOSE_PRODUCER)

	// More than the broker's reader buffers, so that some stays in the
	// socket when it stops reading. Written aside: a broker that resets
	// the connection fails the writes.
	var crossing bytes.Buffer
	w := wire.NewWriter(&crossing)
	for seq := range uint64(256) {
		msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{ProducerName: proto.String(name),
			SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}.Build(), make([]byte, 8<<10))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePayloadCommand(pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
			ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq), NumMessages: proto.Int32(1)}.Build()}.Build(), nil, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = rc.nc.Write(crossing.Bytes()) }()
	rc.nc.SetReadDeadline(time.Now().Add(receiveWait))
	for {
		cmd, err := rc.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the connection ended with %v, want the broker's FIN (EOF)", err)
			}
			return
		}
		if cmd.GetType() == pb.BaseCommand_SEND_RECEIPT {
			t.Fatalf("a SEND to the closed producer was stored: %v", cmd)
		}
	}
}
