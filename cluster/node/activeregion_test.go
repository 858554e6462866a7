package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// updateNamespace applies change to public/default's policies in the
// global store and waits until every region's brokers see the result.
func updateNamespace(t *testing.T, n *node.Node, change func(*global.Policies)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, rcpt, err := n.Broker().Service().Global().UpdateNamespace(ctx, "public", "default", func(p *global.Policies) error {
		change(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range n.Regions() {
		if err := r.Broker().Service().Policies().Await(ctx, rcpt); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplicationIgnoresTheActiveRegion: with south active, east's entries
// still reach west. Lookups of the namespace in west redirect clients to
// south, and the replicator looks the topic up like a client; before its
// lookups were marked (wire.LookupPropertyReplication), east's task for
// west followed the redirect to south, where the entries were dropped as
// duplicates of east's task for south, and west never got them.
//
// East holds the entries before west joins the namespace, and its cursor
// for west starts at the topic's beginning (replicationStartAt=earliest):
// so the east→west task has its whole backlog to send while south is
// active, as a region has after a switch away from it.
func TestReplicationIgnoresTheActiveRegion(t *testing.T) {
	n, urls := startDevWith(t, func(r *node.RegionConfig) {
		r.Broker.Service.ReplicationStartAt = broker.ReplicationStartEarliest
	}, "east", "west", "south")
	const topic, count = "persistent://public/default/active-elsewhere", 20
	setClusters(t, n, "east", "south")
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p, "e", count)
	p.Close()

	updateNamespace(t, n, func(p *global.Policies) {
		p.ReplicationClusters = []string{"east", "west", "south"}
		p.ActiveRegion = "south"
	})
	west := adminOf(t, n, "west")
	name, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "west to store east's entries while south is active", func() bool {
		st, err := west.Topics().GetStats(*name)
		return err == nil && st.MsgCounterIn >= count
	})

	// West's own consumers see them once the namespace is served there.
	updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "" })
	consumers := subscribeIn(t, map[string]string{"west": urls["west"], "south": urls["south"]}, topic)
	for r, cons := range consumers {
		got := receiveAll(t, cons, count, 500*time.Millisecond)
		checkPayloads(t, got, payloads("e", 0, count))
		for _, m := range got {
			if m.from != "east" {
				t.Fatalf("region %s: %q came from %q, want east", r, m.payload, m.from)
			}
		}
	}
}
