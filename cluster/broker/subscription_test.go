package broker_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// TestSubscriptions runs pulsar-client-go consumers of every subscription
// type against one standalone region; each subtest has its own topic.
func TestSubscriptions(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())

	t.Run("exclusive", func(t *testing.T) { testExclusiveSubscription(t, c) })
	t.Run("failover", func(t *testing.T) { testFailover(t, c) })
	t.Run("shared", func(t *testing.T) { testShared(t, c) })
	t.Run("key shared", func(t *testing.T) { testKeyShared(t, c, false) })
	t.Run("key shared join mid-stream", func(t *testing.T) { testKeyShared(t, c, true) })
	t.Run("key shared second consumer owns the next key", func(t *testing.T) { testKeySharedJoinOwnsNext(t, c) })
	t.Run("key shared redelivery to a small queue", func(t *testing.T) { testKeySharedRedeliverySmallQueue(t, c) })
	t.Run("key shared joiner inherits the last read entry", func(t *testing.T) { testKeySharedJoinerInherits(t, c) })
	t.Run("initial position", func(t *testing.T) { testInitialPosition(t, c) })
	for _, q := range []int{1, 5} {
		for name, kind := range map[string]pulsar.SubscriptionType{"exclusive": pulsar.Exclusive, "shared": pulsar.Shared} {
			t.Run(fmt.Sprintf("receiver queue %d %s batches", q, name), func(t *testing.T) { testSmallQueue(t, c, q, kind) })
		}
	}
	t.Run("reads by batch size", func(t *testing.T) { testReadsByBatchSize(t, r, c) })
	t.Run("individual and cumulative acks", func(t *testing.T) { testAcks(t, c) })
	t.Run("batch index ack reconnect", func(t *testing.T) { testBatchIndexAck(t, c, false) })
	t.Run("batch index ack nack", func(t *testing.T) { testBatchIndexAck(t, c, true) })
	t.Run("nack and dead letter topic", func(t *testing.T) { testNackDLQ(t, c) })
	t.Run("unsubscribe", func(t *testing.T) { testUnsubscribe(t, r, c) })
	t.Run("seek by message id", func(t *testing.T) { testSeek(t, c) })
	t.Run("seek by time", func(t *testing.T) { testSeekByTime(t, c) })
	t.Run("last message ids", func(t *testing.T) { testLastMessageIDs(t, c) })
	t.Run("delayed delivery", func(t *testing.T) { testDelayedDelivery(t, c) })
	t.Run("topics pattern", func(t *testing.T) { testTopicsPattern(t, c) })
	t.Run("partitioned topic", func(t *testing.T) { testPartitioned(t, r, c) })
}

func testExclusiveSubscription(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive}); err == nil ||
		!strings.Contains(err.Error(), "ConsumerBusy") {
		t.Fatalf("second exclusive consumer: %v, want ConsumerBusy", err)
	}
	// Another type on the same subscription is refused too.
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared}); err == nil {
		t.Fatal("a shared consumer joined an exclusive subscription")
	}
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	produce(t, p, "m", 3)
	for i := range 3 {
		if m := receive(t, cons); string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("got %q", m.Payload())
		}
	}
	cons.Close()
	// Once it leaves, another may subscribe.
	subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
}

func testFailover(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	// The broker picks the active consumer by (priority, name): "a".
	a := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "a", AckWithResponse: true})
	b := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: "b"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p, "m", 20)
	for i := range 10 {
		m := receive(t, a)
		if string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("active consumer got %q, want m%d", m.Payload(), i)
		}
		if err := a.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	expectNothing(t, b, 300*time.Millisecond)
	a.Close()
	// b takes over: the rest, in order, none lost and none of what a acked.
	for i := 10; i < 20; i++ {
		m := receive(t, b)
		if string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("standby after failover got %q, want m%d", m.Payload(), i)
		}
		b.Ack(m)
	}
	produce(t, p, "n", 1)
	if m := receive(t, b); string(m.Payload()) != "n0" {
		t.Fatalf("got %q", m.Payload())
	}
}

