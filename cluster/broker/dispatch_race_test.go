package broker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/testkit"
)

// TestTypeChangesWhileARoundReads: a subscription's type changes (its
// last consumer leaves, one of another type attaches) while a dispatch
// round is in storage, after its read of an entry to redeliver failed.
//
// The dispatcher used to read the type without its lock on that path
// (the read-error branch of subscription.round) while SUBSCRIBE wrote it
// under the lock: a data race, which -race reports on that code. The
// dispatcher now owns the type with the rest of the delivery state. And
// the new Exclusive consumer gets the messages in order: the new entry the
// round read waits behind the older ones its failed read left for
// redelivery.
//
// The round is held in storage by a slow answer to its read of the new
// entry (3s); the consumers change meanwhile. The test waits on that read
// being asked for, never on the clock.
func TestTypeChangesWhileARoundReads(t *testing.T) {
	const total = 4
	storage := newStorage(t)
	b := startBroker(t, storage, fastReadRetry, func(c *brokertest.Config) { c.Ledgers.CacheMaxBytes = 0 })
	topic := keepAllTopic(t, b)
	c := newClient(t, b.ServiceURL())
	produceUnbatched(t, c, topic, 0, total)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := b.Service().Topic(ctx, mustTopic(t, topic), false)
	if err != nil {
		t.Fatal(err)
	}

	// A Shared consumer is sent m0..m2 and takes none: m3 stays unread.
	holder := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: total - 1})
	testkit.WaitFor(t, "m0..m2 sent to the first consumer", func() bool {
		return tp.Stats().Subscriptions["s"].UnackedMessages == total-1
	})

	// Its leaving hands m0..m2 back. The next consumer's round fails to
	// read m0, then reads m3, whose answer comes late.
	var slowRead atomic.Bool
	storage.Bookies.SetDelay(func(client, _ string, op ledgertest.Op, entry int64, back bool) time.Duration {
		if client != b.ID() || op != ledgertest.OpRead || entry != total-1 || !back {
			return 0
		}
		slowRead.Store(true)
		return 3 * time.Second
	})
	t.Cleanup(func() { storage.Bookies.SetDelay(nil) })
	for _, id := range []string{"bookie-0", "bookie-1", "bookie-2"} {
		storage.Bookies.InjectError(id, ledgertest.OpRead, ledger.ErrBookieUnavailable)
	}
	holder.Close()
	shared := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	testkit.WaitFor(t, "the round's read of m3", slowRead.Load)

	// The type changes while that read is under way.
	shared.Close()
	exclusive := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	for i := range total {
		m := receive(t, exclusive)
		if want := fmt.Sprintf("m%d", i); string(m.Payload()) != want {
			t.Fatalf("message %d: got %s, want %s", i, m.Payload(), want)
		}
		exclusive.Ack(m)
	}
}
