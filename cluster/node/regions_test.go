package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// TestReplicationCursorPrefixesAgree: the broker creates and deletes the
// cursors the replicator writes, under a prefix each package declares
// (the broker may not import the replicator).
func TestReplicationCursorPrefixesAgree(t *testing.T) {
	if broker.ReplicationCursorPrefix != replicator.CursorPrefix {
		t.Fatalf("broker.ReplicationCursorPrefix %q != replicator.CursorPrefix %q", broker.ReplicationCursorPrefix, replicator.CursorPrefix)
	}
}

// region returns the running region named name.
func region(t *testing.T, n *node.Node, name string) *node.Region {
	t.Helper()
	for _, r := range n.Regions() {
		if r.Name() == name {
			return r
		}
	}
	t.Fatalf("no region %s", name)
	return nil
}

// replCursor reads topic's meridian.repl.<remote> cursor in r: its
// mark-delete position and whether it exists.
func replCursor(t *testing.T, r *node.Region, topic, remote string) (mledger.Position, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := r.Store().Get(ctx, mledger.CursorKey(r.Name(), topic, replicator.CursorPrefix+remote))
	if errors.Is(err, meta.ErrNotFound) {
		return mledger.Position{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MarkDelete mledger.Position `json:"markDelete"`
	}
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		t.Fatalf("cursor record %s: %v", kv.Value, err)
	}
	return v.MarkDelete, true
}

// setClusters sets public/default's replication clusters and waits until
// every region's brokers see them.
func setClusters(t *testing.T, n *node.Node, clusters ...string) {
	t.Helper()
	updateNamespace(t, n, func(p *global.Policies) { p.ReplicationClusters = clusters })
}

// publish sends the messages prefix-0 .. prefix-(n-1) to topic in order,
// one entry each, and waits for each receipt.
func publish(t *testing.T, p pulsar.Producer, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkPayloads fails unless got are the payloads want, in order.
func checkPayloads(t *testing.T, got []received, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("received %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].payload != want[i] {
			t.Fatalf("message %d is %q, want %q", i, got[i].payload, want[i])
		}
	}
}

func payloads(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestReplicationOfANewTopicStartsAtItsFirstEntry: a producer publishes
// the moment its topic is created, its ledgers roll every two entries and
// retention deletes every consumed ledger at once (nothing else holds
// them), and the region's
// replication task starts only after all of it. The other region still
// gets every message from the first: the topic's owner created the
// replication cursor with the topic, and it held retention.
func TestReplicationOfANewTopicStartsAtItsFirstEntry(t *testing.T) {
	n, urls := startDevWith(t, func(r *node.RegionConfig) {
		if r.Name != "east" {
			return
		}
		l := &r.Broker.Ledgers
		l.MaxEntriesPerLedger, l.MinLedgerRolloverTime = 2, 0
		l.RetentionTime, l.RetentionSize, l.HousekeepingInterval = 0, 0, 10*time.Millisecond
		// The deduplication cursor follows every entry, so it holds nothing.
		r.Broker.Service.DedupSnapshotInterval = 1
		// The worker looks for new topics only once a minute, or on a
		// change of the global configuration: its task starts late.
		r.Replicator.ScanInterval = time.Minute
	}, "east", "west")
	east := region(t, n, "east")
	const topic, count = "persistent://public/default/born-replicated", 20
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "m", count)
	if at, ok := replCursor(t, east, topic, "west"); !ok || at != (mledger.Position{}) {
		t.Fatalf("east's cursor for west: %v (exists %v), want it at the start", at, ok)
	}
	tasks, err := east.Replicator().Tasks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Fatalf("east's worker already runs %v: the test needs it to start late", tasks)
	}
	// Any change of the global configuration makes the worker scan.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Broker().Service().Global().CreateTenant(ctx, "nudge", global.TenantInfo{AllowedClusters: []string{"east"}}); err != nil {
		t.Fatal(err)
	}
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	checkPayloads(t, receiveAll(t, cons, count, 500*time.Millisecond), payloads("m", 0, count))
}

