package broker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestDedupSnapshotByTime: a topic's deduplication state is snapshotted
// once entries were stored since a snapshot older than the topic's
// deduplicationSnapshotInterval, far short of the entries interval, so
// its snapshot cursor moves past them; a topic without the policy follows
// the broker's DedupSnapshotTime, an hour here, and keeps its cursor. On
// the fake clock.
func TestDedupSnapshotByTime(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := startBroker(t, nil, func(c *brokertest.Config) {
		c.Service.Clock = clock
		c.Service.DedupSnapshotCheckInterval = time.Second
		c.Service.DedupSnapshotTime = time.Hour
	})
	c := newClient(t, r.ServiceURL())
	quick, slow := topicFor(t, "-quick"), topicFor(t, "-slow")
	createTopic(t, r, quick, global.TopicPolicies{Extra: global.Extra{global.ExtraTopicDedupSnapshotInterval: json.RawMessage("10")}})
	last := map[string]mledger.Position{}
	for _, topic := range []string{quick, slow} {
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		for range 3 {
			id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")})
			if err != nil {
				t.Fatal(err)
			}
			last[topic] = mledger.Position{Ledger: id.LedgerID(), Entry: id.EntryID()}
		}
	}
	snapshot := func(topic string) mledger.Position {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			t.Fatal(err)
		}
		return broker.DedupSnapshotPosition(tp)
	}
	start := clock.Now()
	testkit.WaitFor(t, "the quick topic's snapshot to cover its three entries", func() bool {
		clock.Advance(time.Second)
		return snapshot(quick) == last[quick]
	})
	if waited := clock.Since(start); waited < 10*time.Second {
		t.Errorf("snapshotted after %v, before its interval of 10s", waited)
	}
	if got := snapshot(slow); got == last[slow] {
		t.Errorf("the topic without the policy snapshotted at %v, before the broker's hour", got)
	}
}