func testShared(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	c1 := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	c2 := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 100
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)}, nil)
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	counts := consumeConcurrently(t, n, func(_ int, m pulsar.Message) {
		got[string(m.Payload())]++
	}, c1, c2)
	if len(got) != n {
		t.Fatalf("%d distinct messages, want %d", len(got), n)
	}
	for k, v := range got {
		if v != 1 {
			t.Fatalf("message %s delivered %d times", k, v)
		}
	}
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("one shared consumer got everything: %v", counts)
	}
}

// consumeConcurrently receives from every consumer at once, acking, until
// n messages in all have been handed to seen (under one lock, in arrival
// order); it returns how many each consumer got.
func consumeConcurrently(t *testing.T, n int, seen func(i int, m pulsar.Message), consumers ...pulsar.Consumer) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mu sync.Mutex
	total := 0
	counts := make([]int, len(consumers))
	var wg sync.WaitGroup
	for i, cons := range consumers {
		wg.Go(func() {
			for {
				m, err := cons.Receive(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				seen(i, m)
				counts[i]++
				total++
				done := total >= n
				mu.Unlock()
				cons.Ack(m)
				if done {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	if total < n {
		t.Fatalf("received %d of %d messages (per consumer %v)", total, n, counts)
	}
	return counts
}

// testKeyShared: per-key order holds across two AUTO_SPLIT consumers, also
// when the second joins while the first holds unacked messages.
func testKeyShared(t *testing.T, c pulsar.Client, midStream bool) {
	topic := topicFor(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 20}
	c1 := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const keys, perKey = 20, 10
	next := map[string]int{}
	send := func(n int) {
		for i := range n {
			k := fmt.Sprint("key-", i%keys)
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Key: k, Payload: fmt.Append(nil, next[k])}, nil)
			next[k]++
		}
		if err := p.FlushWithCtx(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	type rec struct {
		consumer int
		key      string
		seq      int
	}
	var log []rec
	record := func(i int, m pulsar.Message) {
		seq, _ := strconv.Atoi(string(m.Payload()))
		log = append(log, rec{i, m.Key(), seq})
	}
	var c2 pulsar.Consumer
	if midStream {
		send(keys * perKey / 2)
		// c1 takes some and leaves others unacked in its queue.
		for range 30 {
			m := receive(t, c1)
			record(0, m)
			c1.Ack(m)
		}
		c2 = subscribe(t, c, opts)
		send(keys * perKey / 2)
		consumeConcurrently(t, keys*perKey-30, record, c1, c2)
	} else {
		c2 = subscribe(t, c, opts)
		send(keys * perKey)
		consumeConcurrently(t, keys*perKey, record, c1, c2)
	}
	last := map[string]int{}
	owner := map[string]int{}
	per := [2]int{}
	for _, r := range log {
		if prev, ok := last[r.key]; ok && r.seq != prev+1 {
			t.Fatalf("key %s: message %d received after %d (log %v)", r.key, r.seq, prev, log)
		} else if !ok && r.seq != 0 {
			t.Fatalf("key %s: first message received is %d", r.key, r.seq)
		}
		last[r.key] = r.seq
		if o, ok := owner[r.key]; ok && o != r.consumer && !midStream {
			t.Fatalf("key %s delivered to both consumers", r.key)
		}
		owner[r.key] = r.consumer
		per[r.consumer]++
	}
	if per[0] == 0 || per[1] == 0 {
		t.Fatalf("one Key_Shared consumer got every key: %v", per)
	}
}

// testKeySharedJoinOwnsNext: a second AUTO_SPLIT consumer joins while the
// first holds unacked messages, and the next unread entry has a key of the
// new consumer's range (the lower half). Once the first consumer acks
// everything it was given, the new one must be served.
func testKeySharedJoinOwnsNext(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	var low, high string // keys of the lower and upper half of the hash space
	for i := 0; low == "" || high == ""; i++ {
		k := fmt.Sprint("k", i)
		if h := broker.KeyHash([]byte(k)); h < broker.HashSpace/2 {
			low = cmp.Or(low, k)
		} else {
			high = cmp.Or(high, k)
		}
	}
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, AckWithResponse: true}
	c1 := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: high, Payload: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, c1)         // delivered, not acked yet
	c2 := subscribe(t, c, opts) // takes the lower half
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: low, Payload: []byte("second")}); err != nil {
		t.Fatal(err)
	}
	if err := c1.Ack(m); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, c2); string(m.Payload()) != "second" {
		t.Fatalf("second consumer got %q", m.Payload())
	}
}

