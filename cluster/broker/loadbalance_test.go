package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// metricValue is the value of the series of family name in reg whose
// labels include the pairs of labels ("name", "value", ...); 0 when none.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// withRegistry has the broker register its metrics in reg.
func withRegistry(reg *prometheus.Registry) func(*brokertest.Config) {
	return func(c *brokertest.Config) { c.Service.Registerer = reg }
}

// fastLoadBalance reports every 200ms, and splits nothing unless asked.
func fastLoadBalance(c *brokertest.Config) {
	c.Service.LoadBalance.ReportInterval = 200 * time.Millisecond
	c.Service.LoadBalance.SheddingInterval = time.Second
	c.Service.LoadBalance.AutoBundleSplit = false
}

// sender sends to p until stopped, perTick messages every tick, counting
// acknowledgements and errors.
type sender struct {
	acked, failed atomic.Int64
	firstErr      atomic.Value
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startSender(p pulsar.Producer, perTick int, tick time.Duration) *sender {
	s := &sender{stop: make(chan struct{})}
	s.wg.Go(func() {
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for i := 0; ; {
			for range perTick {
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)},
					func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
						if err != nil {
							s.failed.Add(1)
							s.firstErr.CompareAndSwap(nil, err)
							return
						}
						s.acked.Add(1)
					})
				i++
			}
			select {
			case <-s.stop:
				return
			case <-ticker.C:
			}
		}
	})
	return s
}

