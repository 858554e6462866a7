package broker_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// failoverTTL is the session lease of the brokers in the failover tests:
// long, so that a takeover well within it can only be the probe's doing.
const failoverTTL = 30 * time.Second

func withTTL(ttl time.Duration) func(*brokertest.Config) {
	return func(c *brokertest.Config) { c.Service.OwnershipTTL = ttl }
}

// roundTripOn produces want on topic through url and reads back every
// message of the topic from the earliest, checking they are want's
// predecessors and want.
func roundTripOn(t *testing.T, url, topic string, want ...string) {
	t.Helper()
	c := newClient(t, url)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "check-" + want[len(want)-1],
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(want[len(want)-1])}); err != nil {
		t.Fatalf("send to %s through %s: %v", topic, url, err)
	}
	for _, w := range want {
		m := receive(t, cons)
		if string(m.Payload()) != w {
			t.Fatalf("read %q from %s, want %q", m.Payload(), topic, w)
		}
		cons.Ack(m)
	}
}

// TestDeadOwnerTakenOver: a broker whose process is gone (its port refuses
// connections) while its session lease lives on loses its bundles to the
// first lookup elsewhere, well within the lease's TTL: the lookup probes
// it, revokes its lease and places the bundle afresh. The dead broker's
// registration goes with the lease, the broker itself (had it been alive)
// unloads what it served, and the topic's data is all there on the new
// owner.
func TestDeadOwnerTakenOver(t *testing.T) {
	storage := newStorage(t)
	a := startBroker(t, storage, withTTL(failoverTTL))
	b := startBroker(t, storage, withTTL(failoverTTL))
	topic := topicFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Service().Topic(ctx, mustTopic(t, topic), true); err != nil {
		t.Fatal(err)
	}
	if loc := lookup(t, a, topic); loc.ServiceURL != b.ServiceURL() {
		t.Fatalf("before the kill the lookup answered %s, want the owner %s", loc.ServiceURL, b.ServiceURL())
	}
	c := newClient(t, b.ServiceURL())
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}

	b.Kill()
	start := time.Now()
	// Within Lookup.ProbeAliveFor of the probe above, B is still taken to
	// be alive: lookups answer it until the next probe, as a client's
	// retries would.
	testkit.WaitFor(t, "a lookup to take the dead owner's bundle", func() bool {
		loc := lookup(t, a, topic)
		if loc.ServiceURL != a.ServiceURL() && loc.ServiceURL != b.ServiceURL() {
			t.Fatalf("after the kill the lookup answered %s, neither broker", loc.ServiceURL)
		}
		return loc.ServiceURL == a.ServiceURL()
	})
	took := time.Since(start)
	if took > failoverTTL/3 {
		t.Fatalf("lookups took the dead owner's bundle %v after the kill, want well within its lease %v", took, failoverTTL)
	}
	t.Logf("lookups took the dead owner's bundle %v after the kill (lease %v)", took, failoverTTL)
	live, err := a.Service().LoadManager().Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range live {
		if lb.BrokerID == b.ID() {
			t.Fatalf("the dead broker %s is still registered", b.ID())
		}
	}
	testkit.WaitFor(t, "the revoked broker to unload its topics", func() bool { return len(b.Service().Loaded()) == 0 })
	roundTripOn(t, a.ServiceURL(), topic, "before", "after")
}

// fakeOwner registers a broker that is not Meridian's, reached at url, and
// gives it topic's bundle: both under a lease of its own, which it returns.
func fakeOwner(t *testing.T, storage *brokertest.Storage, via *brokertest.Broker, id, url, topic string) meta.Lease {
	t.Helper()
	l, err := storage.Store.Grant(context.Background(), failoverTTL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Revoke(context.Background()) })
	fakeOwnerUnder(t, storage, via, l, id, url, topic)
	return l
}