// testKeySharedRedeliverySmallQueue: a Key_Shared consumer leaves with ten
// unacked messages of one key; a consumer whose queue holds fewer than ten
// takes over and must receive them all, in order.
func testKeySharedRedeliverySmallQueue(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	c1 := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 10 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: "k", Payload: fmt.Append(nil, i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		receive(t, c1)
	}
	c1.Close()
	c2 := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 5})
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := c2.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m.Payload(), i)
		}
		c2.Ack(m)
	}
}

// testKeySharedJoinerInherits: a consumer joins while the first holds every
// message read so far unacked, then the first leaves: the joiner receives
// them all, the last one read included (it was read before the joining).
func testKeySharedJoinerInherits(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared}
	c1 := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 10 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: "k", Payload: fmt.Append(nil, i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		receive(t, c1)
	}
	c2 := subscribe(t, c, opts)
	c1.Close()
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, err := c2.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m.Payload(), i)
		}
		c2.Ack(m)
	}
}

func testInitialPosition(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	produce(t, p, "before", 3)
	early := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "early", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	late := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "late", SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest})
	produce(t, p, "after", 1)
	for _, want := range []string{"before0", "before1", "before2", "after0"} {
		if m := receive(t, early); string(m.Payload()) != want {
			t.Fatalf("earliest: got %q, want %q", m.Payload(), want)
		}
	}
	if m := receive(t, late); string(m.Payload()) != "after0" {
		t.Fatalf("latest: got %q, want after0", m.Payload())
	}
	// An existing subscription keeps its position: the initial position
	// applies only when it is created.
	late.Close()
	again := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "late", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if m := receive(t, again); string(m.Payload()) != "after0" {
		t.Fatalf("resubscribed: got %q, want after0 (unacked)", m.Payload())
	}
}

// testSmallQueue: a consumer with a tiny receiver queue still gets every
// message of large batches (permits may go negative; no stall).
func testSmallQueue(t *testing.T, c pulsar.Client, queue int, kind pulsar.SubscriptionType) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: kind, ReceiverQueueSize: queue})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour})
	const n = 200
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)}, nil)
		if i%10 == 9 {
			if err := p.FlushWithCtx(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range n {
		m := receive(t, cons)
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("got %q, want %d", m.Payload(), i)
		}
		cons.Ack(m)
	}
}

func testAcks(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", AckWithResponse: true}
	cons := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p, "m", 10)
	var msgs []pulsar.Message
	for range 10 {
		msgs = append(msgs, receive(t, cons))
	}
	for _, i := range []int{0, 1, 3, 8} {
		if err := cons.Ack(msgs[i]); err != nil {
			t.Fatalf("ack m%d: %v", i, err)
		}
	}
	if err := cons.AckCumulative(msgs[5]); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	// Redelivered: what neither ack covered (6, 7, 9), in order.
	cons = subscribe(t, c, opts)
	for _, want := range []string{"m6", "m7", "m9"} {
		m := receive(t, cons)
		if string(m.Payload()) != want {
			t.Fatalf("after reconnect got %q, want %q", m.Payload(), want)
		}
		if m.RedeliveryCount() != 0 {
			// A consumer that left is not a nack: Pulsar counts no redelivery.
			t.Logf("%s redelivery count %d", want, m.RedeliveryCount())
		}
	}
	expectNothing(t, cons, 300*time.Millisecond)
	if err := cons.AckIDList([]pulsar.MessageID{msgs[6].ID(), msgs[7].ID(), msgs[9].ID()}); err != nil {
		t.Fatal(err)
	}
}