// halt stops sending and waits for every send to be answered.
func (s *sender) halt(t testing.TB, p pulsar.Producer) {
	t.Helper()
	close(s.stop)
	s.wg.Wait()
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// TestLoadReportUnderProducer checks that a broker's load report shows
// its topic, producer, consumer and rates, in memory and in its
// registration.
func TestLoadReportUnderProducer(t *testing.T) {
	b := startBroker(t, nil, fastLoadBalance)
	c := newClient(t, b.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	s := startSender(p, 10, 10*time.Millisecond)
	defer s.halt(t, p)
	stopAcks := make(chan struct{})
	var acks sync.WaitGroup
	acks.Go(func() {
		for {
			select {
			case m := <-cons.Chan():
				_ = cons.Ack(m.Message)
			case <-stopAcks:
				return
			}
		}
	})
	defer acks.Wait()
	defer close(stopAcks)
	bundle, err := b.Service().Bundle(mustTopic(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	name := "public/default/" + bundle.String()
	var rep loadmgr.LoadReport
	testkit.WaitFor(t, "a load report with the producer's traffic", func() bool {
		var ok bool
		rep, ok = b.Service().LoadManager().LoadReport()
		st := rep.LastStats[name]
		return ok && rep.NumTopics == 1 && rep.NumProducers == 1 && rep.NumConsumers == 1 &&
			rep.MsgRateIn > 0 && rep.MsgThroughputIn > 0 && rep.MsgRateOut > 0 && rep.MsgThroughputOut > 0 &&
			st.TopicsCount == 1 && st.ProducerCount == 1 && st.ConsumerCount == 1 && st.MsgRateIn > 0
	})
	if !slices.Contains(rep.Bundles, name) || rep.NumBundles != len(rep.Bundles) || rep.Connections != 1 {
		t.Fatalf("report bundles %v (%d), connections %d; want %s and one connection", rep.Bundles, rep.NumBundles, rep.Connections, name)
	}
	if rep.PulsarServiceURL != b.ServiceURL() || rep.CPU.Limit <= 0 || rep.Memory.Usage <= 0 {
		t.Fatalf("report %+v", rep)
	}
	testkit.WaitFor(t, "the report in the broker's registration", func() bool {
		brokers, err := b.Service().LoadManager().Brokers(context.Background())
		return err == nil && len(brokers) == 1 && brokers[0].Load != nil && brokers[0].Load.NumProducers == 1
	})
}

// TestLeadershipMovesOnClose checks that the region elects one leader,
// that every broker names the same one, and that another broker leads
// once the leader closes.
func TestLeadershipMovesOnClose(t *testing.T) {
	storage := newStorage(t)
	brokers := map[string]*brokertest.Broker{}
	regs := map[string]*prometheus.Registry{}
	for range 3 {
		reg := prometheus.NewRegistry()
		b := startBroker(t, storage, fastLoadBalance, withRegistry(reg))
		brokers[b.ID()], regs[b.ID()] = b, reg
	}
	// leadersByGauge are the brokers whose meridian_broker_region_leader is 1.
	leadersByGauge := func() []string {
		var ids []string
		for id := range brokers {
			if metricValue(t, regs[id], "meridian_broker_region_leader") == 1 {
				ids = append(ids, id)
			}
		}
		return ids
	}
	leaderOf := func() (string, bool) {
		var ids []string
		for _, b := range brokers {
			l, err := b.Service().LoadManager().Leader(context.Background())
			if err != nil {
				return "", false
			}
			ids = append(ids, l.BrokerID)
		}
		ids = slices.Compact(ids)
		_, live := brokers[ids[0]]
		return ids[0], len(ids) == 1 && live
	}
	var first string
	testkit.WaitFor(t, "a leader every broker agrees on", func() bool {
		var ok bool
		first, ok = leaderOf()
		return ok
	})
	testkit.WaitFor(t, "the leader's gauge", func() bool { return slices.Equal(leadersByGauge(), []string{first}) })
	brokers[first].Close()
	delete(brokers, first)
	var next string
	testkit.WaitFor(t, "a new leader", func() bool {
		var ok bool
		next, ok = leaderOf()
		return ok && next != first
	})
	testkit.WaitFor(t, "the new leader's gauge", func() bool { return slices.Equal(leadersByGauge(), []string{next}) })
}

// TestSplitUnderProducer has a broker split a namespace's one bundle,
// past its topic bound, while producers send to four of its topics, and
// checks that no send failed and every message arrived once.
func TestSplitUnderProducer(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startBroker(t, nil, fastLoadBalance, withRegistry(reg), func(c *brokertest.Config) {
		c.Service.LoadBalance.AutoBundleSplit = true
		c.Service.LoadBalance.BundleMaxTopics = 1
		c.Service.LoadBalance.MaxBundles = 8
	})
	one, err := global.EvenBundlesData(1)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, b, "split", global.Policies{Bundles: &one})
	c := newClient(t, b.ServiceURL())
	type flow struct {
		p    pulsar.Producer
		cons pulsar.Consumer
		s    *sender
	}
	var flows []flow
	for i := range 4 {
		topic := topicIn(t, ns, fmt.Sprint("-", i))
		cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
		flows = append(flows, flow{p: p, cons: cons, s: startSender(p, 10, 10*time.Millisecond)})
	}
	testkit.WaitFor(t, "the bundle to split", func() bool {
		bs, err := b.Service().LoadManager().NamespaceBundles("public", "split")
		return err == nil && len(bs) > 1
	})
	// Keep sending across the split for a while: a few more reports.
	before := flows[0].s.acked.Load()
	testkit.WaitFor(t, "sends after the split", func() bool { return flows[0].s.acked.Load() > before+100 })
	for _, f := range flows {
		f.s.halt(t, f.p)
		if n := f.s.failed.Load(); n > 0 {
			t.Fatalf("%d sends failed across the split; first: %v", n, f.s.firstErr.Load())
		}
	}
	for i, f := range flows {
		want := f.s.acked.Load()
		seen := map[string]bool{}
		for int64(len(seen)) < want {
			m := receive(t, f.cons)
			if seen[string(m.Payload())] {
				t.Fatalf("topic %d: %s delivered twice", i, m.Payload())
			}
			seen[string(m.Payload())] = true
			_ = f.cons.Ack(m)
		}
	}
	// Each split makes one more bundle and counts once (the count comes
	// after the cache shows the new bundles: read it between two reads of
	// them).
	bundles := func() int { bs, _ := b.Service().LoadManager().NamespaceBundles("public", "split"); return len(bs) }
	var n int
	testkit.WaitFor(t, "one split counted per new bundle", func() bool {
		n = bundles()
		splits := metricValue(t, reg, "meridian_broker_load_balance_total", "action", "split")
		return int(splits) == n-1 && bundles() == n
	})
	t.Logf("namespace split into %d bundles", n)
}

// TestSplitBadInput checks the errors of a split that cannot be made.
func TestSplitBadInput(t *testing.T) {
	b := startBroker(t, nil, fastLoadBalance)
	ctx := context.Background()
	lm := b.Service().LoadManager()
	bs, err := lm.NamespaceBundles("public", "default")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		tenant    string
		ns        string
		bundle    topology.Bundle
		wantError error
	}{
		{"namespace does not exist", "public", "missing", bs[0], wire.ErrTopicNotFound},
		{"not a bundle of the namespace", "public", "default", topology.Bundle{Lower: bs[0].Lower, Upper: bs[0].Upper - 1}, loadmgr.ErrBundleNotFound},
	}
	for _, tc := range cases {
		if _, _, err := lm.SplitBundle(ctx, tc.tenant, tc.ns, tc.bundle); !errors.Is(err, tc.wantError) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantError)
		}
	}
	// A bundle of one hash cannot be split.
	tiny := global.BundlesData{NumBundles: 2, Boundaries: []string{"0x00000000", "0x00000001", "0xffffffff"}}
	createNamespace(t, b, "tiny", global.Policies{Bundles: &tiny})
	if _, _, err := lm.SplitBundle(ctx, "public", "tiny", topology.Bundle{Lower: 0, Upper: 1}); !errors.Is(err, wire.ErrNotAllowed) {
		t.Errorf("split of a one-hash bundle: %v, want NotAllowed", err)
	}
	if got, _ := lm.NamespaceBundles("public", "default"); !slices.Equal(got, bs) {
		t.Errorf("bundles changed by refused splits: %v, was %v", got, bs)
	}
}

