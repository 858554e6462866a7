package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/topology"
)

// TestAdvertisedListenersValidate: a broker with bad advertisedListeners
// or internalListenerName refuses to start, saying what is wrong.
func TestAdvertisedListenersValidate(t *testing.T) {
	for _, tc := range []struct {
		name, listeners, internal string
		tls                       bool
		want                      string // "" is valid
	}{
		{name: "one listener", listeners: "internal:pulsar://10.0.0.5:6650"},
		{name: "two, TLS served", listeners: "internal:pulsar://10.0.0.5:6650,internal:pulsar+ssl://10.0.0.5:6651, external:pulsar://b1.example.com:16650",
			internal: "internal", tls: true},
		{name: "internal named", listeners: "external:pulsar://b1.example.com:16650,internal:pulsar://10.0.0.5:6650", internal: "internal"},
		{name: "no name", listeners: "pulsar://10.0.0.5:6650", want: "the scheme must be pulsar:// or pulsar+ssl://"},
		{name: "empty name", listeners: ":pulsar://10.0.0.5:6650", want: "want name:pulsar://host:port"},
		{name: "no URL", listeners: "internal:", want: "want name:pulsar://host:port"},
		{name: "http", listeners: "internal:http://10.0.0.5:8080", want: "the scheme must be pulsar:// or pulsar+ssl://"},
		{name: "no port", listeners: "internal:pulsar://10.0.0.5", want: "with a port from 1 to 65535"},
		{name: "bad port", listeners: "internal:pulsar://10.0.0.5:99999", want: "with a port from 1 to 65535"},
		{name: "a path", listeners: "internal:pulsar://10.0.0.5:6650/x", want: "nothing after it"},
		{name: "duplicate name and scheme", listeners: "internal:pulsar://10.0.0.5:6650,internal:pulsar://10.0.0.6:6650",
			want: `listener "internal" has two pulsar:// URLs`},
		{name: "one address, two listeners", listeners: "internal:pulsar://10.0.0.5:6650,external:pulsar://10.0.0.5:6650",
			want: `10.0.0.5:6650 is given to both listener "internal" and listener "external"`},
		{name: "TLS only", listeners: "internal:pulsar://10.0.0.5:6650,external:pulsar+ssl://b1.example.com:16651", tls: true,
			want: `listener "external" has no pulsar:// URL`},
		{name: "internal not a listener", listeners: "internal:pulsar://10.0.0.5:6650", internal: "private",
			want: `internalListenerName "private" is not one of advertisedListeners' listeners`},
		{name: "internal without listeners", internal: "internal", want: "advertisedListeners is empty"},
		{name: "neither a host nor listeners", listeners: " ", want: "AdvertisedHost (or AdvertisedListeners) is required"},
		{name: "pulsar+ssl without TLS", listeners: "internal:pulsar://10.0.0.5:6650,internal:pulsar+ssl://10.0.0.5:6651",
			want: "needs the broker to serve TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := node.DefaultBrokerConfig("")
			b.AdvertisedListeners, b.InternalListenerName = tc.listeners, tc.internal
			if tc.listeners == "" {
				b.AdvertisedHost = "h"
			}
			if tc.tls {
				b.BrokerTLSAddr, b.TLS.CertFile, b.TLS.KeyFile = "localhost:6651", "cert.pem", "key.pem"
			}
			err := b.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// forwarder is a TCP port that relays every connection to a target set
// later (a broker's port, known once it listens), counting connections: an
// address, such as a NAT's, by which a client reaches a broker that does
// not listen on it.
type forwarder struct {
	ln       net.Listener
	target   atomic.Pointer[string]
	accepted atomic.Int64
}

func newForwarder(t *testing.T) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			out, err := net.Dial("tcp", *f.target.Load())
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			for _, p := range [][2]net.Conn{{in, out}, {out, in}} {
				wg.Go(func() {
					_, _ = io.Copy(p[0], p[1])
					p[0].Close()
					p[1].Close()
				})
			}
		}
	})
	return f
}

func (f *forwarder) url() string { return "pulsar://" + f.ln.Addr().String() }