// testReadsByBatchSize: a consumer whose receiver queue holds two batches of
// ten drains 50 batches with about 50 entry reads. A round turns permits,
// which count messages, into entries by the average batch size; reading an
// entry per permit read up to ten times as many, since the entries the
// consumer could not take were read again later.
func testReadsByBatchSize(t *testing.T, r *brokertest.Broker, c pulsar.Client) {
	const batches, perBatch = 50, 10
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: perBatch, BatchingMaxPublishDelay: time.Hour})
	for i := range batches * perBatch {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, "m", i)}, nil)
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
	if err != nil {
		t.Fatal(err)
	}
	before := broker.EntriesRead(tp)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 2 * perBatch})
	for i := range batches * perBatch {
		m := receive(t, cons)
		if want := fmt.Sprint("m", i); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		cons.Ack(m)
	}
	if reads := broker.EntriesRead(tp) - before; reads > 2*batches {
		t.Errorf("draining %d batches read %d entries, want at most %d", batches, reads, 2*batches)
	}
}

// testBatchIndexAck: half a batch acked; the other half, and only it, is
// delivered again (after a reconnect, or a nack).
func testBatchIndexAck(t *testing.T, c pulsar.Client, nack bool) {
	topic := topicFor(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		EnableBatchIndexAcknowledgment: true, AckWithResponse: true, NackRedeliveryDelay: 100 * time.Millisecond}
	cons := subscribe(t, c, opts)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Hour})
	for i := range 10 {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, "m", i)}, nil)
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	var msgs []pulsar.Message
	for range 10 {
		msgs = append(msgs, receive(t, cons))
	}
	if msgs[0].ID().EntryID() != msgs[9].ID().EntryID() {
		t.Fatalf("not one batch: %v .. %v", msgs[0].ID(), msgs[9].ID())
	}
	// Every ack is answered before the first nack: the nack tracker's timer
	// redelivers the entry with the acks the broker has by then, so an ack
	// still in flight would come back as a redelivery.
	for i := 0; i < len(msgs); i += 2 {
		if err := cons.Ack(msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if nack {
		for i := 1; i < len(msgs); i += 2 {
			cons.Nack(msgs[i])
		}
	} else {
		cons.Close()
		cons = subscribe(t, c, opts)
	}
	for _, want := range []string{"m1", "m3", "m5", "m7", "m9"} {
		m := receive(t, cons)
		if string(m.Payload()) != want {
			t.Fatalf("redelivered %q, want %q", m.Payload(), want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	expectNothing(t, cons, 300*time.Millisecond)
}

func testNackDLQ(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	dlq := topic + "-dlq"
	dead := subscribe(t, c, pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "dead", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 50 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 3, DeadLetterTopic: dlq}})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p, "poison", 1)
	produce(t, p, "ok", 1)
	okSeen := false
	for want := uint32(0); want < 3; {
		m := receive(t, cons)
		if string(m.Payload()) == "ok0" {
			if okSeen {
				t.Fatal("an acked message came again")
			}
			okSeen = true
			cons.Ack(m)
			continue
		}
		if m.RedeliveryCount() != want {
			t.Fatalf("delivery %d of the poison message has redelivery count %d", want+1, m.RedeliveryCount())
		}
		cons.Nack(m)
		want++
	}
	m := receive(t, dead)
	if string(m.Payload()) != "poison0" {
		t.Fatalf("dead letter topic got %q", m.Payload())
	}
	if !okSeen {
		if m := receive(t, cons); string(m.Payload()) != "ok0" {
			t.Fatalf("got %q", m.Payload())
		}
	}
	expectNothing(t, cons, 300*time.Millisecond)
}

// testUnsubscribe: the successful UNSUBSCRIBE is sent by a raw client,
// because pulsar-client-go v0.19.0 marks an unsubscribed consumer closed
// without stopping its goroutines (Close then returns early), which goleak
// reports. A refused one goes through pulsar-client-go.
func testUnsubscribe(t *testing.T, r *brokertest.Broker, c pulsar.Client) {
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produce(t, p, "m", 3)

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_SUCCESS)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
		ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)}.Build()}.Build())
	for range 3 {
		id := rc.expect(pb.BaseCommand_MESSAGE).GetMessage().GetMessageId()
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ACK.Enum(), Ack: pb.CommandAck_builder{
			ConsumerId: proto.Uint64(1), AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{id},
		}.Build()}.Build())
	}
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_UNSUBSCRIBE.Enum(), Unsubscribe: pb.CommandUnsubscribe_builder{
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2)}.Build()}.Build())
	if resp := rc.expect(pb.BaseCommand_SUCCESS).GetSuccess(); resp.GetRequestId() != 2 {
		t.Fatalf("UNSUBSCRIBE answered %v", resp)
	}
	// A new subscription of the same name starts at its initial position,
	// although the old one had acked everything.
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if m := receive(t, cons); string(m.Payload()) != "m0" {
		t.Fatalf("after unsubscribe: %q, want m0", m.Payload())
	}
	// Unsubscribing while another consumer is attached is refused.
	shared := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sh", Type: pulsar.Shared}
	s1 := subscribe(t, c, shared)
	subscribe(t, c, shared)
	if err := s1.Unsubscribe(); err == nil {
		t.Fatal("unsubscribed a shared subscription with another consumer attached")
	}
}

