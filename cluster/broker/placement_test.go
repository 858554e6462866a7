package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// startBrokers starts n brokers on one storage.
func startBrokers(t *testing.T, storage *brokertest.Storage, n int, mutate ...func(*brokertest.Config)) []*brokertest.Broker {
	t.Helper()
	bs := make([]*brokertest.Broker, n)
	for i := range bs {
		bs[i] = startBroker(t, storage, mutate...)
	}
	return bs
}

// namespaceOfBundles creates public/<name> with n even bundles, and waits
// until every broker's cache shows it.
func namespaceOfBundles(t *testing.T, brokers []*brokertest.Broker, name string, n int) string {
	t.Helper()
	d, err := global.EvenBundlesData(n)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, brokers[0], name, global.Policies{Bundles: &d})
	for _, b := range brokers[1:] {
		testkit.WaitFor(t, "the namespace in every broker's cache", func() bool {
			_, ok := b.Service().Policies().Namespace("public", name)
			return ok
		})
	}
	return ns
}

// topicPerBundle returns one topic of ns in each of its bundles, in the
// order of the bundles' first topics found.
func topicPerBundle(t *testing.T, b *brokertest.Broker, ns string, bundles int) []string {
	t.Helper()
	seen := map[string]bool{}
	var topics []string
	for i := 0; len(topics) < bundles; i++ {
		if i > 100*bundles {
			t.Fatalf("found topics of only %d of %d bundles", len(topics), bundles)
		}
		name := fmt.Sprintf("persistent://%s/t-%d", ns, i)
		bd, err := b.Service().Bundle(mustTopic(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if !seen[bd.String()] {
			seen[bd.String()] = true
			topics = append(topics, name)
		}
	}
	return topics
}

func lookup(t *testing.T, b *brokertest.Broker, topic string) broker.Location {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loc, err := b.Service().Lookup(ctx, mustTopic(t, topic), broker.LookupOptions{})
	if err != nil {
		t.Fatalf("lookup %s: %v", topic, err)
	}
	return loc
}

// ownerKeys reads the region's ownership keys of namespace ns
// ("tenant/name"), by bundle.
func ownerKeys(t *testing.T, store meta.Store, ns string) map[string]meta.KV {
	t.Helper()
	tenant, name, _ := strings.Cut(ns, "/")
	kvs, _, err := store.List(context.Background(), meta.Prefix(meta.RegionKey(brokertest.Region, "owners", tenant, name)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]meta.KV{}
	for _, kv := range kvs {
		out[kv.Key] = kv
	}
	return out
}

// TestPlacementSpreads: 3 brokers, a namespace of 16 bundles, a topic of
// every bundle looked up through one broker: the bundles spread (no broker
// owns more than ⌈16/3⌉+1), each key hangs on its owner's own session,
// and a client through that one broker produces to every topic, served by
// whichever broker the lookup named.
func TestPlacementSpreads(t *testing.T) {
	storage := newStorage(t)
	brokers := startBrokers(t, storage, 3)
	const bundles = 16
	ns := namespaceOfBundles(t, brokers, "spread", bundles)
	topics := topicPerBundle(t, brokers[0], ns, bundles)

	byURL := map[string]*brokertest.Broker{}
	for _, b := range brokers {
		byURL[b.ServiceURL()] = b
	}
	owned := map[string]int{}
	for _, topic := range topics {
		loc := lookup(t, brokers[0], topic)
		if byURL[loc.ServiceURL] == nil {
			t.Fatalf("lookup of %s answered %s, not a broker of the region", topic, loc.ServiceURL)
		}
		owned[loc.ServiceURL]++
	}
	limit := (bundles+len(brokers)-1)/len(brokers) + 1
	for url, n := range owned {
		if n > limit {
			t.Errorf("%s owns %d of %d bundles, want at most %d: %v", url, n, bundles, limit, owned)
		}
	}
	if len(owned) != len(brokers) {
		t.Errorf("bundles went to %d of %d brokers: %v", len(owned), len(brokers), owned)
	}
	live, err := brokers[0].Service().LoadManager().Brokers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leaseOf := map[string]meta.LeaseID{}
	for _, lb := range live {
		leaseOf[lb.BrokerID] = lb.Lease
	}
	keys := ownerKeys(t, storage.Store, ns)
	if len(keys) != bundles {
		t.Fatalf("%d ownership keys for %d bundles", len(keys), bundles)
	}
	for key, kv := range keys {
		var o loadmgr.Owner
		if _, err := meta.DecodeJSON(kv.Value, 1, &o); err != nil {
			t.Fatal(err)
		}
		if kv.Lease != leaseOf[o.BrokerID] {
			t.Errorf("%s holds %s under lease %x, not that broker's session %x", key, o.BrokerID, kv.Lease, leaseOf[o.BrokerID])
		}
	}

	c := newClient(t, brokers[0].ServiceURL())
	for _, topic := range topics {
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(topic)}); err != nil {
			t.Fatalf("send to %s: %v", topic, err)
		}
	}
	for url, b := range byURL {
		if n := len(b.Service().Loaded()); n != owned[url] {
			t.Errorf("%s serves %d topics, was placed %d bundles (one topic each)", url, n, owned[url])
		}
	}
}

// TestRacingLookupsOneOwner: lookups of one unowned bundle through every
// broker at once all answer the same owner, and one key holds it.
func TestRacingLookupsOneOwner(t *testing.T) {
	storage := newStorage(t)
	brokers := startBrokers(t, storage, 3)
	const bundles = 8
	ns := namespaceOfBundles(t, brokers, "race", bundles)
	for _, topic := range topicPerBundle(t, brokers[0], ns, bundles) {
		const perBroker = 3
		answers := make([]string, len(brokers)*perBroker)
		errs := make([]error, len(answers))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				loc, err := brokers[i%len(brokers)].Service().Lookup(ctx, mustTopic(t, topic), broker.LookupOptions{})
				answers[i], errs[i] = loc.ServiceURL, err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("lookup %d of %s: %v", i, topic, err)
			}
			if answers[i] != answers[0] {
				t.Fatalf("racing lookups of %s answered different owners: %v", topic, answers)
			}
		}
	}
	if n := len(ownerKeys(t, storage.Store, ns)); n != bundles {
		t.Fatalf("%d ownership keys for %d bundles", n, bundles)
	}
}
