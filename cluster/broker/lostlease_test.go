package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// TestLoadOutlivingLostLease: a topic load under way when the broker's
// session lease ends, and still under way when the unload of every topic
// has given up waiting for it (CloseTimeout), does not serve once it
// finishes: it was claimed under the lost lease. Its callers get
// ServiceNotReady (clients retry), and a request after it loads the topic
// afresh under the new lease.
func TestLoadOutlivingLostLease(t *testing.T) {
	storage := newStorage(t)
	b := startBroker(t, storage, withTTL(failoverTTL), func(c *brokertest.Config) { c.Service.CloseTimeout = 200 * time.Millisecond })
	topic := topicFor(t)
	roundTripOn(t, b.ServiceURL(), topic, "before")
	tn := mustTopic(t, topic)
	b.Service().Unload(tn)

	// The load's first bookie request is held long, and tells the test
	// it has begun (past the ownership check).
	begun := make(chan struct{}, 1)
	storage.Bookies.SetDelay(func(client, bookie string, op ledgertest.Op, entry int64, back bool) time.Duration {
		if client != b.ID() || back {
			return 0
		}
		select {
		case begun <- struct{}{}:
			return 3 * time.Second
		default:
			return 0
		}
	})
	defer storage.Bookies.SetDelay(nil)
	loaded := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := b.Service().Topic(ctx, tn, false)
		loaded <- err
	}()
	select {
	case <-begun:
	case err := <-loaded:
		t.Fatalf("the load ended (%v) without a bookie request", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the load made no bookie request")
	}
	live, err := b.Service().LoadManager().Brokers(context.Background())
	if err != nil || len(live) != 1 {
		t.Fatalf("brokers: %v, %v", live, err)
	}
	if err := storage.Store.Revoke(context.Background(), live[0].Lease); err != nil {
		t.Fatal(err)
	}
	if err := <-loaded; !errors.Is(err, wire.ErrServiceNotReady) {
		t.Fatalf("the load that outlived its lease answered %v, want ServiceNotReady", err)
	}
	roundTripOn(t, b.ServiceURL(), topic, "before", "after")
}
