package remote

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
)

const testTopic = "persistent://public/default/orders"

// testIncarnation is the source topic's incarnation in the tests.
const testIncarnation = 5

func testConfig(cluster global.ClusterData) Config {
	cfg := DefaultConfig("us-east", testTopic, cluster)
	cfg.OperationTimeout, cfg.Incarnation = 10*time.Second, testIncarnation
	return cfg
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, cfg Config) *Producer {
	t.Helper()
	p, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: a failed test may leave receipts held by the broker.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func sendT(t *testing.T, p *Producer, entry []byte) *Receipt {
	t.Helper()
	r, err := p.Send(ctxT(t), entry)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// markedAsReplication reports whether l carries the replicator's mark
// naming source.
func markedAsReplication(l *pb.CommandLookupTopic, source string) bool {
	for _, kv := range l.GetProperties() {
		if kv.GetKey() == wire.LookupPropertyReplication && kv.GetValue() == source {
			return true
		}
	}
	return false
}

func resultT(t *testing.T, r *Receipt) MessageID {
	t.Helper()
	id, err := r.Wait(ctxT(t))
	if err != nil {
		t.Fatalf("entry %d: %v", r.SourceIndex(), err)
	}
	return id
}

// TestSendKeepsTheEntry: the producer authenticates with a token, follows
// a redirect, and sends a stored batch with every metadata field as
// stored except replicated_from and the reserved properties, with a valid
// checksum and the source index range as its sequence ids.
func TestSendKeepsTheEntry(t *testing.T) {
	owner := startFakeBroker(t, nil, func(b *fakeBroker) { b.token = "jwt-1" })
	front := startFakeBroker(t, nil, func(b *fakeBroker) { b.token, b.redirectTo = "jwt-1", owner.url })
	cfg := testConfig(global.ClusterData{BrokerServiceURL: front.url,
		AuthenticationPlugin: "org.apache.pulsar.client.impl.auth.AuthenticationToken", AuthenticationParameters: `{"token":"jwt-1"}`})
	p := openT(t, cfg)
	if p.LastSequenceID() != 41 {
		t.Errorf("LastSequenceID = %d, want the broker's 41", p.LastSequenceID())
	}

	entry, md, payload := batchEntry(t, 102)
	id := resultT(t, sendT(t, p, entry))
	if id != (MessageID{Ledger: 7, Entry: 0}) || id.Duplicate() {
		t.Fatalf("receipt id %+v", id)
	}

	for _, b := range []*fakeBroker{front, owner} {
		b.locked(func() {
			for _, l := range b.lookups {
				if !markedAsReplication(l, cfg.SourceRegion) {
					t.Errorf("lookup %v lacks %s=%s: the remote would redirect it to the active region", l, wire.LookupPropertyReplication, cfg.SourceRegion)
				}
			}
		})
	}
	front.locked(func() {
		if len(front.lookups) != 1 || front.lookups[0].GetAuthoritative() || len(front.producers) != 0 {
			t.Errorf("front broker: lookups %v, producers %d; want one non-authoritative lookup and no producer", front.lookups, len(front.producers))
		}
	})
	owner.locked(func() {
		if len(owner.lookups) != 1 || !owner.lookups[0].GetAuthoritative() || owner.lookups[0].GetTopic() != testTopic {
			t.Errorf("owner: lookups %v, want one authoritative lookup of %s (the redirect's flag passed on)", owner.lookups, testTopic)
		}
		for _, c := range owner.connects {
			if c.GetProtocolVersion() != int32(pb.ProtocolVersion_v20) || c.GetAuthMethodName() != "token" || string(c.GetAuthData()) != "jwt-1" {
				t.Errorf("CONNECT %v: want protocol v20 with the token", c)
			}
		}
		if len(owner.producers) != 1 || owner.producers[0].GetProducerName() != "meridian.repl.us-east" || owner.producers[0].GetTopic() != testTopic {
			t.Errorf("PRODUCER %v, want meridian.repl.us-east on %s", owner.producers, testTopic)
		}
	})

	sent := owner.sent()
	if len(sent) != 1 {
		t.Fatalf("%d SENDs, want 1", len(sent))
	}
	s := sent[0]
	if s.send.GetSequenceId() != 100 || s.send.GetHighestSequenceId() != 102 || s.send.GetNumMessages() != 3 || s.send.GetProducerId() != producerID {
		t.Errorf("SEND %v, want sequence ids 100..102 (the batch's source indexes) and 3 messages", s.send)
	}
	gotMD, gotPayload, err := wire.SplitMessage(s.msg) // verifies the new checksum
	if err != nil {
		t.Fatal(err)
	}
	if string(gotPayload) != string(payload) {
		t.Error("the payload changed")
	}
	got := &pb.MessageMetadata{}
	if err := proto.Unmarshal(gotMD, got); err != nil {
		t.Fatal(err)
	}
	if got.GetReplicatedFrom() != "us-east" {
		t.Errorf("replicated_from %q, want us-east", got.GetReplicatedFrom())
	}
	props := map[string]string{}
	for _, kv := range got.GetProperties() {
		props[kv.GetKey()] = kv.GetValue()
	}
	if props[wire.PropReplicationSource] != "5:100:102" || props[wire.PropReplicationOriginTime] != "1700000000200" ||
		props["traceparent"] != "00-abc-def-01" || len(props) != 3 {
		t.Errorf("properties %v: want the producer's traceparent, %s=5:100:102 (the forged one replaced) and %s=1700000000200",
			props, wire.PropReplicationSource, wire.PropReplicationOriginTime)
	}
	// Everything else is as stored.
	want := proto.Clone(md).(*pb.MessageMetadata)
	want.SetReplicatedFrom("us-east")
	want.SetProperties(got.GetProperties())
	if !proto.Equal(got, want) {
		t.Errorf("metadata changed beyond replicated_from and the reserved properties:\n got  %v\n want %v", got, want)
	}
}

// TestWindow: Send waits while the window is full by count or by bytes,
// and receipts complete in send order.
func TestWindow(t *testing.T) {
	b := startFakeBroker(t, nil, func(b *fakeBroker) { b.hold = true })
	cfg := testConfig(global.ClusterData{BrokerServiceURL: b.url})
	cfg.MaxInFlightEntries = 3
	p := openT(t, cfg)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	var rs []*Receipt
	for i := range 3 {
		rs = append(rs, sendT(t, p, simpleEntry(t, uint64(i))))
	}
	if _, err := p.Send(cancelled, simpleEntry(t, 3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a 4th Send with 3 of 3 in flight: %v, want it to wait (and see its context end)", err)
	}
	b.waitFor("3 SENDs", func() bool { return len(b.sends) == 3 })
	if n, _ := p.InFlight(); n != 3 {
		t.Fatalf("InFlight = %d, want 3", n)
	}
	b.release(1)
	if id := resultT(t, rs[0]); id.Entry != 0 {
		t.Fatalf("first receipt %+v", id)
	}
	rs = append(rs, sendT(t, p, simpleEntry(t, 3))) // room for one again
	if _, err := p.Send(cancelled, simpleEntry(t, 4)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send into a full window again: %v", err)
	}
	b.waitFor("4 SENDs", func() bool { return len(b.sends) == 4 })
	b.release(3)
	for i, r := range rs {
		if id := resultT(t, r); id.Entry != int64(i) || r.SourceIndex() != int64(i) {
			t.Fatalf("receipt %d = %+v for source index %d", i, id, r.SourceIndex())
		}
	}
	if n, bytes := p.InFlight(); n != 0 || bytes != 0 {
		t.Fatalf("InFlight = %d entries, %d bytes after every receipt", n, bytes)
	}

	// The byte bound: two of these fit in 2 KiB, a third does not.
	p.Close(ctxT(t))
	cfg.MaxInFlightEntries, cfg.MaxInFlightBytes = 100, 2<<10
	b.locked(func() {
		b.held = nil
	})
	p = openT(t, cfg)
	big := func(i uint64) []byte {
		md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(i), PublishTime: proto.Uint64(1)}.Build()
		return storedEntry(t, i, 1, md, make([]byte, 900))
	}
	sendT(t, p, big(10))
	last := sendT(t, p, big(11))
	if _, err := p.Send(cancelled, big(12)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a third 900-byte entry in a 2 KiB window: %v, want it to wait", err)
	}
	b.waitFor("6 SENDs", func() bool { return len(b.sends) == 6 })
	b.release(2)
	resultT(t, last)
	sendT(t, p, big(12))
	b.waitFor("7 SENDs", func() bool { return len(b.sends) == 7 })
	b.release(1)
}

// TestSendErrorFailsTheRest: a SEND_ERROR fails that entry and every entry
// after it, in order, and stops the producer; the entries before it
// complete.
func TestSendErrorFailsTheRest(t *testing.T) {
	b := startFakeBroker(t, nil, func(b *fakeBroker) {
		b.hold = true
		b.sendErrors = map[uint64]pb.ServerError{1: pb.ServerError_PersistenceError}
	})
	p := openT(t, testConfig(global.ClusterData{BrokerServiceURL: b.url}))
	var rs []*Receipt
	for i := range 3 {
		rs = append(rs, sendT(t, p, simpleEntry(t, uint64(i))))
	}
	b.waitFor("3 SENDs", func() bool { return len(b.sends) == 3 })
	b.release(2) // a receipt for 0, SEND_ERROR for 1
	resultT(t, rs[0])
	for _, r := range rs[1:] {
		if _, err := r.Wait(ctxT(t)); !errors.Is(err, ErrSendFailed) || !errors.Is(err, wire.ErrPersistence) {
			t.Fatalf("entry %d: %v, want ErrSendFailed with PersistenceError", r.SourceIndex(), err)
		}
	}
	<-p.Done()
	if _, err := p.Send(ctxT(t), simpleEntry(t, 3)); !errors.Is(err, ErrSendFailed) {
		t.Fatalf("Send after a SEND_ERROR: %v", err)
	}
}

// TestConnectionLossFailsInFlight: a dropped connection and a
// CLOSE_PRODUCER fail the entries in flight, never dropping them silently.
func TestConnectionLossFailsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fakeBroker)
		want  error
	}{
		{"dropped", func(b *fakeBroker) { b.hold, b.dropAfterSends = true, 2 }, ErrDisconnected},
		{"close producer", func(b *fakeBroker) { b.hold, b.closeAtSend = true, 2 }, ErrProducerClosedByBroker},
		{"silent", func(b *fakeBroker) { b.hold, b.silent = true, true }, ErrDisconnected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFakeBroker(t, nil, tc.setup)
			cfg := testConfig(global.ClusterData{BrokerServiceURL: b.url})
			// Only the silent peer is found by the keep-alive, and only
			// when the fake clock passes two intervals of silence.
			clock := clockwork.NewFakeClock()
			cfg.Clock = clock
			p := openT(t, cfg)
			// Each entry fails in flight or at Send: never silently.
			var errs [2]error
			var rs [2]*Receipt
			for i := range rs {
				rs[i], errs[i] = p.Send(ctxT(t), simpleEntry(t, uint64(i)))
			}
			if b.silent {
				if err := clock.BlockUntilContext(ctxT(t), 1); err != nil { // the keep-alive's ticker
					t.Fatal(err)
				}
				if err := p.Err(); err != nil {
					t.Fatalf("the producer failed (%v) before the clock passed two keep-alive intervals", err)
				}
				clock.Advance(3 * cfg.KeepAliveInterval)
			}
			for i, r := range rs {
				if r != nil {
					_, errs[i] = r.Wait(ctxT(t))
				}
				if !errors.Is(errs[i], tc.want) {
					t.Fatalf("entry %d: %v, want %v", i, errs[i], tc.want)
				}
			}
			if err := p.Err(); !errors.Is(err, tc.want) {
				t.Fatalf("Err = %v", err)
			}
		})
	}
}