// fakeOwnerUnder is fakeOwner under a lease the caller holds.
func fakeOwnerUnder(t *testing.T, storage *brokertest.Storage, via *brokertest.Broker, l meta.Lease, id, url, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owner := loadmgr.Owner{BrokerID: id, ServiceURL: url}
	rec, err := meta.EncodeJSON(1, loadmgr.BrokerRecord{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Store.Create(ctx, meta.RegionKey(brokertest.Region, "brokers", id), rec, l.ID()); err != nil {
		t.Fatal(err)
	}
	tn := mustTopic(t, topic)
	bundle, err := via.Service().Bundle(tn)
	if err != nil {
		t.Fatal(err)
	}
	v, err := meta.EncodeJSON(1, owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Store.Create(ctx, meta.RegionKey(brokertest.Region, "owners", tn.Tenant, tn.Namespace, bundle.String()), v, l.ID()); err != nil {
		t.Fatal(err)
	}
}

// TestProbedOwner: what a lookup does with an owner, by what its port
// does. One that accepts and never answers but renews its lease (slow)
// keeps its bundle and its lease: the lookup answers it, after about the
// probe's timeout. One that accepts, never answers and has stopped
// renewing (frozen) is waited out: the lookup answers the next owner once
// the lease ends. One whose port refuses connections (its process is
// gone) loses its lease, and the bundle comes here.
func TestProbedOwner(t *testing.T) {
	storage := newStorage(t)
	// A probe timeout long enough for a loaded machine's fake owners to
	// accept and close.
	a := startBroker(t, storage, withTTL(failoverTTL), func(c *brokertest.Config) { c.Service.Lookup.ProbeTimeout = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("silent owner is kept", func(t *testing.T) {
		url := testkit.ListenLoopback(t, func(_ net.Conn, stop <-chan struct{}) { <-stop })
		topic := topicFor(t)
		l := fakeOwner(t, storage, a, "paused:6650", url, topic)
		for range 2 { // the second lookup probes again: nothing was learnt
			start := time.Now()
			if loc := lookup(t, a, topic); loc.ServiceURL != url {
				t.Fatalf("the lookup answered %s, want the silent owner %s", loc.ServiceURL, url)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("the lookup of a silent owner's topic took %v", took)
			}
		}
		if _, err := storage.Store.Get(ctx, meta.RegionKey(brokertest.Region, "brokers", "paused:6650")); err != nil {
			t.Fatalf("the silent owner's registration: %v; want it kept, its lease alive", err)
		}
		select {
		case <-l.Done():
			t.Fatal("the silent owner's lease was revoked")
		default:
		}
	})
	t.Run("silent owner that stopped renewing is waited out", func(t *testing.T) {
		// Frozen: it accepts and never answers, and its lease is not
		// renewed. A lookup waits for the lease's end and answers the
		// broker that takes the bundle then, not the frozen one.
		url := testkit.ListenLoopback(t, func(_ net.Conn, stop <-chan struct{}) { <-stop })
		topic := topicFor(t)
		const ttl = 4 * time.Second
		lctx, stopRenewing := context.WithCancel(ctx)
		l, err := storage.Store.Grant(lctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Revoke(context.Background()) })
		fakeOwnerUnder(t, storage, a, l, "frozen:6650", url, topic)
		stopRenewing()
		testkit.WaitFor(t, "the frozen owner's lease to fall below half its TTL", func() bool {
			remaining, granted, err := storage.Store.TimeToLive(ctx, l.ID())
			return err != nil || remaining <= granted/2
		})
		if loc := lookup(t, a, topic); loc.ServiceURL != a.ServiceURL() {
			t.Fatalf("the lookup answered %s, want the live broker %s once the frozen owner's lease ended", loc.ServiceURL, a.ServiceURL())
		}
		roundTripOn(t, a.ServiceURL(), topic, "served")
	})
	t.Run("owner refusing connections is taken over", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "pulsar://" + ln.Addr().String()
		ln.Close() // nothing listens there now: the port refuses
		topic := topicFor(t)
		l := fakeOwner(t, storage, a, "crashed:6650", url, topic)
		if loc := lookup(t, a, topic); loc.ServiceURL != a.ServiceURL() {
			t.Fatalf("the lookup answered %s, want the live broker %s", loc.ServiceURL, a.ServiceURL())
		}
		select {
		case <-l.Done():
		case <-ctx.Done():
			t.Fatal("the dead owner's lease was not revoked")
		}
		roundTripOn(t, a.ServiceURL(), topic, "served")
	})
}

// rawLookup sends a LOOKUP of topic on rc and returns its response.
func rawLookup(rc *rawClient, id uint64, topic string) *pb.CommandLookupTopicResponse {
	rc.t.Helper()
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: pb.CommandLookupTopic_builder{
		Topic: proto.String(topic), RequestId: proto.Uint64(id)}.Build()}.Build())
	return rc.expect(pb.BaseCommand_LOOKUP_RESPONSE).GetLookupTopicResponse()
}

// TestLookupsWhileEtcdAway: with the region's etcd stopped, lookups of an
// owned topic and of a new one answer ServiceNotReady (the error on which
// clients retry) within about Lookup.MetadataTimeout, never an owner; when
// etcd is back on the same data, lookups and the topic serve again without
// a broker restart.
func TestLookupsWhileEtcdAway(t *testing.T) {
	storage := newStorage(t)
	const metadataTimeout = time.Second
	b := startBroker(t, storage, func(c *brokertest.Config) { c.Service.Lookup.MetadataTimeout = metadataTimeout })
	owned := topicFor(t, "-owned")
	roundTripOn(t, b.ServiceURL(), owned, "before")
	rc := dialRaw(t, brokerAddr(b))
	rc.connect(20)

	if err := storage.StopEtcd(); err != nil {
		t.Fatal(err)
	}
	for i, topic := range []string{owned, topicFor(t, "-new")} {
		start := time.Now()
		resp := rawLookup(rc, uint64(i+1), topic)
		took := time.Since(start)
		if resp.GetResponse() != pb.CommandLookupTopicResponse_Failed || resp.GetError() != pb.ServerError_ServiceNotReady {
			t.Fatalf("lookup of %s with etcd away answered %v, want Failed with ServiceNotReady", topic, resp)
		}
		if took > metadataTimeout+5*time.Second {
			t.Fatalf("lookup of %s with etcd away took %v, want about the %v metadata timeout", topic, took, metadataTimeout)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := storage.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	id := uint64(10)
	testkit.WaitFor(t, "a lookup to succeed once etcd is back", func() bool {
		id++
		resp := rawLookup(rc, id, owned)
		switch {
		case resp.GetResponse() == pb.CommandLookupTopicResponse_Connect:
			if resp.GetBrokerServiceUrl() != b.ServiceURL() {
				t.Fatalf("lookup after the outage answered %s, want the one broker %s", resp.GetBrokerServiceUrl(), b.ServiceURL())
			}
			return true
		case resp.GetError() != pb.ServerError_ServiceNotReady:
			t.Fatalf("lookup after the outage answered %v, want success or ServiceNotReady", resp)
		}
		return false
	})
	roundTripOn(t, b.ServiceURL(), owned, "before", "after")
}

// TestLookupMalformedTopic: a lookup or partitioned-metadata request for a
// malformed topic name gets Pulsar's InvalidTopicName, on a real broker.
func TestLookupMalformedTopic(t *testing.T) {
	b := startBroker(t, nil)
	rc := dialRaw(t, brokerAddr(b))
	rc.connect(20)
	for i, name := range []string{
		"persistent://public/default/",   // empty topic
		"persistent://public/t",          // no namespace
		"queue://public/default/t",       // unknown domain
		"public/default",                 // neither short nor full
		"persistent://pub lic/default/t", // bad tenant
		"persistent://public/de%fault/t", // bad namespace
		"",
	} {
		resp := rawLookup(rc, uint64(2*i+1), name)
		if resp.GetResponse() != pb.CommandLookupTopicResponse_Failed || resp.GetError() != pb.ServerError_InvalidTopicName {
			t.Errorf("lookup of %q answered %v, want Failed with InvalidTopicName", name, resp)
		}
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: pb.CommandPartitionedTopicMetadata_builder{
			Topic: proto.String(name), RequestId: proto.Uint64(uint64(2*i + 2))}.Build()}.Build())
		pm := rc.expect(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE).GetPartitionMetadataResponse()
		if pm.GetResponse() != pb.CommandPartitionedTopicMetadataResponse_Failed || pm.GetError() != pb.ServerError_InvalidTopicName {
			t.Errorf("partitioned metadata of %q answered %v, want Failed with InvalidTopicName", name, pm)
		}
	}
	// The connection stays, as Pulsar's does: a good lookup on it works.
	if resp := rawLookup(rc, 100, topicFor(t)); resp.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("a good lookup after the malformed ones answered %v", resp)
	}
}
