package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator/remote"
	"github.com/meridian-mq/meridian/testkit"
)

// The automatic failover tests run east, west and south, with
// public/default replicated to all three, east active, west then south
// its fallback, and a delay of failoverDelay. Sessions are short
// (failoverSessionTTL) so that a takeover after a revocation does not take
// the default 10 s.
const (
	failoverDelay      = 2 * time.Second
	failoverSessionTTL = 2 * time.Second
)

// unreachable makes the probes of the brokers it names fail, as a network
// cut between the probing regions and them would; the others probe as the
// assembly does.
type unreachable struct{ host atomic.Pointer[string] }

// cut makes the probes of the broker at url (pulsar://host:port) fail;
// "" heals.
func (u *unreachable) cut(url string) {
	h := hostsOf(url)
	u.host.Store(&h)
}

func (u *unreachable) isCut(c global.ClusterData) bool {
	h := u.host.Load()
	return h != nil && *h != "" && strings.Contains(c.BrokerServiceURL, *h)
}

// startFailoverDev starts the three regions with automatic failover on
// public/default; probes go through u.
func startFailoverDev(t *testing.T, u *unreachable) (*node.Node, map[string]string) {
	t.Helper()
	n, urls := startDevWith(t, func(r *node.RegionConfig) {
		from := r.Name
		r.Broker.Service.ReplicatedSubscriptions.Interval = 100 * time.Millisecond
		r.Broker.Service.Failover = broker.FailoverConfig{SessionTTL: failoverSessionTTL, Margin: 500 * time.Millisecond,
			Interval: 100 * time.Millisecond, ProbeTimeout: time.Second,
			Probe: func(ctx context.Context, c global.ClusterData, topic string, timeout time.Duration) error {
				if u.isCut(c) {
					return errors.New("cut")
				}
				rc := remote.DefaultConfig(from, topic, c)
				rc.OperationTimeout = timeout
				return remote.Probe(ctx, rc)
			}}
	}, "east", "west", "south")
	updateNamespace(t, n, func(p *global.Policies) {
		p.ReplicationClusters = []string{"east", "west", "south"}
		p.ActiveRegion = "east"
		p.SetFallbackRegions([]string{"west", "south"})
		p.SetAutoFailover(&global.AutoFailover{DelaySeconds: int(failoverDelay / time.Second)})
	})
	return n, urls
}

// awaitSwitch waits until public/default's active region is to and
// returns the recorded switch.
func awaitSwitch(t *testing.T, n *node.Node, to string, within time.Duration) global.FailoverSwitch {
	t.Helper()
	var sw global.FailoverSwitch
	deadline := time.Now().Add(within)
	testkit.WaitFor(t, "public/default's active region to become "+to, func() bool {
		if time.Now().After(deadline) {
			t.Fatalf("no switch to %s within %v", to, within)
		}
		p, ok := n.Broker().Service().Policies().Namespace("public", "default")
		a, on := p.AutoFailover()
		if !ok || !on || p.ActiveRegion != to || a.LastSwitch == nil {
			return false
		}
		sw = *a.LastSwitch
		return true
	})
	return sw
}

// receiveEvery receives until it holds every payload of want, recording when
// each arrived and which region's ledger delivered it.
func receiveEvery(t *testing.T, n *node.Node, cons pulsar.Consumer, want int) (firstFrom map[string]time.Time, payloads map[string]bool) {
	t.Helper()
	numbers := map[int]string{}
	for _, r := range n.Regions() {
		num, err := n.Broker().Service().Global().RegionNumber(context.Background(), r.Name())
		if err != nil {
			t.Fatal(err)
		}
		numbers[num] = r.Name()
	}
	firstFrom, payloads = map[string]time.Time{}, map[string]bool{}
	for len(payloads) < want {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			t.Fatalf("received %d of %d: %v", len(payloads), want, err)
		}
		region := numbers[ledger.RegionNumberOf(m.ID().LedgerID())]
		if _, seen := firstFrom[region]; !seen {
			firstFrom[region] = time.Now()
		}
		payloads[string(m.Payload())] = true
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	return firstFrom, payloads
}