// testSeek: pulsar-client-go delivers the seek's message itself only with
// StartMessageIDInclusive (it drops what is not after its start id
// otherwise); the broker resumes at that message either way.
func testSeek(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	incl := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "inclusive", StartMessageIDInclusive: true})
	excl := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "exclusive"})
	ids := produce(t, p, "m", 10)
	for _, cons := range []pulsar.Consumer{incl, excl} {
		for range 10 {
			cons.Ack(receive(t, cons))
		}
		if err := cons.Seek(ids[3]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < 10; i++ {
		if m := receive(t, incl); string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("after seek to m3 (inclusive): got %q, want m%d", m.Payload(), i)
		}
	}
	for i := 4; i < 10; i++ {
		if m := receive(t, excl); string(m.Payload()) != fmt.Sprint("m", i) {
			t.Fatalf("after seek to m3: got %q, want m%d", m.Payload(), i)
		}
	}
	// (pulsar-client-go refuses Seek(EarliestMessageID()) on a consumer:
	// "invalid partition index -1"; seeking by time covers the start.)
}

func testSeekByTime(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	produce(t, p, "old", 3)
	// Publish times have millisecond resolution: let the clock move on.
	first := time.Now()
	testkit.WaitFor(t, "the clock to advance", func() bool { return time.Since(first) > 5*time.Millisecond })
	cut := time.Now()
	testkit.WaitFor(t, "the clock to advance", func() bool { return time.Since(cut) > 5*time.Millisecond })
	produce(t, p, "new", 3)
	for range 6 {
		cons.Ack(receive(t, cons))
	}
	if err := cons.SeekByTime(cut); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if m := receive(t, cons); string(m.Payload()) != fmt.Sprint("new", i) {
			t.Fatalf("after seek by time: got %q, want new%d", m.Payload(), i)
		}
	}
	if err := cons.SeekByTime(first.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, cons); string(m.Payload()) != "old0" {
		t.Fatalf("after seek to an hour ago: got %q", m.Payload())
	}
}

