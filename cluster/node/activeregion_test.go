package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
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

// TestSwitchMovesConnectedClients: a producer that keeps sending and a
// consumer, connected in east through a service URL that lists both
// regions, move to west within seconds of west becoming the active region:
// east tells each of them where to go (TOPIC_MIGRATED, with every region's
// brokers) and closes it. The producer gets no send error and the consumer
// every message; the pause is printed. Switched back, both return to east,
// whose subscription takes its consumer again.
func TestSwitchMovesConnectedClients(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "east" })
	const topic, total, switchAt = "persistent://public/default/switched", 600, 200
	both := urls["east"] + "," + strings.TrimPrefix(urls["west"], "pulsar://")
	c := newClient(t, pulsar.ClientOptions{URL: both})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "switcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	name, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	east, west := adminOf(t, n, "east"), adminOf(t, n, "west")
	if !servesClients(t, east, *name, "switcher", "s") {
		t.Fatal("the producer and the consumer are not in east, the active region")
	}

	var (
		mu        sync.Mutex
		latencies []time.Duration
		sendErrs  []error
		got       = map[string]int{}
		lastRecv  time.Time
		recvGap   time.Duration
	)
	go func() {
		for {
			m, err := cons.Receive(context.Background())
			if err != nil {
				return // closed
			}
			cons.Ack(m)
			mu.Lock()
			now := time.Now()
			if !lastRecv.IsZero() && len(got) < total {
				recvGap = max(recvGap, now.Sub(lastRecv))
			}
			lastRecv = now
			got[string(m.Payload())]++
			mu.Unlock()
		}
	}()
	receipts := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(latencies) + len(sendErrs)
	}
	pace := time.NewTicker(2 * time.Millisecond) // ~500 msg/s: the workload's rate, not a wait
	defer pace.Stop()
	for i := range total {
		<-pace.C
		if i == switchAt {
			testkit.WaitFor(t, "the receipts of the messages sent before the switch", func() bool { return receipts() == switchAt })
			updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "west" })
		}
		sent := time.Now()
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					sendErrs = append(sendErrs, err)
					return
				}
				latencies = append(latencies, time.Since(sent))
			})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	testkit.WaitFor(t, "every receipt", func() bool { return receipts() == total })
	testkit.WaitFor(t, "the producer and the consumer to serve in west", func() bool {
		return servesClients(t, west, *name, "switcher", "s")
	})
	if servesClients(t, east, *name, "switcher", "s") {
		t.Fatal("the producer or the consumer is still in east")
	}
	testkit.WaitFor(t, "the consumer to receive every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == total
	})
	mu.Lock()
	if len(sendErrs) > 0 {
		t.Fatalf("%d sends failed, the first: %v", len(sendErrs), sendErrs[0])
	}
	for i := range total {
		if got[fmt.Sprintf("m-%d", i)] == 0 {
			t.Fatalf("m-%d was never received", i)
		}
	}
	slices.Sort(latencies)
	pause := latencies[len(latencies)-1]
	t.Logf("switch: send latency median %v, max %v (the producer's pause); longest gap between two deliveries %v",
		latencies[len(latencies)/2].Round(time.Millisecond), pause.Round(time.Millisecond), recvGap.Round(time.Millisecond))
	mu.Unlock()
	if pause > 10*time.Second {
		t.Fatalf("a send waited %v across the switch, want a few seconds at most", pause)
	}

	// And back: the TOPIC_MIGRATED URL listed east too, and east's
	// subscription, opened again without consumers when they left, takes
	// its consumer back.
	updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "east" })
	testkit.WaitFor(t, "the producer and the consumer to come back to east", func() bool {
		return servesClients(t, east, *name, "switcher", "s")
	})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("back")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the consumer to receive what was sent back in east", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["back"] > 0
	})
}

// servesClients reports whether adm's region serves topic's producer named
// producer and a consumer of subscription sub.
func servesClients(t *testing.T, adm pulsaradmin.Client, topic utils.TopicName, producer, sub string) bool {
	t.Helper()
	return servesProducer(adm, topic, producer) && servesConsumer(adm, topic, sub)
}

// servesProducer reports whether adm's region serves topic's producer
// named producer.
func servesProducer(adm pulsaradmin.Client, topic utils.TopicName, producer string) bool {
	st, err := adm.Topics().GetStats(topic)
	return err == nil && slices.ContainsFunc(st.Publishers, func(p utils.PublisherStats) bool { return p.ProducerName == producer })
}

// servesConsumer reports whether adm's region serves a consumer of topic's
// subscription sub.
func servesConsumer(adm pulsaradmin.Client, topic utils.TopicName, sub string) bool {
	st, err := adm.Topics().GetStats(topic)
	return err == nil && len(st.Subscriptions[sub].Consumers) > 0
}

