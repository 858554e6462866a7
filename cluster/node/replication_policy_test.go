package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/cluster/node"
)

// adminOf is a pulsaradmin client of region's admin API.
func adminOf(t *testing.T, n *node.Node, region string) pulsaradmin.Client {
	t.Helper()
	for _, r := range n.Regions() {
		if r.Name() == region {
			adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: r.Broker().WebURL()})
			if err != nil {
				t.Fatal(err)
			}
			return adm
		}
	}
	t.Fatalf("no region %s", region)
	return nil
}

// replicationTime publishes count messages to topic in region from, as fast
// as a batching producer sends them, and returns how long they took to
// reach cons (in another region) from the first send.
func replicationTime(t *testing.T, fromURL string, cons pulsar.Consumer, topic string, count int) time.Duration {
	t.Helper()
	p, err := newClient(t, pulsar.ClientOptions{URL: fromURL}).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	for i := range count {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	receiveAll(t, cons, count, 200*time.Millisecond)
	return time.Since(start) - 200*time.Millisecond // less receiveAll's quiet wait
}

// TestReplicationDispatchRate: a topic's replicatorDispatchRate of 50
// messages a second holds 200 messages to at least 3 s (a period's worth at
// once, then 50 a second), a topic without one is not slowed, and removing
// the rate frees the running task within its refresh.
func TestReplicationDispatchRate(t *testing.T) {
	n, urls := startDev(t, "east", "west")
	adm := adminOf(t, n, "east")
	const limited, free, count = "persistent://public/default/rate-limited", "persistent://public/default/rate-free", 200
	for _, topic := range []string{limited, free} {
		tn, _ := utils.GetTopicName(topic)
		if err := adm.Topics().Create(*tn, 0); err != nil {
			t.Fatal(err)
		}
	}
	tn, _ := utils.GetTopicName(limited)
	if err := adm.Topics().SetReplicatorDispatchRate(*tn, utils.DispatchRateData{
		DispatchThrottlingRateInMsg: 50, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}); err != nil {
		t.Fatal(err)
	}
	west := map[string]string{"west": urls["west"]}
	freeCons, limitedCons := subscribeIn(t, west, free)["west"], subscribeIn(t, west, limited)["west"]

	// Only the lower bound is a wall-clock assertion: a loaded machine can
	// make anything slower, never a rate-limited task faster. How much
	// faster the free topic is, is logged; the limiter's own timing is
	// tested on a fake clock (replicator/ratelimit_test.go).
	freeTook := replicationTime(t, urls["east"], freeCons, free, count)
	limitedTook := replicationTime(t, urls["east"], limitedCons, limited, count)
	if limitedTook < 3*time.Second {
		t.Errorf("%d messages at a replicator dispatch rate of 50/s replicated in %v; want at least 3s", count, limitedTook)
	}
	t.Logf("%d messages replicated in %v without a rate, %v at 50 msg/s", count, freeTook, limitedTook)

	// Removed, the rate stops holding the task that is running.
	if err := adm.Topics().RemoveReplicatorDispatchRate(*tn); err != nil {
		t.Fatal(err)
	}
	// The task reads the rate again within its ScanInterval (50ms here);
	// a batch sent meanwhile may still be held, so look again until one
	// run takes less than half the limited one.
	deadline := time.Now().Add(time.Minute)
	for {
		d := replicationTime(t, urls["east"], limitedCons, limited, count)
		if d < limitedTook/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the rate was removed, %d messages still took %v", count, d)
		}
	}
}

// TestReplicationTopicClustersOverride: a topic's replication clusters,
// set through the admin API over its namespace's, narrow where its
// partitions replicate, and other topics keep the namespace's.
func TestReplicationTopicClustersOverride(t *testing.T) {
	n, urls := startDev(t, "east", "west", "south")
	adm := adminOf(t, n, "east")
	const narrow, wide = "persistent://public/default/narrow", "persistent://public/default/wide"
	// Partitioned, so that the policy is in place before any partition is
	// stored in east and a replication task could start for it.
	tn, _ := utils.GetTopicName(narrow)
	if err := adm.Topics().Create(*tn, 2); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().SetReplicationClusters(*tn, []string{"east", "west"}); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Topics().GetReplicationClusters(*tn); err != nil || fmt.Sprint(got) != "[east west]" {
		t.Fatalf("topic clusters %v, %v", got, err)
	}
	remotes := map[string]string{"west": urls["west"], "south": urls["south"]}
	narrowCons, wideCons := subscribeIn(t, remotes, narrow), subscribeIn(t, remotes, wide)
	c := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	for _, topic := range []string{narrow, wide} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprint(i), Payload: fmt.Appendf(nil, "%s-%d", topic, i)}); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	receiveAll(t, wideCons["south"], 10, 0)
	receiveAll(t, wideCons["west"], 10, 0)
	receiveAll(t, narrowCons["west"], 10, 0)
	// wide reached south, so narrow would have by now: nothing may come.
	receiveAll(t, narrowCons["south"], 0, time.Second)
}
