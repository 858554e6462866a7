package broker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestReaderFromEarliestAfterAFailedRead is the nemesis read-back that
// hung (docs/BENCHMARKS.md, defect 2), as pulsar-client-go's reader meets
// it: a reader from the earliest position of an idle topic with several
// ledgers, just reloaded, whose first storage read fails (a bookie that
// does not answer, as on the loaded machine of that run).
//
// The dispatcher used to drop the failed read and wait for something to
// wake it: an append, a FLOW, a consumer. On an idle topic none comes (the
// client sends FLOW only once it has taken half its queue), so the reader
// got nothing while HasNext said there was more, and blocked in Next. The
// dispatcher now retries a failed read after Dispatch.ReadRetryInitial.
func TestReaderFromEarliestAfterAFailedRead(t *testing.T) {
	const perLedger, total = 10, 45 // five ledgers, the last one part full
	storage := newStorage(t)
	b := startBroker(t, storage, fastReadRetry, func(c *brokertest.Config) {
		c.Ledgers.MaxEntriesPerLedger, c.Ledgers.MinLedgerRolloverTime = perLedger, 0
	})
	topic := keepAllTopic(t, b)
	c := newClient(t, b.ServiceURL())
	produceUnbatched(t, c, topic, 0, total)

	// Reloaded: the new instance reads what the reader wants from the
	// bookies, with nothing in its entry cache.
	tn := mustTopic(t, topic)
	b.Service().Unload(tn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loaded, err := b.Service().Topic(ctx, tn, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(loaded.InternalStats().Ledgers); n < total/perLedger+1 {
		t.Fatalf("the topic has %d ledgers, want at least %d", n, total/perLedger+1)
	}

	// Every bookie refuses the broker until the dispatcher has asked for
	// the whole first run of its first read: the first ledger's entries.
	reads := refuseBookies(t, storage, b)
	rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	testkit.WaitFor(t, "the reader's first storage read", func() bool { return reads.Load() >= perLedger })
	storage.Bookies.HealAll()

	// As the read-back reads (e2e.ReadTopic): while HasNext, Next.
	var got []string
	for rd.HasNext() {
		ctx, cancel := context.WithTimeout(context.Background(), receiveWait)
		m, err := rd.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read %d of %d messages, then Next: %v (HasNext said there was more)", len(got), total, err)
		}
		got = append(got, string(m.Payload()))
	}
	if len(got) != total || got[0] != "m0" || got[total-1] != "m44" {
		t.Fatalf("read %d messages (%v...), want m0..m44", len(got), got[:min(len(got), 3)])
	}
}

// TestRedeliveryAfterAFailedRead: the same stall on the redelivery path. A
// Shared consumer of an idle topic nacks what it received, and the
// dispatcher's reads of those entries fail: it used to keep them for a
// later round that nothing started, so they were never redelivered.
func TestRedeliveryAfterAFailedRead(t *testing.T) {
	const total = 5
	storage := newStorage(t)
	b := startBroker(t, storage, fastReadRetry)
	topic := keepAllTopic(t, b)
	c := newClient(t, b.ServiceURL())
	produceUnbatched(t, c, topic, 0, total)
	// Reloaded, so that what the topic holds is in closed ledgers and the
	// ledger being written has nothing to send the bookies.
	b.Service().Unload(mustTopic(t, topic))

	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 100 * time.Millisecond})
	var got []pulsar.Message
	for range total {
		got = append(got, receive(t, cons))
	}
	reads := refuseBookies(t, storage, b)
	for _, m := range got {
		cons.Nack(m)
	}
	testkit.WaitFor(t, "the dispatcher's read of a nacked entry", func() bool { return reads.Load() >= 1 })
	storage.Bookies.HealAll()
	for i := range total {
		m := receive(t, cons)
		if m.RedeliveryCount() == 0 {
			t.Fatalf("redelivery %d: %q came with redelivery count 0", i, m.Payload())
		}
		cons.Ack(m)
	}
}

// refuseBookies makes every bookie of storage refuse b's calls until
// storage.Bookies.HealAll, and counts the entry reads b asks for
// meanwhile (each one refused).
func refuseBookies(t *testing.T, storage *brokertest.Storage, b *brokertest.Broker) *atomic.Int64 {
	t.Helper()
	reads := new(atomic.Int64)
	storage.Bookies.SetDelay(func(client, _ string, op ledgertest.Op, _ int64, back bool) time.Duration {
		if client == b.ID() && op == ledgertest.OpRead && !back {
			reads.Add(1)
		}
		return 0
	})
	t.Cleanup(func() { storage.Bookies.SetDelay(nil) })
	for _, id := range []string{"bookie-0", "bookie-1", "bookie-2"} {
		storage.Bookies.Refuse(b.ID(), id)
	}
	return reads
}

// fastReadRetry retries a failed dispatch read within tens of
// milliseconds.
func fastReadRetry(c *brokertest.Config) {
	c.Service.Dispatch.ReadRetryInitial, c.Service.Dispatch.ReadRetryMax = 50*time.Millisecond, time.Second
}

// keepAllTopic is a topic named after the test in a new namespace that
// keeps every ledger (infinite retention, as the nemesis's namespace).
func keepAllTopic(t *testing.T, b *brokertest.Broker) string {
	t.Helper()
	ns := createNamespace(t, b, "keepall", global.Policies{
		RetentionPolicies: &global.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}})
	return topicIn(t, ns)
}

// produceUnbatched sends m<from>..m<to-1> to topic, one entry each.
func produceUnbatched(t *testing.T, c pulsar.Client, topic string, from, to int) {
	t.Helper()
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	defer p.Close()
	send(t, p, from, to)
}

// send sends m<from>..m<to-1> through p.
func send(t *testing.T, p pulsar.Producer, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatalf("send m%d: %v", i, err)
		}
	}
}