// migrateCluster posts Pulsar's cluster migration of region to the
// broker and web URLs given, and returns the status and body.
func migrateCluster(t *testing.T, n *node.Node, region string, migrated bool, brokerURL, webURL string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"serviceUrl":%q,"brokerServiceUrl":%q}`, webURL, brokerURL)
	url := fmt.Sprintf("%s/admin/v2/clusters/%s/migrate?migrated=%t", n.Broker().WebURL(), region, migrated)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClusterMigrationMovesConsumersOnceDrained: Pulsar's cluster migration
// (PIP-188) of east to west, on a namespace that only east serves. With
// migrated=false the URLs are recorded and nobody moves; with
// migrated=true the producer moves to west at once, while the consumer
// stays in east until it has acked east's backlog, and then moves too: it
// gets every message, those stored in east and those stored in west after.
func TestClusterMigrationMovesConsumersOnceDrained(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rcpt, err := n.Broker().Service().Global().CreateNamespace(ctx, "public", "eastonly", global.Policies{ReplicationClusters: []string{"east"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range n.Regions() {
		if err := r.Broker().Service().Policies().Await(ctx, rcpt); err != nil {
			t.Fatal(err)
		}
	}
	const topic, before, after = "persistent://public/eastonly/migrated", 10, 5
	c := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "mover", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "m", before)

	westWeb := region(t, n, "west").Broker().WebURL()
	if status, body := migrateCluster(t, n, "east", false, urls["west"], westWeb); status != http.StatusOK {
		t.Fatalf("recording the migration: %d %s", status, body)
	}
	east, west := adminOf(t, n, "east"), adminOf(t, n, "west")
	name, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	var policies struct {
		Migrated bool `json:"migrated"`
		URL      struct {
			BrokerServiceURL string `json:"brokerServiceUrl"`
		} `json:"migratedClusterUrl"`
	}
	// The cluster record's own update (pulsar-admin sends its URLs alone)
	// keeps the migration.
	record, err := east.Clusters().Get("east")
	if err != nil {
		t.Fatal(err)
	}
	record.Name = "east"
	if err := east.Clusters().Update(record); err != nil {
		t.Fatal(err)
	}
	getJSON(t, n.Broker().WebURL()+"/admin/v2/clusters/east/migrate", &policies)
	if policies.Migrated || policies.URL.BrokerServiceURL != urls["west"] {
		t.Fatalf("after migrated=false and an update of the record: %+v, want not migrated, to %s", policies, urls["west"])
	}

	if status, body := migrateCluster(t, n, "east", true, urls["west"], westWeb); status != http.StatusOK {
		t.Fatalf("migrating: %d %s", status, body)
	}
	testkit.WaitFor(t, "the producer to move to west", func() bool { return servesProducer(west, *name, "mover") })
	if servesProducer(east, *name, "mover") {
		t.Fatal("the producer is still in east")
	}
	if !servesConsumer(east, *name, "s") {
		t.Fatal("the consumer left east before draining its backlog there")
	}
	got := receiveAll(t, cons, before, time.Millisecond)
	checkPayloads(t, got, payloads("m", 0, before))
	testkit.WaitFor(t, "the drained consumer to move to west", func() bool { return servesConsumer(west, *name, "s") })
	for i := before; i < before+after; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	checkPayloads(t, receiveAll(t, cons, after, 500*time.Millisecond), payloads("m", before, before+after))
}

// TestPlannedSwitchCarriesTheLastAcks: with a sync interval of an hour, a
// replicated subscription's acks in east reach west only because the
// switch carries them: east writes the state before it lets the consumer
// go, and west reads it before it attaches the consumer. So a consumer
// that acked everything in east (each ack confirmed) gets nothing of it
// again in west.
func TestPlannedSwitchCarriesTheLastAcks(t *testing.T) {
	n, urls := startDevWith(t, func(r *node.RegionConfig) {
		r.Broker.Service.ReplicatedSubscriptions = broker.ReplicatedSubscriptionsConfig{Interval: time.Hour, MaxRanges: 10_000}
	}, "east", "west")
	updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "east" })
	const topic, total = "persistent://public/default/switch-acks", 50
	both := urls["east"] + "," + strings.TrimPrefix(urls["west"], "pulsar://")
	c := newClient(t, pulsar.ClientOptions{URL: both})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReplicateSubscriptionState: true, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "acks", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range total {
		send(t, p, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)})
	}
	for range total {
		if err := cons.Ack(receiveUnacked(t, cons)); err != nil {
			t.Fatal(err)
		}
	}
	// Every entry is in west, so that east's state names only entries west
	// can place.
	west := region(t, n, "west").Broker().Service()
	testkit.WaitFor(t, "west to store every entry", func() bool {
		tp, err := west.Topic(t.Context(), mustTopicName(t, topic), false)
		return err == nil && tp.Stats().Entries == total
	})

	updateNamespace(t, n, func(p *global.Policies) { p.ActiveRegion = "west" })
	name, err := utils.GetTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the producer and the consumer to serve in west", func() bool {
		return servesClients(t, adminOf(t, n, "west"), *name, "acks", "s")
	})
	send(t, p, &pulsar.ProducerMessage{Payload: []byte("sentinel")})
	if again := drainUntil(t, cons, "sentinel"); len(again) > 0 {
		t.Fatalf("west delivered %d messages acked in east before the switch: %v", len(again), again)
	}
}