// TestReplicationToAnAddedRegion: a region added to public/default's
// clusters while a topic holds 100 old messages gets only the new ones
// (Pulsar's replicationStartAt=latest, the default), or all of them with
// replicationStartAt=earliest.
func TestReplicationToAnAddedRegion(t *testing.T) {
	for _, tc := range []struct {
		startAt broker.ReplicationStart
		want    []string
	}{
		{broker.ReplicationStartLatest, payloads("new", 0, 10)},
		{broker.ReplicationStartEarliest, append(payloads("old", 0, 100), payloads("new", 0, 10)...)},
	} {
		t.Run(string(tc.startAt), func(t *testing.T) {
			n, urls := startDevWith(t, func(r *node.RegionConfig) { r.Broker.Service.ReplicationStartAt = tc.startAt }, "east", "west")
			east := region(t, n, "east")
			setClusters(t, n, "east")
			const topic = "persistent://public/default/grown"
			p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			publish(t, p, "old", 100)
			if _, ok := replCursor(t, east, topic, "west"); ok {
				t.Fatal("a cursor for west before west is a cluster of the namespace")
			}
			setClusters(t, n, "east", "west")
			testkit.WaitFor(t, "east's cursor for west", func() bool { _, ok := replCursor(t, east, topic, "west"); return ok })
			cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
			publish(t, p, "new", 10)
			checkPayloads(t, receiveAll(t, cons, len(tc.want), 500*time.Millisecond), tc.want)
		})
	}
}

// TestReplicationToARemovedRegion: a region removed from public/default's
// clusters stops receiving, and what it received stays there; the source
// topic's cursor for it is deleted (so it no longer holds retention),
// whether a worker was running the task or not.
func TestReplicationToARemovedRegion(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	east := region(t, n, "east")
	eastClient := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	const topic = "persistent://public/default/leaving"
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	p, err := eastClient.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "before", 5)
	checkPayloads(t, receiveAll(t, cons, 5, 100*time.Millisecond), payloads("before", 0, 5))

	setClusters(t, n, "east")
	testkit.WaitFor(t, "east's cursor for west deleted", func() bool { _, ok := replCursor(t, east, topic, "west"); return !ok })
	testkit.WaitFor(t, "east's worker to drop the task", func() bool {
		tasks, err := east.Replicator().Tasks(context.Background())
		return err == nil && len(tasks) == 0
	})
	publish(t, p, "after", 5)
	receiveAll(t, cons, 0, time.Second)
	if _, ok := replCursor(t, east, topic, "west"); ok {
		t.Fatal("east's cursor for west came back")
	}
	// What west received stays there.
	again := newClient(t, pulsar.ClientOptions{URL: urls["west"]})
	old, err := again.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "late",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	checkPayloads(t, receiveAll(t, old, 5, 500*time.Millisecond), payloads("before", 0, 5))

	// Added back, west gets what is published from then on (latest).
	setClusters(t, n, "east", "west")
	testkit.WaitFor(t, "east's cursor for west again", func() bool { _, ok := replCursor(t, east, topic, "west"); return ok })
	publish(t, p, "back", 5)
	checkPayloads(t, receiveAll(t, cons, 5, 500*time.Millisecond), payloads("back", 0, 5))
}

// TestReplicationCursorOfARemovedRegionWithoutAWorker: with no worker
// running the tasks, the topic's owner still deletes the cursor of a
// removed region: at once for a loaded topic, and at its next load for a
// topic that was not loaded.
func TestReplicationCursorOfARemovedRegionWithoutAWorker(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	east := region(t, n, "east")
	if err := east.Replicator().Close(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	const loaded, unloaded = "persistent://public/default/kept-loaded", "persistent://public/default/unloaded"
	for _, topic := range []string{loaded, unloaded} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err != nil {
			t.Fatal(err)
		}
		publish(t, p, "m", 3)
		if topic == loaded {
			defer p.Close()
			continue
		}
		p.Close()
		tn, err := topology.ParseTopicName(topic)
		if err != nil {
			t.Fatal(err)
		}
		east.Broker().Service().Unload(tn)
	}
	for _, topic := range []string{loaded, unloaded} {
		if _, ok := replCursor(t, east, topic, "west"); !ok {
			t.Fatalf("%s: no cursor for west", topic)
		}
	}
	setClusters(t, n, "east")
	testkit.WaitFor(t, "the loaded topic's cursor for west deleted", func() bool { _, ok := replCursor(t, east, loaded, "west"); return !ok })
	if _, ok := replCursor(t, east, unloaded, "west"); !ok {
		t.Fatal("the unloaded topic's cursor is gone before its load: who deleted it?")
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: unloaded})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The load that serves the producer has synced the cursors.
	if _, ok := replCursor(t, east, unloaded, "west"); ok {
		t.Fatal("the reloaded topic still has its cursor for west")
	}
}

