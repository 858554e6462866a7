package broker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// refusingStates is a global store that, while refusing, fails every
// write of a replicated subscription's state, as a store cut off from
// this region would; everything else goes through.
type refusingStates struct {
	meta.Store
	refusing atomic.Bool
}

var errStatesCut = errors.New("test: subscription states cannot be written")

func (s *refusingStates) refused(key string) bool {
	return s.refusing.Load() && strings.Contains(key, "subscription-states")
}

func (s *refusingStates) Create(ctx context.Context, key string, value []byte, lease meta.LeaseID) (int64, error) {
	if s.refused(key) {
		return 0, errStatesCut
	}
	return s.Store.Create(ctx, key, value, lease)
}

func (s *refusingStates) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	if s.refused(key) {
		return 0, errStatesCut
	}
	return s.Store.Update(ctx, key, value, modRev)
}

// TestReplicatedSubscriptionWaitsForItsStateToBeWritten: in a namespace
// with automatic failover, a replicated subscription whose acks cannot be
// written to the global store stops dispatching (two sync intervals, at
// least a second, after the oldest unwritten ack), rather than when the
// broker's failover session lapses: every message acked and not written
// is one a failover delivers again. Once the state is written, dispatch
// resumes and every message arrives.
func TestReplicatedSubscriptionWaitsForItsStateToBeWritten(t *testing.T) {
	storage := newStorage(t)
	states := &refusingStates{Store: storage.Store}
	r := startBroker(t, storage, func(c *brokertest.Config) {
		c.Global = states
		c.Service.ReplicatedSubscriptions.Interval = 50 * time.Millisecond
		// A session that outlives the test: only the unwritten state
		// can stop the dispatch.
		c.Service.Failover = broker.FailoverConfig{SessionTTL: time.Minute, Margin: time.Second,
			Interval: 50 * time.Millisecond, ProbeTimeout: time.Second}
	})
	addRegion(t, r, "r2")
	addRegion(t, r, "r3")
	p := global.Policies{ReplicationClusters: []string{brokertest.Region, "r2", "r3"}, ActiveRegion: brokertest.Region}
	p.SetFallbackRegions([]string{"r2", "r3"})
	p.SetAutoFailover(&global.AutoFailover{DelaySeconds: 60})
	topic := topicIn(t, createNamespace(t, r, "unwritten", p))
	c := newClient(t, r.ServiceURL())
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		ReplicateSubscriptionState: true, ReceiverQueueSize: 1})
	const total = 400
	produce(t, createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "m", total)
	ack := func(m pulsar.Message) {
		t.Helper()
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for ; got < 10; got++ {
		ack(receive(t, cons))
	}

	states.refusing.Store(true)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break // dispatch stopped
		}
		if err != nil {
			t.Fatal(err)
		}
		ack(m)
		if got++; got == total {
			t.Fatal("every message was delivered while no ack could be written")
		}
		time.Sleep(10 * time.Millisecond) // a consumer's pace: the rest take almost 4 s, the bound 1 s
	}
	t.Logf("dispatch stopped after %d of %d messages, %d of them while no state could be written", got, total, got-10)

	states.refusing.Store(false)
	for ; got < total; got++ {
		ack(receive(t, cons))
	}
}
