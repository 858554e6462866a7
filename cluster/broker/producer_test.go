package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestProducers runs pulsar-client-go producers against one standalone
// region; each subtest has its own topic.
func TestProducers(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())

	t.Run("receipts in order", func(t *testing.T) {
		for _, batching := range []bool{true, false} {
			t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
				testReceiptsInOrder(t, c, !batching)
			})
		}
	})
	t.Run("receipt before delivery", func(t *testing.T) { testReceiptBeforeDelivery(t, c) })
	t.Run("compression round trip", func(t *testing.T) {
		for _, codec := range []struct {
			name string
			ct   pulsar.CompressionType
		}{{"none", pulsar.NoCompression}, {"lz4", pulsar.LZ4}, {"zlib", pulsar.ZLib}, {"zstd", pulsar.ZSTD}} {
			for _, batching := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s batching=%v", codec.name, batching), func(t *testing.T) {
					testRoundTrip(t, c, codec.ct, !batching)
				})
			}
		}
	})
	t.Run("exclusive", func(t *testing.T) { testExclusiveProducer(t, c) })
	t.Run("wait for exclusive", func(t *testing.T) { testWaitForExclusive(t, c) })
	t.Run("exclusive with fencing", func(t *testing.T) { testExclusiveWithFencing(t, r, c) })
	t.Run("deduplication", func(t *testing.T) { testDeduplication(t, r, c) })
	t.Run("chunking", func(t *testing.T) { testChunking(t, c) })
	t.Run("broker entry metadata", func(t *testing.T) { testBrokerEntryMetadata(t, c) })
}

// testReceiptsInOrder: SendAsync callbacks come in send order with
// increasing message ids, and every message arrives.
func testReceiptsInOrder(t *testing.T, c pulsar.Client, disableBatching bool) {
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: disableBatching, BatchingMaxMessages: 7})
	const n = 300
	var mu sync.Mutex
	var got []int
	var ids []pulsar.MessageID
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)},
			func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("send %d: %v", i, err)
					return
				}
				got = append(got, i)
				ids = append(ids, id)
			})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d callbacks, want %d", len(got), n)
	}
	for i := range got {
		if got[i] != i {
			t.Fatalf("callback %d is for message %d", i, got[i])
		}
		if i > 0 && compareIDs(ids[i-1], ids[i]) >= 0 {
			t.Fatalf("message id %d (%v) not after %d (%v)", i, ids[i], i-1, ids[i-1])
		}
	}
	if !disableBatching && ids[0].EntryID() == ids[n-1].EntryID() {
		t.Fatalf("batching on, yet all in one entry: %v .. %v", ids[0], ids[n-1])
	}
}

