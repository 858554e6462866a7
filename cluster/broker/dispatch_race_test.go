package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
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
// The round is held in storage by a slow answer to its read of the first
// new entry (3s); the consumers change meanwhile. The test waits on that read
// being asked for, never on the clock.
func TestTypeChangesWhileARoundReads(t *testing.T) {
	const total = 20
	storage := newStorage(t)
	b, c, topic, tp := uncachedTopic(t, storage, total, nil)

	// A Shared consumer with a small receiver queue is sent the first
	// messages and takes none; the client asks for no more once its queue
	// is full, and the rest stay unread.
	holder := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 3})
	var firstUnread int64
	testkit.WaitFor(t, "the first consumer's queue full", func() bool {
		st := tp.Stats().Subscriptions["s"]
		firstUnread = st.ReadPosition.Entry + 1
		return st.UnackedMessages > 0 && len(st.Consumers) == 1 && st.Consumers[0].AvailablePermits <= 0
	})
	if firstUnread >= total {
		t.Fatalf("the first consumer was sent all %d messages", total)
	}

	// Its leaving hands what it was sent back. The next consumer's round
	// fails to read the first of them, then reads the first unread one,
	// whose answer comes late.
	var slowRead atomic.Bool
	storage.Bookies.SetDelay(func(client, _ string, op ledgertest.Op, entry int64, back bool) time.Duration {
		if client != b.ID() || op != ledgertest.OpRead || entry != firstUnread || !back {
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
	testkit.WaitFor(t, "the round's read of the first unread message", slowRead.Load)

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

// TestTypeChangesAfterAFailedRead: a subscription's type changes while
// its dispatcher reports a failed read. That was the path on which the
// dispatcher read the type without its lock (subscription.go's kind,
// written under mu by SUBSCRIBE, read without it after a failed replay
// read), and -race reports it on that code: the old dispatcher is held in
// its log call, after the read of the type and before it takes a lock
// again, while the consumers change. The dispatcher now owns the type,
// and the failed read is logged by the round's reader goroutine, off it.
// The new Shared consumer gets every message once storage answers.
func TestTypeChangesAfterAFailedRead(t *testing.T) {
	const total = 4
	storage := newStorage(t)
	logs := newHeldLog(t, "dispatch read failed; retrying")
	_, c, topic, tp := uncachedTopic(t, storage, total, slog.New(logs))
	first := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	testkit.WaitFor(t, "m0..m3 sent to the first consumer", func() bool {
		return tp.Stats().Subscriptions["s"].UnackedMessages == total
	})

	// Its leaving hands m0..m3 back; the next consumer's round fails to
	// read m0, and its report of the failure is held.
	for _, id := range []string{"bookie-0", "bookie-1", "bookie-2"} {
		storage.Bookies.InjectError(id, ledgertest.OpRead, ledger.ErrBookieUnavailable)
	}
	logs.arm()
	first.Close()
	second := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	logs.awaitHeld(t)

	// The type changes meanwhile.
	second.Close()
	shared := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	testkit.WaitFor(t, "the Shared consumer attached", func() bool {
		st := tp.Stats().Subscriptions["s"]
		return st.Type == "Shared" && len(st.Consumers) == 1
	})
	logs.release()
	got := map[string]bool{}
	for len(got) < total {
		m := receive(t, shared)
		got[string(m.Payload())] = true
		shared.Ack(m)
	}
}

// uncachedTopic starts a broker whose managed ledgers cache no entry
// (every dispatch read goes to the bookies), logging to log (nil: the
// default), and returns it, a client, and a topic holding m0..m<total-1>.
func uncachedTopic(t *testing.T, storage *brokertest.Storage, total int, log *slog.Logger) (*brokertest.Broker, pulsar.Client, string, *broker.Topic) {
	t.Helper()
	b := startBroker(t, storage, fastReadRetry, func(c *brokertest.Config) {
		c.Ledgers.CacheMaxBytes = 0
		c.Logger = log
	})
	topic := keepAllTopic(t, b)
	c := newClient(t, b.ServiceURL())
	produceUnbatched(t, c, topic, 0, total)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp, err := b.Service().Topic(ctx, mustTopic(t, topic), false)
	if err != nil {
		t.Fatal(err)
	}
	return b, c, topic, tp
}

// heldLog is a slog handler that discards records, except the first one
// with message msg after arm: the goroutine logging it waits in Handle
// until release.
//
// The test learns that a goroutine is held from a goroutine dump, not from
// the goroutine itself: anything the held goroutine released (a channel it
// closed, an atomic it stored) and the test acquired would order, for the
// race detector, everything the test does next (its client's frames reach
// the broker through sockets, which the detector treats as synchronising)
// after what the held goroutine did, and hide the race.
type heldLog struct {
	msg      string
	armed    atomic.Bool
	released chan struct{}
	freeOnce sync.Once
}

func newHeldLog(t *testing.T, msg string) *heldLog {
	h := &heldLog{msg: msg, released: make(chan struct{})}
	t.Cleanup(h.release)
	return h
}

func (h *heldLog) arm() { h.armed.Store(true) }

func (h *heldLog) release() { h.freeOnce.Do(func() { close(h.released) }) }

// awaitHeld waits until a goroutine is held logging msg.
func (h *heldLog) awaitHeld(t *testing.T) {
	t.Helper()
	testkit.WaitFor(t, "a goroutine held logging "+h.msg, func() bool {
		buf := make([]byte, 8<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("(*heldLog).Handle"))
	})
}

func (h *heldLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *heldLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *heldLog) WithGroup(string) slog.Handler            { return h }

func (h *heldLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg && h.armed.CompareAndSwap(true, false) {
		<-h.released
	}
	return nil
}
