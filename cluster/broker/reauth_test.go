package broker_test

import (
	"context"
	"encoding/base64"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// tokenAuthenticator returns a token Authenticator and a function that
// signs tokens for it.
func tokenAuthenticator(t *testing.T) (*auth.Authenticator, func(role string, ttl time.Duration) string) {
	t.Helper()
	key := auth.GenerateSecretKey()
	cfg := auth.DefaultConfig()
	cfg.Enabled = true
	cfg.Providers = []string{auth.MethodToken}
	cfg.Token.SecretKey = "data:;base64," + base64.StdEncoding.EncodeToString(key)
	a, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, func(role string, ttl time.Duration) string {
		var exp time.Time
		if ttl > 0 {
			exp = time.Now().Add(ttl)
		}
		tok, err := auth.CreateToken(key, "HS256", role, exp, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// TestReauthentication: a connection whose token expires is challenged
// for a fresh one; fresh credentials of its role keep it, none by the next
// check or another role's close it, and a token without exp is never
// asked again. Each case has a server of its own, whose checks run on a
// fake clock set to the wall time (the tokens' exp is wall time).
func TestReauthentication(t *testing.T) {
	authn, token := tokenAuthenticator(t)
	// A token's exp has a precision of one second: two seconds is the
	// shortest life that still admits the CONNECT. One check interval
	// later the token has expired.
	const life, interval = 2 * time.Second, 3 * time.Second
	start := func(t *testing.T) (*clockwork.FakeClock, func(tok string) *rawClient) {
		clock := clockwork.NewFakeClockAt(time.Now())
		s := startServer(t, func(c *broker.Config) { c.Auth, c.AuthRefreshInterval, c.Clock = authn, interval, clock })
		return clock, func(tok string) *rawClient {
			c := dialRaw(t, s.addr)
			c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: pb.CommandConnect_builder{
				ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20),
				AuthMethodName: proto.String(auth.MethodToken), AuthData: []byte(tok),
			}.Build()}.Build())
			c.expect(pb.BaseCommand_CONNECTED)
			return c
		}
	}
	// check moves the clock on by one interval once the connection's
	// tickers are there: its keep-alive, and its credentials check if its
	// token expires.
	check := func(t *testing.T, clock *clockwork.FakeClock, tickers int) {
		t.Helper()
		if err := clock.BlockUntilContext(t.Context(), tickers); err != nil {
			t.Fatal(err)
		}
		clock.Advance(interval)
	}
	answer := func(c *rawClient, tok string) {
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: pb.CommandAuthResponse_builder{
			Response: pb.AuthData_builder{AuthMethodName: proto.String(auth.MethodToken), AuthData: []byte(tok)}.Build(),
		}.Build()}.Build())
	}
	// open checks that c is open and was sent nothing but pings: the
	// server answers its PING, after everything it sent before.
	open := func(t *testing.T, c *rawClient) {
		t.Helper()
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
		if cmd, err := c.next(); err != nil || cmd.GetType() != pb.BaseCommand_PONG {
			t.Fatalf("got %v, %v; want the PONG of an open connection", cmd, err)
		}
	}

	t.Run("fresh token keeps the connection", func(t *testing.T) {
		clock, connect := start(t)
		c := connect(token("alice", life))
		check(t, clock, 2)
		c.expect(pb.BaseCommand_AUTH_CHALLENGE)
		answer(c, token("alice", time.Hour))
		open(t, c) // the answer is taken: it was read before the PING
		check(t, clock, 2)
		open(t, c)
	})
	t.Run("no answer closes it", func(t *testing.T) {
		clock, connect := start(t)
		c := connect(token("alice", life))
		check(t, clock, 2)
		c.expect(pb.BaseCommand_AUTH_CHALLENGE)
		check(t, clock, 2)
		if !c.closed() {
			t.Fatal("a connection whose token expired stayed open without a fresh one")
		}
	})
	t.Run("another role closes it", func(t *testing.T) {
		clock, connect := start(t)
		c := connect(token("alice", life))
		check(t, clock, 2)
		c.expect(pb.BaseCommand_AUTH_CHALLENGE)
		answer(c, token("mallory", time.Hour))
		if e := c.expect(pb.BaseCommand_ERROR).GetError(); e.GetError() != pb.ServerError_AuthenticationError {
			t.Fatalf("refusal %v, want AuthenticationError", e)
		}
		if !c.closed() {
			t.Fatal("a connection that changed its role stayed open")
		}
	})
	t.Run("a token without exp is not asked again", func(t *testing.T) {
		clock, connect := start(t)
		c := connect(token("alice", 0))
		check(t, clock, 1) // its keep-alive alone: no credentials check runs
		open(t, c)
	})
}

// TestReauthenticationWithPulsarClientGo: pulsar-client-go answers the
// challenges from its token supplier and its producer keeps sending past
// the first token's exp; a client whose static token expires is cut off
// (it reconnects with the same token, which is refused).
func TestReauthenticationWithPulsarClientGo(t *testing.T) {
	authn, token := tokenAuthenticator(t)
	r := startBroker(t, nil, func(c *brokertest.Config) { c.Broker.Auth, c.Broker.AuthRefreshInterval = authn, 100*time.Millisecond })

	var supplied atomic.Int32
	refreshing, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: 30 * time.Second,
		Authentication: pulsar.NewAuthenticationTokenFromSupplier(func() (string, error) {
			supplied.Add(1)
			return token("alice", 2*time.Second), nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer refreshing.Close()
	p, err := refreshing.CreateProducer(pulsar.ProducerOptions{Topic: topicFor(t, "-refreshing")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	testkit.WaitFor(t, "three challenges answered", func() bool { return supplied.Load() >= 4 })
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("after refreshes")}); err != nil {
		t.Fatalf("send after the token was refreshed: %v", err)
	}

	static, err := pulsar.NewClient(pulsar.ClientOptions{URL: r.ServiceURL(), OperationTimeout: 2 * time.Second,
		ConnectionTimeout: 2 * time.Second, Authentication: pulsar.NewAuthenticationToken(token("alice", 2*time.Second))})
	if err != nil {
		t.Fatal(err)
	}
	defer static.Close()
	sp, err := static.CreateProducer(pulsar.ProducerOptions{Topic: topicFor(t, "-static"), SendTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	testkit.WaitFor(t, "the expired token's producer to be cut off", func() bool {
		_, err := sp.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")})
		return err != nil
	})
}