// testReceiptBeforeDelivery: a consumer waiting at the tail on the
// producer's own connection gets each message after the producer's
// receipt for it, as on Pulsar (pulsar-client-go's
// TestProducerWithInterceptors counts on it): the client handles a
// connection's frames in order, so the send callback has run by the time
// Receive returns.
func testReceiptBeforeDelivery(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	var receipted atomic.Int64
	receipted.Store(-1)
	const n = 300
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send %d: %v", i, err)
				}
				receipted.Store(int64(i))
			})
		m := receive(t, cons)
		if got := string(m.Payload()); got != fmt.Sprint(i) {
			t.Fatalf("received %q, want %d", got, i)
		}
		if r := receipted.Load(); r != int64(i) {
			t.Fatalf("message %d delivered before its receipt (last receipt: %d)", i, r)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// testRoundTrip: payloads, keys, properties and event times come back as
// sent, under each compression codec.
func testRoundTrip(t *testing.T, c pulsar.Client, ct pulsar.CompressionType, disableBatching bool) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, CompressionType: ct, DisableBatching: disableBatching})
	const n = 20
	base := time.UnixMilli(time.Now().UnixMilli() - 3600_000)
	payload := func(i int) []byte {
		// compressible and large enough that a codec has work to do
		return bytes.Repeat(fmt.Appendf(nil, "message %d;", i), 200)
	}
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{
			Payload:    payload(i),
			Key:        fmt.Sprintf("key-%d", i%3),
			Properties: map[string]string{"i": fmt.Sprint(i), "codec": fmt.Sprint(ct)},
			EventTime:  base.Add(time.Duration(i) * time.Second),
		}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m := receive(t, cons)
		if !bytes.Equal(m.Payload(), payload(i)) {
			t.Fatalf("message %d: payload %.40q...", i, m.Payload())
		}
		if m.Key() != fmt.Sprintf("key-%d", i%3) {
			t.Fatalf("message %d: key %q", i, m.Key())
		}
		if want := map[string]string{"i": fmt.Sprint(i), "codec": fmt.Sprint(ct)}; !maps.Equal(m.Properties(), want) {
			t.Fatalf("message %d: properties %v, want %v", i, m.Properties(), want)
		}
		if want := base.Add(time.Duration(i) * time.Second); !m.EventTime().Equal(want) {
			t.Fatalf("message %d: event time %v, want %v", i, m.EventTime(), want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

func testExclusiveProducer(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	p1 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err == nil || !strings.Contains(err.Error(), "ProducerFenced") {
		t.Fatalf("second exclusive producer: %v, want ProducerFenced", err)
	}
	// A shared producer is refused too while the exclusive one holds the topic.
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("shared producer next to an exclusive one: %v, want ProducerBusy", err)
	}
	produce(t, p1, "m", 1)
	// Once it closes, another may take the topic.
	p1.Close()
	p2 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	produce(t, p2, "m", 1)
}

func testWaitForExclusive(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p1 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	type result struct {
		p   pulsar.Producer
		err error
	}
	second := make(chan result, 1)
	go func() {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		second <- result{p, err}
	}()
	select {
	case res := <-second:
		if res.p != nil {
			res.p.Close()
		}
		t.Fatalf("WaitForExclusive producer returned while the topic is held: %v", res.err)
	case <-time.After(time.Second):
	}
	produce(t, p1, "first-", 1)
	p1.Close()
	var res result
	select {
	case res = <-second:
	case <-time.After(receiveWait):
		t.Fatal("WaitForExclusive producer not ready after the holder closed")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.p.Close()
	produce(t, res.p, "second-", 1)
	for _, want := range []string{"first-0", "second-0"} {
		if m := receive(t, cons); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
	}
}

// testExclusiveWithFencing is protocol-level: pulsar-client-go v0.19.0
// has no ExclusiveWithFencing mode, and a pulsar-client-go producer that
// the broker fences closes itself without cancelling its reconnect
// goroutine, which then outlives the client (goleak). So both producers
// are raw clients: the fenced one is told CLOSE_PRODUCER and, coming back
// with its old topic epoch, is refused with ProducerFenced.
func testExclusiveWithFencing(t *testing.T, r *brokertest.Broker, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	producer := func(rc *rawClient, id, req uint64, name string, mode pb.ProducerAccessMode, epoch *uint64) {
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
			Topic: proto.String(topic), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(req),
			ProducerName: proto.String(name), ProducerAccessMode: mode.Enum(), TopicEpoch: epoch,
		}.Build()}.Build())
	}
	old := dialRaw(t, brokerAddr(r))
	old.connect(20)
	producer(old, 1, 1, "old", pb.ProducerAccessMode_Exclusive, nil)
	oldEpoch := old.expect(pb.BaseCommand_PRODUCER_SUCCESS).GetProducerSuccess().GetTopicEpoch()
	old.sendMessage(1, "old", 0, []byte("old-0"))
	old.expect(pb.BaseCommand_SEND_RECEIPT)

	fencer := dialRaw(t, brokerAddr(r))
	fencer.connect(20)
	producer(fencer, 1, 1, "fencer", pb.ProducerAccessMode_ExclusiveWithFencing, nil)
	if e := fencer.expect(pb.BaseCommand_PRODUCER_SUCCESS).GetProducerSuccess().GetTopicEpoch(); e <= oldEpoch {
		t.Fatalf("fencing producer got topic epoch %d, want above the fenced one's %d", e, oldEpoch)
	}
	if cp := old.expect(pb.BaseCommand_CLOSE_PRODUCER).GetCloseProducer(); cp.GetProducerId() != 1 {
		t.Fatalf("CLOSE_PRODUCER %v", cp)
	}
	// The fenced producer reconnects as pulsar-client-go would, with its
	// topic epoch: refused for good.
	producer(old, 2, 2, "old", pb.ProducerAccessMode_Exclusive, &oldEpoch)
	if e := old.expect(pb.BaseCommand_ERROR).GetError(); e.GetError() != pb.ServerError_ProducerFenced {
		t.Fatalf("fenced producer reconnecting: %v, want ProducerFenced", e)
	}
	fencer.sendMessage(1, "fencer", 0, []byte("fencer-0"))
	fencer.expect(pb.BaseCommand_SEND_RECEIPT)
	for _, want := range []string{"old-0", "fencer-0"} {
		if m := receive(t, cons); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
	}
	// A shared producer is refused while the fencer holds the topic.
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("shared producer next to a fencing one: %v, want ProducerBusy", err)
	}
}