// TestAdvertisedListeners: two brokers with an internal and an external
// listener each, every listener an address of its own in front of the
// broker's one port. A client that names the external listener is sent to
// the owner's external address, one that names none to its internal one,
// though both ask the other broker (which answers from the owner's
// registration); both produce and consume. An unknown listener name is a
// clear lookup error, on the binary and the HTTP lookup alike.
func TestAdvertisedListeners(t *testing.T) {
	etcd := startStandalone(t, func(*node.BrokerConfig) {})
	endpoints := etcd.EtcdEndpoints()
	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-listeners", "127.0.0.1:0", t.TempDir()
	startNode(t, node.Config{Etcd: endpoints, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "listeners", Bookies: []bookie.Config{bk}, MetricsAddr: "127.0.0.1:0"}}})
	type listenerBroker struct {
		node               *node.Node
		internal, external *forwarder
	}
	start := func() listenerBroker {
		lb := listenerBroker{internal: newForwarder(t), external: newForwarder(t)}
		b := node.DefaultBrokerConfig("")
		b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
		b.AdvertisedListeners = "internal:" + lb.internal.url() + ",external:" + lb.external.url()
		b.InternalListenerName = "internal"
		b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
		lb.node = startNode(t, node.Config{Etcd: endpoints, Logger: testLogger(), Bootstrap: true,
			Regions: []node.RegionConfig{{Name: "listeners", Broker: &b}}})
		port := lb.node.Broker().BrokerListenAddr()
		lb.internal.target.Store(&port)
		lb.external.target.Store(&port)
		return lb
	}
	owner, asked := start(), start()
	if got, want := owner.node.Broker().ServiceURL(), owner.internal.url(); got != want {
		t.Fatalf("ServiceURL %s, want the internal listener's %s", got, want)
	}

	const topic = "persistent://public/default/listened"
	tn, err := topology.ParseTopicName(topic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, mine, err := owner.node.Broker().Service().Owner(ctx, tn); err != nil || !mine {
		t.Fatalf("claim on the owner: mine %v, err %v", mine, err)
	}

	// No listener named: the internal addresses, and never the external.
	internalClient := newClient(t, pulsar.ClientOptions{URL: asked.internal.url()})
	roundTrip(t, internalClient, topic, 10)
	if n := owner.internal.accepted.Load(); n == 0 {
		t.Fatal("the client naming no listener never reached the owner's internal address")
	}
	if n := owner.external.accepted.Load() + asked.external.accepted.Load(); n != 0 {
		t.Fatalf("the client naming no listener made %d connections to external addresses", n)
	}
	internalClient.Close()

	// "external": the external addresses, and never the internal.
	internalsBefore := owner.internal.accepted.Load() + asked.internal.accepted.Load()
	externalClient := newClient(t, pulsar.ClientOptions{URL: asked.external.url(), ListenerName: "external"})
	roundTrip(t, externalClient, topic, 10)
	if n := owner.external.accepted.Load(); n == 0 {
		t.Fatal("the client naming the external listener never reached the owner's external address")
	}
	if n := owner.internal.accepted.Load() + asked.internal.accepted.Load() - internalsBefore; n != 0 {
		t.Fatalf("the client naming the external listener made %d connections to internal addresses", n)
	}

	// An unknown name: the client's lookups fail until its operation
	// timeout, and the HTTP lookup says why.
	unknown := newClient(t, pulsar.ClientOptions{URL: asked.external.url(), ListenerName: "nosuch", OperationTimeout: 2 * time.Second})
	if p, err := unknown.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		p.Close()
		t.Fatal("a producer was created through an unknown listener")
	}
	lookup := func(query string) (int, map[string]string) {
		t.Helper()
		resp, err := http.Get(asked.node.Broker().WebURL() + "/lookup/v2/topic/persistent/public/default/listened" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("lookup%s: %v", query, err)
		}
		return resp.StatusCode, body
	}
	if code, body := lookup("?listenerName=nosuch"); code != http.StatusServiceUnavailable ||
		!strings.Contains(body["reason"], "does not have nosuch listener") {
		t.Fatalf("HTTP lookup of an unknown listener: %d %v, want 503 naming the listener", code, body)
	}
	for query, want := range map[string]string{"": owner.internal.url(), "?listenerName=external": owner.external.url()} {
		if code, body := lookup(query); code != http.StatusOK || body["brokerUrl"] != want {
			t.Errorf("HTTP lookup%s: %d %v, want brokerUrl %s", query, code, body, want)
		}
	}
}