func testLastMessageIDs(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	last := func() pulsar.TopicMessageID {
		t.Helper()
		ids, err := cons.GetLastMessageIDs()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0].Topic() != topic {
			t.Fatalf("GetLastMessageIDs = %v", ids)
		}
		return ids[0]
	}
	if id := last(); id.EntryID() != -1 {
		t.Fatalf("empty topic: last id %v, want entry -1", id)
	}
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ids := produce(t, p, "m", 3)
	if id := last(); id.LedgerID() != ids[2].LedgerID() || id.EntryID() != ids[2].EntryID() {
		t.Fatalf("last id %v, want %v", id, ids[2])
	}
	bp := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4, BatchingMaxPublishDelay: time.Hour})
	var lastSent pulsar.MessageID
	for i := range 4 {
		bp.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, i)}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err == nil && i == 3 {
				lastSent = id
			}
		})
	}
	if err := bp.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	if id := last(); id.EntryID() != lastSent.EntryID() || id.BatchIdx() != 3 {
		t.Fatalf("last id %v (batch index %d), want %v with batch index 3", id, id.BatchIdx(), lastSent)
	}
}

func testDelayedDelivery(t *testing.T, c pulsar.Client) {
	topic := topicFor(t)
	shared := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: pulsar.Shared})
	excl := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "excl", Type: pulsar.Exclusive})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	// Behaviour only: the bounds on the delay are TestDelayedDeliveryClock's.
	const delay = 500 * time.Millisecond
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("later"), DeliverAfter: delay}); err != nil {
		t.Fatal(err)
	}
	produce(t, p, "now", 1)
	// Shared: the delayed message waits; the one behind it does not.
	if m := receive(t, shared); string(m.Payload()) != "now0" {
		t.Fatalf("shared got %q first, want now0", m.Payload())
	}
	// Exclusive: Pulsar delivers delayed messages at once.
	for _, want := range []string{"later", "now0"} {
		if m := receive(t, excl); string(m.Payload()) != want {
			t.Fatalf("exclusive got %q, want %q", m.Payload(), want)
		}
	}
	if m := receive(t, shared); string(m.Payload()) != "later" {
		t.Fatalf("shared got %q, want later", m.Payload())
	}
}

func testTopicsPattern(t *testing.T, c pulsar.Client) {
	base := topicFor(t)
	topics := []string{base + "-a-1", base + "-a-2", base + "-b-1"}
	for _, topic := range topics {
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
		produce(t, p, topic[len(base):]+":", 2)
	}
	cons := subscribe(t, c, pulsar.ConsumerOptions{TopicsPattern: base + "-a-.*", SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, AutoDiscoveryPeriod: time.Hour})
	var got []string
	for range 4 {
		m := receive(t, cons)
		got = append(got, string(m.Payload()))
		cons.Ack(m)
	}
	slices.Sort(got)
	if want := "[-a-1:0 -a-1:1 -a-2:0 -a-2:1]"; fmt.Sprint(got) != want {
		t.Fatalf("pattern consumer got %v, want %v", got, want)
	}
	expectNothing(t, cons, 300*time.Millisecond)
}