// testDeduplication: with deduplicationEnabled, a producer of the same name
// learns the last stored sequence id, and re-sent ids are dropped (but
// still acknowledged).
func testDeduplication(t *testing.T, r *brokertest.Broker, c pulsar.Client) {
	ns := createNamespace(t, r, "dedup", global.Policies{DeduplicationEnabled: new(true)})
	topic := topicIn(t, ns)
	send := func(p pulsar.Producer, seq int64, payload string) {
		t.Helper()
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload), SequenceID: &seq}); err != nil {
			t.Fatalf("send seq %d: %v", seq, err)
		}
	}
	p1, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dedup-producer", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := p1.LastSequenceID(); got != -1 {
		t.Errorf("new producer name: LastSequenceID %d, want -1", got)
	}
	for seq := int64(0); seq < 5; seq++ {
		send(p1, seq, fmt.Sprint("a", seq))
	}
	send(p1, 10, "a10") // gaps are fine
	send(p1, 7, "dup7") // below the highest: a duplicate
	p1.Close()

	c2 := newClient(t, r.ServiceURL())
	p2, err := c2.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "dedup-producer", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	// pulsar-client-go's LastSequenceID reports receipts only; what
	// PRODUCER_SUCCESS announced shows as the id it gives the next message.
	if _, err := p2.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("a11")}); err != nil {
		t.Fatal(err)
	}
	if got := p2.LastSequenceID(); got != 11 {
		t.Fatalf("reconnected producer: first generated sequence id %d, want 11 (last stored 10, plus one)", got)
	}
	for _, seq := range []int64{3, 10, 11} {
		send(p2, seq, fmt.Sprint("dup", seq))
	}
	send(p2, 12, "a12")

	// Read back from the start (a durable subscription at earliest: the
	// reader's start position is covered by TestReaders).
	rd := subscribe(t, c2, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "check",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	var got []string
	for len(got) < 8 {
		ctx, cancel := context.WithTimeout(context.Background(), receiveWait)
		m, err := rd.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read back %v, then: %v", got, err)
		}
		got = append(got, string(m.Payload()))
	}
	if want := "[a0 a1 a2 a3 a4 a10 a11 a12]"; fmt.Sprint(got) != want {
		t.Fatalf("stored %v, want %v", got, want)
	}
	expectNothing(t, rd, 300*time.Millisecond)
}

// testChunking: a message larger than ChunkMaxMessageSize is sent in
// chunks and reassembled at the consumer.
func testChunking(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	// pulsar-client-go keeps a goroutine per chunked message until
	// ExpireTimeOfIncompleteChunk, even once it is complete: short, and
	// waited for at the end.
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ExpireTimeOfIncompleteChunk: time.Second})
	defer testkit.WaitFor(t, "pulsar-client-go's chunk expiry goroutines to end", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "discardChunkIfExpire")
	})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, EnableChunking: true, ChunkMaxMessageSize: 1000, DisableBatching: true})
	big := make([]byte, 20_000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for i := range 3 {
		big[0] = byte(i)
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: big, Key: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := receive(t, cons)
		big[0] = byte(i)
		if !bytes.Equal(m.Payload(), big) {
			t.Fatalf("chunked message %d: %d bytes, differs from the %d sent", i, len(m.Payload()), len(big))
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	if m := receive(t, cons); string(m.Payload()) != "small" {
		t.Fatalf("after the chunked messages: %q", m.Payload())
	}
}

// testBrokerEntryMetadata: every message carries the broker's publish time
// and a topic-wide index that increases.
func testBrokerEntryMetadata(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	start := time.Now().Add(-time.Second)
	p1 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p1, "single-", 5)
	p2 := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4, BatchingMaxPublishDelay: time.Hour})
	for i := range 8 {
		p2.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, "batched-", i)}, nil)
	}
	if err := p2.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := int64(-1)
	for i := range 13 {
		m := receive(t, cons)
		bt := m.BrokerPublishTime()
		if bt == nil || bt.Before(start) || bt.After(time.Now().Add(time.Second)) {
			t.Fatalf("message %d (%q): broker publish time %v", i, m.Payload(), bt)
		}
		idx := m.Index()
		if idx == nil {
			t.Fatalf("message %d (%q): no index", i, m.Payload())
		}
		if int64(*idx) <= last {
			t.Fatalf("message %d (%q): index %d after %d", i, m.Payload(), *idx, last)
		}
		last = int64(*idx)
	}
	if last != 12 {
		t.Fatalf("index of the 13th message is %d, want 12", last)
	}
}