// TestReplicationThroughDestinationReloads: the destination topic is
// unloaded (the broker's unload, as an admin's does) three times while
// entries stream in; it loads again each time, its deduplication state
// rebuilt, and the other region gets every message exactly once, in order.
func TestReplicationThroughDestinationReloads(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	west := region(t, n, "west")
	const topic, count = "persistent://public/default/reloaded", 600
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic,
		BatchingMaxPublishDelay: time.Millisecond, BatchingMaxMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for i := range count {
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						t.Errorf("send: %v", err)
					}
				})
			if i%50 == 49 {
				if err := p.FlushWithCtx(context.Background()); err != nil {
					t.Errorf("flush: %v", err)
					return
				}
			}
		}
	})
	// Unload after the 100th, 250th and 400th message has arrived. The
	// consumer reconnects too, and gets what it had not acknowledged again:
	// the same stored message (same id), which is not a duplicate; the
	// same payload under another id would be one.
	var got []string
	seen := map[[3]int64]bool{}
	for len(got) < count {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(got), count, err)
		}
		cons.Ack(m)
		id := storedID(m)
		if seen[id] {
			continue // delivered again after the consumer reconnected
		}
		seen[id] = true
		got = append(got, string(m.Payload()))
		if n := len(got); n == 100 || n == 250 || n == 400 {
			west.Broker().Service().Unload(tn)
		}
	}
	if want := payloads("m", 0, count); !slices.Equal(got, want) {
		t.Fatalf("received %d messages, not m-0..m-%d exactly once in order: first difference at %d", len(got), count-1, firstDifference(got, want))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for {
		m, err := cons.Receive(ctx)
		if err != nil {
			break
		}
		cons.Ack(m)
		if !seen[storedID(m)] {
			t.Fatalf("a message more than the %d expected: %q", count, m.Payload())
		}
	}
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// storedID is where the message is stored: ledger, entry, batch index.
func storedID(m pulsar.Message) [3]int64 {
	return [3]int64{m.ID().LedgerID(), m.ID().EntryID(), int64(m.ID().BatchIdx())}
}

// TestReplicationOfAPartitionedTopic: partition i replicates to partition
// i. The partitioned-topic metadata is global, so both regions see three
// partitions.
func TestReplicationOfAPartitionedTopic(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	const topic, partitions, count = "persistent://public/default/parted", 3, 60
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcpt, err := n.Broker().Service().Global().CreateTopic(ctx, tn, global.TopicPolicies{Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range n.Regions() {
		if err := r.Broker().Service().Policies().Await(ctx, rcpt); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Broker().Service().Partitions(ctx, tn); err != nil || got != partitions {
			t.Fatalf("%s sees %d partitions (%v), want %d", r.Name(), got, err, partitions)
		}
	}
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	partitionOf := map[string]int32{}
	for i := range count {
		payload := fmt.Sprintf("m-%d", i)
		id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		partitionOf[payload] = id.PartitionIdx()
	}
	used := map[int32]bool{}
	for _, pi := range partitionOf {
		used[pi] = true
	}
	if len(used) != partitions {
		t.Fatalf("the keys used %d partitions of %d; the test needs all", len(used), partitions)
	}
	last := map[int32]int{} // the last message number seen per partition, for order
	for range count {
		m := receiveOne(t, cons)
		payload := string(m.Payload())
		want, ok := partitionOf[payload]
		switch {
		case !ok:
			t.Fatalf("west received %q, never sent", payload)
		case m.ID().PartitionIdx() != want || m.Topic() != fmt.Sprintf("%s-partition-%d", topic, want):
			t.Fatalf("%q was stored in east's partition %d, and arrived in west's %d (%s)", payload, want, m.ID().PartitionIdx(), m.Topic())
		}
		var num int
		if _, err := fmt.Sscanf(payload, "m-%d", &num); err != nil {
			t.Fatal(err)
		}
		if prev, seen := last[want]; seen && num <= prev {
			t.Fatalf("partition %d: %q after m-%d", want, payload, prev)
		}
		last[want] = num
		delete(partitionOf, payload)
	}
	receiveAll(t, cons, 0, time.Second)
}

// TestReplicationOfAnAvroTopic: an Avro producer's messages in east are
// read with their schema by a consumer in west, and their schema_version
// names the same schema there, although west's registry numbers its
// versions on its own: it had another schema first.
func TestReplicationOfAnAvroTopic(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	west := region(t, n, "west")
	const topic, count = "persistent://public/default/avro", 10
	const westFirst = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	const eastSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int","default":0}]}`
	type order struct {
		ID  string `avro:"id"`
		Qty int32  `avro:"qty"`
	}
	// West's registry gets version 0 from a producer of its own.
	wp, err := newClient(t, pulsar.ClientOptions{URL: urls["west"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic,
		Schema: pulsar.NewAvroSchema(westFirst, nil)})
	if err != nil {
		t.Fatal(err)
	}
	wp.Close()
	cons, err := newClient(t, pulsar.ClientOptions{URL: urls["west"]}).Subscribe(pulsar.ConsumerOptions{Topic: topic,
		SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		Schema: pulsar.NewAvroSchema(eastSchema, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ep, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic,
		// Batched: pulsar-client-go v0.19 stamps schema_version only on
		// batches (genMetadata leaves it out of a single message).
		Schema: pulsar.NewAvroSchema(eastSchema, nil), BatchingMaxPublishDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	for i := range count {
		if _, err := ep.Send(context.Background(), &pulsar.ProducerMessage{Value: &order{ID: fmt.Sprintf("o-%d", i), Qty: int32(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		m := receiveOne(t, cons)
		var got order
		if err := m.GetSchemaValue(&got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if want := (order{ID: fmt.Sprintf("o-%d", i), Qty: int32(i)}); got != want || m.GetReplicatedFrom() != "east" {
			t.Fatalf("message %d: %+v from %q, want %+v from east", i, got, m.GetReplicatedFrom(), want)
		}
		info, _, err := west.Broker().Service().Schema(context.Background(), tn, m.SchemaVersion())
		if err != nil {
			t.Fatalf("message %d: schema version %x in west: %v", i, m.SchemaVersion(), err)
		}
		if !strings.Contains(string(info.Data), `"qty"`) {
			t.Fatalf("message %d: its schema_version %x names %s in west, not east's schema", i, m.SchemaVersion(), info.Data)
		}
	}
}

// receiveOne receives and acknowledges one message, failing after a
// minute without one.
func receiveOne(t *testing.T, cons pulsar.Consumer) pulsar.Message {
	t.Helper()
	m := receiveUnacked(t, cons)
	cons.Ack(m)
	return m
}

// TestReplicationExpiresByMessageTTL: the namespace's message TTL applies to
// the replication cursor as Pulsar applies it to a replicator's: messages
// older than the TTL when the task reads them are not sent, and are counted
// as expired; newer ones are.
func TestReplicationExpiresByMessageTTL(t *testing.T) {
	n, urls := startDevWith(t, func(r *node.RegionConfig) { r.Broker.Service.ReplicationStartAt = broker.ReplicationStartEarliest }, "east", "west")
	east := region(t, n, "east")
	setClusters(t, n, "east")
	const topic = "persistent://public/default/expiring"
	p, err := newClient(t, pulsar.ClientOptions{URL: urls["east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "old", 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, rcpt, err := n.Broker().Service().Global().UpdateNamespace(ctx, "public", "default", func(pol *global.Policies) error {
		ttl := 1
		pol.MessageTTLInSeconds = &ttl
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := east.Broker().Service().Policies().Await(ctx, rcpt); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // lets the old messages' TTL pass: a span, not a state
	setClusters(t, n, "east", "west")
	cons := subscribeIn(t, map[string]string{"west": urls["west"]}, topic)["west"]
	publish(t, p, "new", 5)
	checkPayloads(t, receiveAll(t, cons, 5, 500*time.Millisecond), payloads("new", 0, 5))
	testkit.WaitFor(t, "the 10 old messages counted as expired", func() bool {
		tasks, err := mledger.ReplicationTasks(ctx, east.Store(), "east", topic)
		return err == nil && tasks["west"].MsgExpiredCounter == 10
	})
}