// TestAutomaticFailoverWhenTheActiveRegionStops: east's brokers stop (its
// sessions end with them); after the delay west takes over, waiting out
// what is left of a session TTL since it saw them gone, and a consumer of the replicated subscription on a service URL listing
// west and south gets every message, from west.
func TestAutomaticFailoverWhenTheActiveRegionStops(t *testing.T) {
	n, urls := startFailoverDev(t, &unreachable{})
	const topic, sub, count = "persistent://public/default/failover-stop", "s", 20
	c := newClient(t, pulsar.ClientOptions{URL: urls["east"]})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p, "m", count)
	receiveEvery(t, n, cons, count)
	cons.Close()
	p.Close()
	c.Close()
	awaitBacklog(t, n.Region("west").Broker().Service(), "west", topic, sub, count, 0)

	stopped := time.Now()
	if err := n.CloseRegion("east"); err != nil {
		t.Fatal(err)
	}
	sw := awaitSwitch(t, n, "west", failoverDelay+10*time.Second)
	t.Logf("switched %v after east stopped: %+v", time.Since(stopped).Round(time.Millisecond), sw)
	if sw.From != "east" || sw.DispatchWaitMillis > failoverSessionTTL.Milliseconds() {
		t.Fatalf("switch %+v, want from east with a wait of at most a session TTL", sw)
	}

	// Everything was acked in east and carried to west: a new message is
	// the only one a consumer of the subscription gets, from west.
	c2 := newClient(t, pulsar.ClientOptions{URL: urls["west"] + "," + hostsOf(urls["south"])})
	cons2, err := c2.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons2.Close()
	p2, err := c2.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	publish(t, p2, "after", 1)
	from, got := receiveEvery(t, n, cons2, 1)
	if !got["after-0"] {
		t.Fatalf("after the failover the consumer got %v, want only after-0", got)
	}
	if _, ok := from["west"]; !ok {
		t.Fatalf("delivered by %v, want west", from)
	}
}

// TestAutomaticFailoverRevokesAnUnreachableRegion: west and south lose
// sight of east, which keeps its sessions and its clients. After the delay
// they revoke east's sessions and switch to west, which waits a whole
// session TTL before it dispatches; east stops dispatching at once, and
// its consumer moves to west (TOPIC_MIGRATED) and gets every message not
// acked, nothing from west before the wait is over.
func TestAutomaticFailoverRevokesAnUnreachableRegion(t *testing.T) {
	u := &unreachable{}
	n, urls := startFailoverDev(t, u)
	const topic, sub, count = "persistent://public/default/failover-cut", "s", 30
	all := urls["east"] + "," + hostsOf(urls["west"]) + "," + hostsOf(urls["south"])
	c := newClient(t, pulsar.ClientOptions{URL: all})
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		ReplicateSubscriptionState: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	publish(t, p, "before", count)
	if from, _ := receiveEvery(t, n, cons, count); len(from) != 1 || from["east"].IsZero() {
		t.Fatalf("before the cut, delivered by %v, want east alone", from)
	}
	awaitBacklog(t, n.Region("west").Broker().Service(), "west", topic, sub, count, 0)

	cut := time.Now()
	u.cut(urls["east"])
	publish(t, p, "during", count)
	sw := awaitSwitch(t, n, "west", failoverDelay+10*time.Second)
	t.Logf("switched %v after the cut: %+v", time.Since(cut).Round(time.Millisecond), sw)
	if sw.From != "east" || sw.DispatchWaitMillis != failoverSessionTTL.Milliseconds() {
		t.Fatalf("switch %+v, want from east with a wait of %v (east's sessions were revoked)", sw, failoverSessionTTL)
	}
	from, got := receiveEvery(t, n, cons, count)
	for i := range count {
		if !got[fmt.Sprintf("during-%d", i)] {
			t.Fatalf("during-%d never delivered; got %v", i, got)
		}
	}
	if w, ok := from["west"]; !ok || w.Before(sw.NotBefore()) {
		t.Fatalf("west delivered first at %v, want at or after %v", w, sw.NotBefore())
	}

	// East comes back, and the operator makes it active again: it serves,
	// and nothing seen of it before (west's and south's views of the cut,
	// the sessions revoked) switches it away again.
	u.cut("")
	updateNamespace(t, n, func(p *global.Policies) {
		p.ActiveRegion = "east"
		p.SetFallbackRegions([]string{"west", "south"})
	})
	// A new producer: p is moved back meanwhile, and pulsar-client-go's
	// reconnect races with its sends (grabCnx writes what
	// internalSingleSend reads: a data race inside the client).
	back, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	publish(t, back, "back", count)
	from, got = receiveEvery(t, n, cons, count)
	if _, ok := from["east"]; !ok {
		t.Fatalf("after east was made active again, delivered by %v (got %v)", from, got)
	}
	if pol, _ := n.Broker().Service().Policies().Namespace("public", "default"); pol.ActiveRegion != "east" {
		t.Fatalf("east switched away again to %s, on what was seen of it before", pol.ActiveRegion)
	}
}

// hostsOf is a pulsar:// URL's host list.
func hostsOf(url string) string {
	_, hosts, _ := global.ServiceHosts(url)
	if len(hosts) == 0 {
		return ""
	}
	return hosts[0]
}