// TestSplitSeenByOtherBroker: after a split on the bundle's owner, another
// broker finds every topic of the old bundle owned by the same broker, in
// one of the halves, and the old bundle's claim is gone.
func TestSplitSeenByOtherBroker(t *testing.T) {
	storage := newStorage(t)
	a := startBroker(t, storage, fastLoadBalance)
	b := startBroker(t, storage, fastLoadBalance)
	one, err := global.EvenBundlesData(1)
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, a, "splitseen", global.Policies{Bundles: &one})
	testkit.WaitFor(t, "the namespace in the other broker's cache", func() bool {
		_, ok := b.Service().Policies().Namespace("public", "splitseen")
		return ok
	})
	ctx := context.Background()
	whole := topology.Bundle{Lower: 0, Upper: 0xffffffff}
	owner, _, err := a.Service().LoadManager().BundleOwner(ctx, "public", "splitseen", whole)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*brokertest.Broker{a.ID(): a, b.ID(): b}
	splitter, other := byID[owner.BrokerID], a
	if other == splitter {
		other = b
	}
	if _, _, err := splitter.Service().LoadManager().SplitBundle(ctx, "public", "splitseen", whole); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the halves in the other broker's cache", func() bool {
		bs, err := other.Service().LoadManager().NamespaceBundles("public", "splitseen")
		return err == nil && len(bs) == 2
	})
	for i := range 8 {
		topic := mustTopic(t, fmt.Sprintf("persistent://public/splitseen/t-%d", i))
		o, mine, err := other.Service().Owner(ctx, topic)
		if err != nil || mine || o.BrokerID != splitter.ID() {
			t.Fatalf("owner of %s seen by the other broker: %+v (mine %v), %v; want %s", topic, o, mine, err, splitter.ID())
		}
	}
	if _, err := storage.Store.Get(ctx, meta.RegionKey(brokertest.Region, "owners", "public", "splitseen", whole.String())); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the old bundle's claim: %v, want it deleted", err)
	}
}