func testPartitioned(t *testing.T, r *brokertest.Broker, c pulsar.Client) {
	topic := topicFor(t)
	createPartitioned(t, r, topic, 3)
	parts, err := c.TopicPartitions(topic)
	if err != nil || len(parts) != 3 {
		t.Fatalf("TopicPartitions = %v, %v", parts, err)
	}
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 30
	for i := range n {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprint("k", i), Payload: fmt.Append(nil, i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	from := map[string]int{}
	for range n {
		m := receive(t, cons)
		got[string(m.Payload())] = true
		from[m.Topic()]++
		cons.Ack(m)
	}
	if len(got) != n {
		t.Fatalf("%d distinct messages of %d", len(got), n)
	}
	if len(from) < 2 {
		t.Fatalf("all messages came from one partition: %v", from)
	}
	for part := range from {
		if !slices.Contains(parts, part) {
			t.Fatalf("message from %q, not a partition of %s", part, topic)
		}
	}
	expectNothing(t, cons, 200*time.Millisecond)
}

// TestSubscribeAgainRedelivers: a client that sends SUBSCRIBE again for a
// consumer still attached on its connection (pulsar-client-go does, when a
// CLOSE_CONSUMER and its connection's close both reach it) has emptied its
// receive queue, so what the consumer was sent and did not ack comes
// again, once the client grants permits anew, and not before.
func TestSubscribeAgainRedelivers(t *testing.T) {
	r := startBroker(t, nil)
	topic := topicFor(t)
	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	subscribe := pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
		Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
		ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
	}.Build()}.Build()
	rc.send(subscribe)
	rc.expect(pb.BaseCommand_SUCCESS)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(2), RequestId: proto.Uint64(2)}.Build()}.Build())
	name := rc.expect(pb.BaseCommand_PRODUCER_SUCCESS).GetProducerSuccess().GetProducerName()
	const n = 3
	for i := range uint64(n) {
		rc.sendMessage(2, name, i, fmt.Appendf(nil, "m%d", i))
		rc.expect(pb.BaseCommand_SEND_RECEIPT)
	}
	flow := pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
		ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)}.Build()}.Build()
	received := func(redeliveries uint32) {
		t.Helper()
		for i := range n {
			m := rc.expect(pb.BaseCommand_MESSAGE).GetMessage()
			if got := m.GetMessageId().GetEntryId(); got != uint64(i) || m.GetRedeliveryCount() != redeliveries {
				t.Fatalf("message %d: entry %d, redelivery count %d; want entry %d, count %d",
					i, got, m.GetRedeliveryCount(), i, redeliveries)
			}
		}
	}
	rc.send(flow)
	received(0)

	subscribe.GetSubscribe().SetRequestId(3)
	rc.send(subscribe)
	rc.expect(pb.BaseCommand_SUCCESS)
	rc.send(pingCmd)
	if before := rc.beforePong(); len(before) != 0 {
		t.Fatalf("sent before the client granted permits again: %v", before)
	}
	rc.send(flow)
	received(1)
}

// TestConsumerTimestamps: a consumer's statistics say when it last sent
// FLOW, was sent a message and acked (Pulsar's lastConsumedFlowTimestamp,
// lastConsumedTimestamp and lastAckedTimestamp), zero until it has.
func TestConsumerTimestamps(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", AckWithResponse: true})
	stats := func() broker.ConsumerStats {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			t.Fatal(err)
		}
		if cs := tp.Stats().Subscriptions["s"].Consumers; len(cs) == 1 {
			return cs[0]
		}
		return broker.ConsumerStats{}
	}
	testkit.WaitFor(t, "the consumer's first FLOW", func() bool { return stats().LastFlowMillis != 0 })
	if s := stats(); s.LastConsumedMillis != 0 || s.LastAckedMillis != 0 {
		t.Fatalf("before any message: consumed at %v, acked at %v", s.LastConsumedMillis, s.LastAckedMillis)
	}
	produce(t, createProducer(t, c, pulsar.ProducerOptions{Topic: topic}), "m", 1)
	m := receive(t, cons)
	if s := stats(); s.LastConsumedMillis == 0 || s.LastAckedMillis != 0 {
		t.Fatalf("after a delivery: consumed at %v, acked at %v", s.LastConsumedMillis, s.LastAckedMillis)
	}
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	if s := stats(); s.LastAckedMillis < s.LastConsumedMillis {
		t.Fatalf("after the ack: consumed at %v, acked at %v", s.LastConsumedMillis, s.LastAckedMillis)
	}
}