// TestOpenRetriesWhatIsRetriable: ProducerBusy (the previous connection's
// producer not yet released) is retried, and a producer that is "not
// ready" is waited for; an authentication failure is returned at once.
// The pauses before the two retries are the first two of the backoff's
// (openRetryInitial, then twice it, each ±50%): the fake clock moves just
// past the longest each may be, and no further.
func TestOpenRetriesWhatIsRetriable(t *testing.T) {
	b := startFakeBroker(t, nil, func(b *fakeBroker) {
		b.producerErrors = []pb.ServerError{pb.ServerError_ProducerBusy, pb.ServerError_ServiceNotReady}
		b.notReadyFirst = true
	})
	cfg := testConfig(global.ClusterData{BrokerServiceURL: b.url})
	clock := clockwork.NewFakeClock()
	cfg.Clock = clock
	opened := make(chan *Producer, 1)
	go func() {
		p, err := Open(ctxT(t), cfg)
		if err != nil {
			t.Error(err)
		}
		opened <- p
	}()
	for _, interval := range []time.Duration{openRetryInitial, 2 * openRetryInitial} {
		if err := clock.BlockUntilContext(ctxT(t), 1); err != nil { // the pause's timer
			t.Fatal(err)
		}
		clock.Advance(interval*3/2 + time.Nanosecond)
	}
	p := <-opened
	if p == nil {
		t.FailNow()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	resultT(t, sendT(t, p, simpleEntry(t, 0)))
	b.locked(func() {
		if len(b.producers) != 3 {
			t.Errorf("%d PRODUCER requests, want 3 (two refused, one answered not ready then ready)", len(b.producers))
		}
	})

	refusing := startFakeBroker(t, nil, func(b *fakeBroker) {
		b.token = "right"
		b.producerErrors = []pb.ServerError{pb.ServerError_AuthorizationError}
	})
	cluster := global.ClusterData{BrokerServiceURL: refusing.url, AuthenticationPlugin: "token", AuthenticationParameters: "token:wrong"}
	_, err := Open(ctxT(t), testConfig(cluster))
	if !errors.Is(err, ErrConnect) || !errors.Is(err, wire.ErrAuthentication) {
		t.Fatalf("Open with a wrong token: %v, want ErrConnect and AuthenticationError", err)
	}
	cluster.AuthenticationParameters = "token:right"
	if _, err = Open(ctxT(t), testConfig(cluster)); !errors.Is(err, wire.ErrAuthorization) {
		t.Fatalf("Open refused by authorization: %v", err)
	}
	refusing.locked(func() {
		if len(refusing.producers) != 1 {
			t.Errorf("an authorization error was retried: %d PRODUCERs", len(refusing.producers))
		}
	})
}

// TestTLS: pulsar+ssl with the trust file, or with insecure connections
// allowed; a certificate no one trusts is refused.
func TestTLS(t *testing.T) {
	caFile, serverTLS := testCerts(t)
	b := startFakeBroker(t, serverTLS, nil)
	for _, tc := range []struct {
		name    string
		cluster global.ClusterData
		ok      bool
	}{
		{"trusted", global.ClusterData{BrokerServiceURLTLS: b.url, BrokerClientTLSEnabled: true, BrokerClientTrustCertsFilePath: caFile}, true},
		{"insecure", global.ClusterData{BrokerServiceURLTLS: b.url, BrokerClientTLSEnabled: true, TLSAllowInsecureConnection: true}, true},
		{"untrusted", global.ClusterData{BrokerServiceURLTLS: b.url, BrokerClientTLSEnabled: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Open(ctxT(t), testConfig(tc.cluster))
			if !tc.ok {
				if err == nil || !errors.Is(err, ErrConnect) {
					t.Fatalf("Open = %v, want a TLS failure", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctxT(t))
			resultT(t, sendT(t, p, simpleEntry(t, 5)))
		})
	}
}

// TestBadEntries: what is not a stored entry, or came by replication, is
// refused with a clear error and nothing is sent.
func TestBadEntries(t *testing.T) {
	b := startFakeBroker(t, nil, nil)
	p := openT(t, testConfig(global.ClusterData{BrokerServiceURL: b.url}))
	replicated := storedEntry(t, 4, 1, pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1),
		PublishTime: proto.Uint64(1), ReplicatedFrom: proto.String("eu-west")}.Build(), []byte("x"))
	corrupt := simpleEntry(t, 4)
	corrupt[len(corrupt)-1] ^= 0xff
	// A BrokerEntryMetadata section of 0 bytes (no index) before a valid message.
	noIndex := append([]byte{0x0e, 0x02, 0, 0, 0, 0}, must(wire.AppendMessage(nil, pb.MessageMetadata_builder{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}.Build(), []byte("x")))...)
	for _, tc := range []struct {
		name  string
		entry []byte
		want  error
	}{
		{"replicated", replicated, ErrAlreadyReplicated},
		{"checksum", corrupt, wire.ErrChecksum},
		{"no index", noIndex, ErrBadEntry},
		{"not an entry", []byte("hello"), ErrBadEntry},
	} {
		if _, err := p.Send(ctxT(t), tc.entry); !errors.Is(err, tc.want) {
			t.Errorf("%s: Send = %v, want %v", tc.name, err, tc.want)
		}
	}
	if n := len(b.sent()); n != 0 {
		t.Fatalf("%d bad entries were sent", n)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("a refused entry stopped the producer: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := testConfig(global.ClusterData{BrokerServiceURL: "pulsar://a:6650,b:6650"})
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"no region":        func(c *Config) { c.SourceRegion = "" },
		"no topic":         func(c *Config) { c.Topic = "" },
		"no window":        func(c *Config) { c.MaxInFlightEntries = 0 },
		"tiny byte window": func(c *Config) { c.MaxInFlightBytes = 10 },
		"no timeout":       func(c *Config) { c.OperationTimeout = 0 },
		"no redirects":     func(c *Config) { c.MaxLookupRedirects = 0 },
		"no keep-alive":    func(c *Config) { c.KeepAliveInterval = 0 },
		"no clock":         func(c *Config) { c.Clock = nil },
		"http only":        func(c *Config) { c.Cluster = global.ClusterData{ServiceURL: "http://a:8080"} },
		"tls without url":  func(c *Config) { c.Cluster.BrokerClientTLSEnabled = true },
		"bad host":         func(c *Config) { c.Cluster.BrokerServiceURL = "pulsar://a" },
		"other plugin": func(c *Config) {
			c.Cluster.AuthenticationPlugin = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
		},
		"empty token": func(c *Config) {
			c.Cluster.AuthenticationPlugin, c.Cluster.AuthenticationParameters = "token", "token:"
		},
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestTokenParameters(t *testing.T) {
	file := t.TempDir() + "/token"
	if err := os.WriteFile(file, []byte(" jwt-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for params, want := range map[string]string{
		"token:abc":               "abc",
		`{"token":"abc"}`:         "abc",
		"abc":                     "abc",
		"file://" + file:          "jwt-from-file",
		`{"file":"` + file + `"}`: "jwt-from-file",
	} {
		a, err := newAuth(pluginTokenClass, params)
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		got, err := a.data()
		if err != nil || string(got) != want || a.name != "token" {
			t.Errorf("%s: method %q data %q, %v; want token %q", params, a.name, got, err, want)
		}
	}
	if _, err := newAuth("token", `{"token":`); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad JSON: %v", err)
	}
	a, err := newAuth("token", "file:"+file+".missing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.data(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a missing token file: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestLookupEdges: the service URL's hosts are tried in order, a lookup
// that redirects forever is cut off, and an AUTH_CHALLENGE is answered
// with the credentials.
func TestLookupEdges(t *testing.T) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close() // nothing listens there now
	b := startFakeBroker(t, nil, func(b *fakeBroker) { b.challenge = true })
	cluster := global.ClusterData{BrokerServiceURL: "pulsar://" + downAddr + "," + strings.TrimPrefix(b.url, "pulsar://"),
		AuthenticationPlugin: "token", AuthenticationParameters: "token:jwt-2"}
	p := openT(t, testConfig(cluster))
	resultT(t, sendT(t, p, simpleEntry(t, 0)))
	b.waitFor("an AUTH_RESPONSE", func() bool { return len(b.authResponses) == 1 })
	b.locked(func() {
		if got := b.authResponses[0].GetResponse(); got.GetAuthMethodName() != "token" || string(got.GetAuthData()) != "jwt-2" {
			t.Errorf("AUTH_RESPONSE %v, want the token", got)
		}
	})

	loop := startFakeBroker(t, nil, func(b *fakeBroker) { b.redirectTo = b.url })
	cfg := testConfig(global.ClusterData{BrokerServiceURL: loop.url})
	cfg.MaxLookupRedirects = 3
	if _, err := Open(ctxT(t), cfg); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Open against a redirect loop: %v, want ErrProtocol", err)
	}
	loop.locked(func() {
		if len(loop.lookups) != 4 {
			t.Errorf("%d lookups, want 4 (the first and 3 redirects)", len(loop.lookups))
		}
	})
}

// TestClose: Close waits for the receipts in flight, and when its context
// ends first, fails the rest with ErrClosed; a Send waiting for room is
// released.
func TestClose(t *testing.T) {
	b := startFakeBroker(t, nil, func(b *fakeBroker) { b.hold = true })
	cfg := testConfig(global.ClusterData{BrokerServiceURL: b.url})
	cfg.MaxInFlightEntries = 1
	p := openT(t, cfg)
	r := sendT(t, p, simpleEntry(t, 0))
	b.waitFor("the SEND", func() bool { return len(b.sends) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	// This Send waits for room in the full window until Close wakes it.
	if _, err := p.Send(ctxT(t), simpleEntry(t, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send while closing: %v, want ErrClosed", err)
	}
	b.release(1)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v after the last receipt came", err)
	}
	resultT(t, r)

	p = openT(t, cfg)
	r = sendT(t, p, simpleEntry(t, 2))
	b.waitFor("the second producer's SEND", func() bool { return len(b.sends) == 2 })
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Close(ended); !errors.Is(err, ErrClosed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context and an entry in flight: %v", err)
	}
	if _, err := r.Wait(ctxT(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("the entry in flight: %v, want ErrClosed", err)
	}
}

// TestChunkAndSingle: an unbatched entry is sent as one message with equal
// sequence ids, and a chunk is flagged as one.
func TestChunkAndSingle(t *testing.T) {
	b := startFakeBroker(t, nil, nil)
	p := openT(t, testConfig(global.ClusterData{BrokerServiceURL: b.url}))
	chunk := storedEntry(t, 9, 1, pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(3),
		PublishTime: proto.Uint64(1), Uuid: proto.String("p-3"), ChunkId: proto.Int32(0), NumChunksFromMsg: proto.Int32(2),
		TotalChunkMsgSize: proto.Int32(10)}.Build(), []byte("half"))
	resultT(t, sendT(t, p, simpleEntry(t, 8)))
	resultT(t, sendT(t, p, chunk))
	sent := b.sent()
	if s := sent[0].send; s.GetSequenceId() != 8 || s.GetHighestSequenceId() != 8 || s.GetNumMessages() != 1 || s.GetIsChunk() {
		t.Errorf("single message SEND %v", s)
	}
	if s := sent[1].send; s.GetSequenceId() != 9 || s.GetHighestSequenceId() != 9 || !s.GetIsChunk() {
		t.Errorf("chunk SEND %v", s)
	}
}

// BenchmarkSend: stored batches through a full window to a broker on
// loopback that answers at once; reports entries and messages per second.
func BenchmarkSend(b *testing.B) {
	fb := startFakeBroker(b, nil, nil)
	p, err := Open(context.Background(), testConfig(global.ClusterData{BrokerServiceURL: fb.url}))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	entries := make([][]byte, 1024)
	for i := range entries {
		entries[i], _, _ = batchEntry(b, uint64(3*i+2))
	}
	ctx := context.Background()
	b.ResetTimer()
	var last *Receipt
	for i := range b.N {
		if last, err = p.Send(ctx, entries[i%len(entries)]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(3*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
