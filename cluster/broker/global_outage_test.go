package broker_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// freeURL reserves a loopback port for an etcd member that must come back
// on the same address after a restart.
func freeURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func startEtcd(t *testing.T, dir, clientURL string) *meta.Embed {
	t.Helper()
	cfg := meta.DefaultEmbedConfig()
	cfg.DataDir = dir
	cfg.Logger = testLogger()
	if clientURL != "" {
		cfg.ListenClientURLs = []string{clientURL}
		cfg.AdvertiseClientURLs = []string{clientURL}
	}
	// Started before the stores that dial it, so that it closes after
	// them: etcd's graceful stop waits for open client streams.
	return metatest.Start(t, cfg)
}

// TestGlobalStoreDown: a region whose global configuration store is a
// separate etcd keeps serving while that store is down. Existing producers
// and consumers go on, new ones on a known namespace work, configuration
// writes fail with a clear error, and once the store is back a write goes
// through and reaches the broker's cache.
func TestGlobalStoreDown(t *testing.T) {
	globalDir, globalURL := t.TempDir(), freeURL(t)
	globalEtcd := startEtcd(t, globalDir, globalURL)
	gstore, err := brokertest.Dial(context.Background(), []string{globalURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gstore.Close() })
	node := startBroker(t, nil, func(c *brokertest.Config) { c.Global = gstore })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := newClient(t, node.ServiceURL())
	before := "persistent://public/default/before-outage"
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: before, SubscriptionName: "s"})
	prod := createProducer(t, c, pulsar.ProducerOptions{Topic: before})
	roundTrip := func(p pulsar.Producer, cons pulsar.Consumer, what string) {
		t.Helper()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(what)}); err != nil {
			t.Fatalf("%s: send: %v", what, err)
		}
		m := receive(t, cons)
		if string(m.Payload()) != what {
			t.Fatalf("%s: received %q", what, m.Payload())
		}
		cons.Ack(m)
	}
	roundTrip(prod, cons, "before the outage")

	if err := globalEtcd.Close(); err != nil {
		t.Fatal(err)
	}
	roundTrip(prod, cons, "existing producer and consumer during the outage")
	during := "persistent://public/default/during-outage"
	cons2 := subscribe(t, c, pulsar.ConsumerOptions{Topic: during, SubscriptionName: "s"})
	prod2 := createProducer(t, c, pulsar.ProducerOptions{Topic: during})
	roundTrip(prod2, cons2, "new producer and subscription during the outage")

	gs := node.Service().Global()
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = gs.CreateTenant(wctx, "acme", global.TenantInfo{AllowedClusters: []string{brokertest.Region}})
	wcancel()
	if err == nil {
		t.Fatal("a configuration write succeeded with the global store down")
	}
	if !errors.Is(err, global.ErrUnavailable) {
		t.Fatalf("a configuration write during the outage failed with %v, want global.ErrUnavailable (HTTP 503)", err)
	}

	startEtcd(t, globalDir, globalURL)
	var r global.Receipt
	testkit.WaitFor(t, "a configuration write after the store is back", func() bool {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		defer wcancel()
		r, err = gs.CreateTenant(wctx, "acme", global.TenantInfo{AllowedClusters: []string{brokertest.Region}})
		return err == nil || errors.Is(err, global.ErrExists)
	})
	if err == nil {
		if err := node.Service().Policies().Await(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := node.Service().Policies().Tenant("acme"); !ok {
		t.Fatal("the broker's cache did not converge on the new tenant")
	}
	roundTrip(prod, cons, "after the outage")
}
