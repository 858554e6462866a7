package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// TestBacklogQuota: a topic whose slowest subscription is over the
// namespace's storage quota refuses producers (producer_request_hold) until
// the subscription catches up, and with consumer_backlog_eviction the
// subscription is moved forward instead.
func TestBacklogQuota(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Service.BacklogQuotaCheckInterval = time.Second })
	c := newClient(t, r.ServiceURL())
	quota := func(policy global.BacklogPolicy) map[global.BacklogQuotaType]global.BacklogQuota {
		return map[global.BacklogQuotaType]global.BacklogQuota{
			global.DestinationStorage: {LimitSize: 10 << 10, LimitTime: -1, Policy: policy},
		}
	}
	fill := func(topic string) pulsar.Consumer {
		cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		for range 20 {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: make([]byte, 1024)}); err != nil {
				t.Fatal(err)
			}
		}
		return cons
	}

	ns := createNamespace(t, r, "quota-hold", global.Policies{BacklogQuotaMap: quota(global.ProducerRequestHold)})
	topic := "persistent://" + ns + "/t"
	cons := fill(topic)
	short, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if p, err := short.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		p.Close()
		t.Fatal("a producer was admitted to a topic over its backlog quota")
	}
	for range 20 {
		cons.Ack(receive(t, cons))
	}
	testkit.WaitFor(t, "a producer admitted once the backlog is consumed", func() bool {
		p, err := short.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			p.Close()
		}
		return err == nil
	})

	ns = createNamespace(t, r, "quota-evict", global.Policies{BacklogQuotaMap: quota(global.ConsumerBacklogEviction)})
	topic = "persistent://" + ns + "/t"
	fill(topic)
	testkit.WaitFor(t, "the slow subscription moved under the quota", func() bool {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			return false
		}
		return tp.Stats().Subscriptions["slow"].MsgBacklog <= 10
	})
}

func mustTopic(t testing.TB, name string) topology.TopicName {
	t.Helper()
	tn, err := topology.ParseTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// TestBacklogQuotaCountsReplication: a replication cursor holds a topic's
// backlog as a subscription does, so a remote region that receives nothing
// (no replicator runs here) puts the topic over its quota and producers are
// refused.
func TestBacklogQuotaCountsReplication(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Service.BacklogQuotaCheckInterval = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs := r.Service().Global()
	if _, err := gs.CreateCluster(ctx, "far", global.ClusterData{BrokerServiceURL: "pulsar://far.invalid:6650"}); err != nil {
		t.Fatal(err)
	}
	_, rc, err := gs.UpdateTenant(ctx, "public", func(ti *global.TenantInfo) error {
		ti.AllowedClusters = append(ti.AllowedClusters, "far")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Service().Policies().Await(ctx, rc); err != nil {
		t.Fatal(err)
	}
	quota := map[global.BacklogQuotaType]global.BacklogQuota{
		global.DestinationStorage: {LimitSize: 10 << 10, LimitTime: -1, Policy: global.ProducerRequestHold},
	}
	ns := createNamespace(t, r, "quota-repl", global.Policies{BacklogQuotaMap: quota,
		ReplicationClusters: []string{"standalone", "far"}})
	topic := "persistent://" + ns + "/t"
	c := newClient(t, r.ServiceURL())
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for range 20 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: make([]byte, 1024)}); err != nil {
			t.Fatal(err)
		}
	}
	short, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	testkit.WaitFor(t, "a producer refused on a topic whose replication backlog is over the quota", func() bool {
		p, err := short.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			p.Close()
		}
		return err != nil
	})
}

// TestBacklogQuotaMessageAge: a message_age quota holds producers while a
// subscription has a message stored longer ago than its limit, and admits
// them again once the subscription consumed it; under
// consumer_backlog_eviction such messages expire instead.
func TestBacklogQuotaMessageAge(t *testing.T) {
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Service.BacklogQuotaCheckInterval = time.Second })
	c := newClient(t, r.ServiceURL())
	ageQuota := func(policy global.BacklogPolicy) map[global.BacklogQuotaType]global.BacklogQuota {
		return map[global.BacklogQuotaType]global.BacklogQuota{
			global.MessageAge: {LimitSize: -1, LimitTime: 1, Policy: policy},
		}
	}
	fill := func(topic string) pulsar.Consumer {
		cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		for range 5 {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
		return cons
	}
	short, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	admitted := func(topic string) bool {
		p, err := short.CreateProducer(pulsar.ProducerOptions{Topic: topic})
		if err == nil {
			p.Close()
		}
		return err == nil
	}

	topic := "persistent://" + createNamespace(t, r, "age-hold", global.Policies{BacklogQuotaMap: ageQuota(global.ProducerRequestHold)}) + "/t"
	cons := fill(topic)
	testkit.WaitFor(t, "a producer refused while the backlog holds a message older than a second", func() bool { return !admitted(topic) })
	for range 5 {
		cons.Ack(receive(t, cons))
	}
	testkit.WaitFor(t, "a producer admitted once the backlog is consumed", func() bool { return admitted(topic) })

	topic = "persistent://" + createNamespace(t, r, "age-evict", global.Policies{BacklogQuotaMap: ageQuota(global.ConsumerBacklogEviction)}) + "/t"
	fill(topic)
	testkit.WaitFor(t, "the slow subscription's messages older than a second expired", func() bool {
		tp, err := r.Service().Topic(context.Background(), mustTopic(t, topic), false)
		if err != nil {
			return false
		}
		s := tp.Stats().Subscriptions["slow"]
		return s.MsgBacklog == 0 && s.Expired == 5
	})
	if !admitted(topic) {
		t.Error("a producer was refused under consumer_backlog_eviction")
	}
}
