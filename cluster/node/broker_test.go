package node_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/testkit"
)

func testLogger() *slog.Logger {
	if os.Getenv("STANDALONE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// failureLogger logs at debug level into a testkit.FailureLog: shown, its
// last lines, only when t fails. For tests whose rare failures need the
// nodes' side of the story.
func failureLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testkit.FailureLog(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testPKI is a CA, a server certificate for localhost and 127.0.0.1, and
// client certificates by CommonName, as PEM files in one directory.
type testPKI struct {
	dir     string
	ca      *testkit.CA
	CAFile  string
	Cert    string // server
	Key     string // server
	clients map[string][2]string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), ca: testkit.NewCA(t, "meridian test CA"), clients: map[string][2]string{}}
	p.CAFile = p.ca.WriteCA(t, p.dir)
	p.Cert, p.Key = p.ca.IssueFiles(t, p.dir, "server")
	return p
}

// client returns the certificate and key files of a client whose role is
// cn.
func (p *testPKI) client(t *testing.T, cn string) (certFile, keyFile string) {
	t.Helper()
	if f, ok := p.clients[cn]; ok {
		return f[0], f[1]
	}
	c, k := p.ca.IssueFiles(t, p.dir, cn)
	p.clients[cn] = [2]string{c, k}
	return c, k
}

// startStandalone starts a standalone node on free ports, with its broker
// changed by mutate, and returns it; the test's cleanup stops it.
func startStandalone(t *testing.T, mutate func(*node.BrokerConfig)) *node.Node {
	t.Helper()
	cfg := node.Standalone(t.TempDir())
	b := cfg.Regions[0].Broker
	b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
	cfg.Logger = testLogger()
	mutate(b)
	return startNode(t, cfg)
}

func newClient(t *testing.T, opts pulsar.ClientOptions) pulsar.Client {
	t.Helper()
	if opts.OperationTimeout == 0 {
		opts.OperationTimeout = 10 * time.Second
	}
	opts.ConnectionTimeout = 5 * time.Second
	if opts.Logger == nil {
		opts.Logger = plog.NewLoggerWithSlog(testLogger())
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// roundTrip produces n messages to topic and consumes them back.
func roundTrip(t *testing.T, c pulsar.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("producer %s: %v", topic, err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if got := string(m.Payload()); got != fmt.Sprint(i) {
			t.Fatalf("message %d: got %q", i, got)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeTLSAndClientCertAuth: with TLS and the "tls" provider, the broker
// serves pulsar+ssl:// and https:// next to the plain listeners, advertises
// them in lookups and the cluster record, authenticates a client by its
// certificate's CommonName and authorizes that role; a client without a
// certificate, or with a role that has no grant, is refused.
func TestNodeTLSAndClientCertAuth(t *testing.T) {
	pki := newTestPKI(t)
	s := startStandalone(t, func(c *node.BrokerConfig) {
		c.BrokerTLSAddr, c.WebTLSAddr = "127.0.0.1:0", "127.0.0.1:0"
		c.TLS = node.TLSConfig{CertFile: pki.Cert, KeyFile: pki.Key, TrustCertsFile: pki.CAFile}
		c.Auth.Enabled = true
		c.Auth.Providers = []string{"org.apache.pulsar.broker.authentication.AuthenticationProviderTls"}
		c.Authorization = node.AuthorizationConfig{Enabled: true, SuperUserRoles: []string{"admin-role"}}
	}).Broker()
	if !strings.HasPrefix(s.ServiceURLTLS(), "pulsar+ssl://127.0.0.1:") || !strings.HasPrefix(s.WebURLTLS(), "https://127.0.0.1:") {
		t.Fatalf("TLS URLs: %q %q", s.ServiceURLTLS(), s.WebURLTLS())
	}
	if cd := s.ClusterData(); cd.BrokerServiceURLTLS != s.ServiceURLTLS() || cd.ServiceURLTLS != s.WebURLTLS() {
		t.Fatalf("cluster record %+v lacks the TLS URLs", cd)
	}
	if a := s.Authenticator(); a == nil || !a.Enabled() || strings.Join(a.Methods(), ",") != auth.MethodTLS {
		t.Fatalf("Authenticator: %+v", a)
	}
	if z := s.Authorizer(); z == nil || !z.IsSuperUser("admin-role") {
		t.Fatal("Authorizer: missing or without the superuser")
	}

	t.Run("superuser certificate", func(t *testing.T) {
		cert, key := pki.client(t, "admin-role")
		authn := pulsar.NewAuthenticationTLS(cert, key)
		c := newClient(t, pulsar.ClientOptions{URL: s.ServiceURLTLS(), TLSTrustCertsFilePath: pki.CAFile, Authentication: authn})
		roundTrip(t, c, "persistent://public/default/tls-topic", 20)
	})
	t.Run("no certificate", func(t *testing.T) {
		// The client retries a refused connection until its operation
		// timeout.
		c := newClient(t, pulsar.ClientOptions{URL: s.ServiceURLTLS(), TLSTrustCertsFilePath: pki.CAFile, OperationTimeout: 2 * time.Second})
		if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/tls-topic"}); err == nil {
			p.Close()
			t.Fatal("a client without a certificate created a producer")
		}
	})
	t.Run("role without grants", func(t *testing.T) {
		cert, key := pki.client(t, "nobody")
		authn := pulsar.NewAuthenticationTLS(cert, key)
		c := newClient(t, pulsar.ClientOptions{URL: s.ServiceURLTLS(), TLSTrustCertsFilePath: pki.CAFile, Authentication: authn})
		_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/tls-topic"})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
			t.Fatalf("producer of a role without grants: %v, want an authorization error", err)
		}
	})
	t.Run("plain listener still serves", func(t *testing.T) {
		// The plain listener authenticates too: no certificate there.
		c := newClient(t, pulsar.ClientOptions{URL: s.ServiceURL(), OperationTimeout: 2 * time.Second})
		if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/tls-topic"}); err == nil {
			p.Close()
			t.Fatal("an anonymous client created a producer on the plain listener")
		}
	})
	t.Run("https", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AddCert(pki.ca.Cert)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(s.WebURLTLS() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics over https: %s", resp.Status)
		}
	})
	// pulsar-client-go's TestHTTPSAuth: with an https:// service URL the
	// client looks topics up over HTTP, with its certificate as its only
	// credential. The role must be the certificate's CommonName there too.
	t.Run("https lookup by certificate", func(t *testing.T) {
		lookup := func(cn string) (int, string) {
			t.Helper()
			cert, err := tls.LoadX509KeyPair(pki.client(t, cn))
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(pki.ca.Cert)
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get(s.WebURLTLS() + "/lookup/v2/topic/persistent/public/default/tls-topic")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, body := lookup("admin-role"); code != http.StatusOK {
			t.Fatalf("lookup with the superuser's certificate: %d %s", code, body)
		}
		if code, body := lookup("nobody"); code != http.StatusForbidden || !strings.Contains(body, `\"nobody\"`) {
			t.Fatalf("lookup with the certificate of a role without grants: %d %s, want 403 naming the role nobody", code, body)
		}
	})
}

// TestNodeTLSConfigErrors: TLS without a certificate, or a provider that
// does not exist, fails before anything starts.
func TestNodeTLSConfigErrors(t *testing.T) {
	cfg := node.DefaultBrokerConfig("h")
	for _, tc := range []struct {
		mutate func(*node.BrokerConfig)
		want   string
	}{
		{func(c *node.BrokerConfig) { c.BrokerTLSAddr = ":0" }, "TLS.CertFile"},
		{func(c *node.BrokerConfig) { c.Auth.Enabled, c.Auth.Providers = true, []string{"kerberos"} }, "unknown provider"},
	} {
		c := cfg
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
		}
	}
}
