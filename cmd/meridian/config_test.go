package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/node"
)

// pulsarClientGoDir is pulsar-client-go's directory in the module cache,
// whose integration-tests hold the configuration, certificates and tokens
// its own test suite runs Pulsar with.
func pulsarClientGoDir(t *testing.T) string {
	t.Helper()
	version := "v0.19.0"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/apache/pulsar-client-go" {
				version = d.Version
			}
		}
	}
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, _ := os.UserHomeDir()
			gopath = filepath.Join(home, "go")
		}
		modcache = filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod")
	}
	dir := filepath.Join(modcache, "github.com", "apache", "pulsar-client-go@"+version)
	if _, err := os.Stat(filepath.Join(dir, "integration-tests", "conf", "standalone.conf")); err != nil {
		t.Skipf("pulsar-client-go's integration-tests are not in the module cache: %v", err)
	}
	return dir
}

// produceConsume sends n messages to topic through c and receives them
// back, or returns the first error.
func produceConsume(ctx context.Context, c pulsar.Client, topic string, n int) error {
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		return fmt.Errorf("create producer: %w", err)
	}
	defer p.Close()
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			return fmt.Errorf("receive %d: %w", i, err)
		}
		if got := string(m.Payload()); got != fmt.Sprint(i) {
			return fmt.Errorf("message %d: got %q", i, got)
		}
		if err := cons.Ack(m); err != nil {
			return err
		}
	}
	return nil
}

func clientWith(t *testing.T, opts pulsar.ClientOptions) pulsar.Client {
	t.Helper()
	if opts.OperationTimeout == 0 {
		opts.OperationTimeout = 10 * time.Second
	}
	opts.ConnectionTimeout = 5 * time.Second
	opts.Logger = plog.NewLoggerWithSlog(quietLogger())
	c, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestStandaloneWithPulsarClientGoConf is what the compatibility runner
// does: `meridian standalone --config` with pulsar-client-go's own
// integration-tests/conf/standalone.conf, its /pulsar/... paths pointed at
// the module's certs and tokens, the htpasswd file given as Pulsar's
// Docker image gives it (PULSAR_EXTRA_OPTS), and the ports moved by flags.
// Clients authenticate over TLS with the module's admin token and client
// certificate, and over plain TCP with basic authentication; a role with
// no grants is refused. Each key the file sets that Meridian ignores is
// warned about exactly once.
func TestStandaloneWithPulsarClientGoConf(t *testing.T) {
	if testing.Short() {
		t.Skip("starts meridian standalone")
	}
	it := filepath.Join(pulsarClientGoDir(t), "integration-tests")
	b, err := os.ReadFile(filepath.Join(it, "conf", "standalone.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "standalone.conf")
	text := strings.NewReplacer("/pulsar/certs/", filepath.Join(it, "certs")+"/", "/pulsar/tokens/", filepath.Join(it, "tokens")+"/").Replace(string(b))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PULSAR_EXTRA_OPTS", "-Xmx1g -Dpulsar.auth.basic.conf="+filepath.Join(it, "conf", ".htpasswd"))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ports := freePorts(t, 4)
	logPath := filepath.Join(dir, "standalone.log")
	p := startProcess(t, "standalone --config", logPath, "standalone", "--config", conf,
		"--data-dir", filepath.Join(dir, "data"),
		"--broker-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--web-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--broker-tls-listen", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--web-tls-listen", fmt.Sprintf("127.0.0.1:%d", ports[3]))
	line := p.waitReady(ctx, t)
	f := strings.Fields(strings.TrimPrefix(line, "standalone ready:"))
	// advertisedAddress=localhost from the file: the broker certificate is
	// for localhost.
	want := []string{fmt.Sprintf("pulsar://localhost:%d", ports[0]), fmt.Sprintf("http://localhost:%d", ports[1]),
		fmt.Sprintf("pulsar+ssl://localhost:%d", ports[2]), fmt.Sprintf("https://localhost:%d", ports[3])}
	if len(f) != 5 || f[0] != want[0] || f[1] != want[1] || f[3] != want[2] || f[4] != want[3] {
		t.Fatalf("ready line %q, want the URLs %v", line, want)
	}
	serviceURL, tlsURL := f[0], f[3]

	logText, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"zookeeperServers", "brokerClientAuthenticationParameters", "transactionCoordinatorEnabled", "loadBalancerEnabled"} {
		if n := strings.Count(string(logText), "key="+key+" "); n != 1 {
			t.Errorf("ignored key %s warned about %d times, want once", key, n)
		}
	}
	for _, key := range []string{"brokerServicePort", "tlsCertificateFilePath", "authenticationProviders", "superUserRoles"} {
		if strings.Contains(string(logText), "key="+key+" ") {
			t.Errorf("supported key %s was reported as ignored", key)
		}
	}

	caFile := filepath.Join(it, "certs", "cacert.pem")
	token := func(name string) string {
		b, err := os.ReadFile(filepath.Join(it, "tokens", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	t.Run("TLS and the admin token", func(t *testing.T) {
		c := clientWith(t, pulsar.ClientOptions{URL: tlsURL, TLSTrustCertsFilePath: caFile,
			Authentication: pulsar.NewAuthenticationToken(token("admin-token"))})
		if err := produceConsume(ctx, c, "persistent://public/default/conf-token", 10); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("TLS client certificate", func(t *testing.T) {
		c := clientWith(t, pulsar.ClientOptions{URL: tlsURL, TLSTrustCertsFilePath: caFile,
			Authentication: pulsar.NewAuthenticationTLS(filepath.Join(it, "certs", "client-cert.pem"), filepath.Join(it, "certs", "client-key.pem"))})
		if err := produceConsume(ctx, c, "persistent://public/default/conf-cert", 10); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("basic authentication", func(t *testing.T) {
		basic, err := pulsar.NewAuthenticationBasic("admin", "123456")
		if err != nil {
			t.Fatal(err)
		}
		c := clientWith(t, pulsar.ClientOptions{URL: serviceURL, Authentication: basic})
		if err := produceConsume(ctx, c, "persistent://public/default/conf-basic", 10); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("roles without grants are refused", func(t *testing.T) {
		for name, a := range map[string]pulsar.Authentication{
			"token-principal": pulsar.NewAuthenticationToken(token("token.txt")),
			"anonymous":       nil,
		} {
			c := clientWith(t, pulsar.ClientOptions{URL: tlsURL, TLSTrustCertsFilePath: caFile, Authentication: a, OperationTimeout: 5 * time.Second})
			_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/conf-token"})
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
				t.Errorf("%s: producer: %v, want an authorization error", name, err)
			}
		}
	})
	if err := p.stop(t, 30*time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// TestConfigFileUnderFlags: the file sets what the command line does not;
// a flag the user gave wins over the file, whatever its type (string, int,
// duration, slice), although both write the same config; Pulsar's
// variables in the environment win over the file and lose to the flags.
func TestConfigFileUnderFlags(t *testing.T) {
	t.Setenv("advertisedAddress", "env.example.com")
	t.Setenv("PULSAR_PREFIX_managedLedgerDefaultAckQuorum", "1") // --ack-quorum wins
	t.Setenv("PULSAR_PREFIX_webServicePort", "7180")
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte(`clusterName=from-file
brokerServicePort=7000
webServicePort=7080
brokerServicePortTls=7001
managedLedgerDefaultEnsembleSize=3
managedLedgerDefaultWriteQuorum=3
managedLedgerDefaultAckQuorum=2
keepAliveIntervalSeconds=5
superUserRoles=a,b
advertisedAddress=file.example.com
unknownKey=1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultBrokerConfig("")
	ncfg := node.Config{Regions: []node.RegionConfig{{Broker: &cfg}}}
	region := &ncfg.Regions[0]
	cmd := &cobra.Command{Use: "test"}
	f := cmd.Flags()
	f.StringVar(&region.Name, "region", "", "")
	f.StringVar(&cfg.BrokerAddr, "broker-listen", cfg.BrokerAddr, "")
	f.StringVar(&cfg.WebAddr, "web-listen", cfg.WebAddr, "")
	f.IntVar(&cfg.Ledgers.AckQuorum, "ack-quorum", cfg.Ledgers.AckQuorum, "")
	f.DurationVar(&cfg.Broker.KeepAliveInterval, "keep-alive", cfg.Broker.KeepAliveInterval, "")
	f.StringSliceVar(&cfg.Authorization.SuperUserRoles, "super-users", nil, "")
	addTLSFlags(f, &cfg)
	if err := cmd.ParseFlags([]string{"--broker-listen", "127.0.0.1:9000", "--ack-quorum", "3", "--region", "from-flag",
		"--keep-alive", "7s", "--super-users", "x,y", "--broker-tls-listen", ""}); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	if err := applyPulsarConf(cmd, conf, &ncfg, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"region (flag)", region.Name, "from-flag"},
		{"broker listen (flag)", cfg.BrokerAddr, "127.0.0.1:9000"},
		{"broker TLS listen (flag, empty)", cfg.BrokerTLSAddr, ""},
		{"E/Qw/Qa (file, flag)", fmt.Sprint(cfg.Ledgers.EnsembleSize, cfg.Ledgers.WriteQuorum, cfg.Ledgers.AckQuorum), "3 3 3"},
		{"keep-alive (flag)", cfg.Broker.KeepAliveInterval.String(), "7s"},
		{"superusers (flag)", strings.Join(cfg.Authorization.SuperUserRoles, ","), "x,y"},
		{"web listen (environment over file)", cfg.WebAddr, "localhost:7180"},
		{"advertised (environment over file)", cfg.AdvertisedHost, "env.example.com"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if n := strings.Count(logs.String(), "key=unknownKey"); n != 1 {
		t.Errorf("unknownKey warned %d times, want once:\n%s", n, logs.String())
	}
}

// TestFlagsFromEnvironment: every flag of a command takes its
// MERIDIAN_FLAG_ variable unless the command line gives it; a variable
// naming another command's flag is left alone, one naming no flag of any
// command is reported, a service link is neither, and a value that does
// not parse names its variable.
func TestFlagsFromEnvironment(t *testing.T) {
	root := newRootCommand()
	cmd, _, err := root.Find([]string{"broker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags([]string{"--region", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	unknown, err := applyFlagEnv(cmd, []string{
		"MERIDIAN_FLAG_REGION=from-env", // the command line wins
		"MERIDIAN_FLAG_ETCD=http://e1:2379,http://e2:2379",
		"MERIDIAN_FLAG_BOOKIE_WAIT=45s",
		"MERIDIAN_FLAG_ENSEMBLE_SIZE=3",
		"MERIDIAN_FLAG_JOURNAL_MAX_WAIT=5ms",  // a bookie's: left alone
		"MERIDIAN_FLAG_BOOKIE_WIAT=1s",        // no command has it
		"MERIDIAN_FLAG_SERVICE_HOST=10.0.0.1", // a Service named meridian-flag
		"MERIDIAN_E2E_SEED=7", "MERIDIAN_PORT=tcp://10.0.0.2:6650",
	})
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"region": "from-flag", "etcd": "[http://e1:2379,http://e2:2379]",
		"bookie-wait": "45s", "ensemble-size": "3"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %s, want %s", flag, got, want)
		}
	}
	if !slices.Equal(unknown, []string{"MERIDIAN_FLAG_BOOKIE_WIAT"}) {
		t.Errorf("unknown %v, want only MERIDIAN_FLAG_BOOKIE_WIAT", unknown)
	}

	root = newRootCommand()
	root.SetArgs([]string{"broker"})
	var stderr strings.Builder
	root.SetErr(&stderr)
	t.Setenv("MERIDIAN_FLAG_BOOKIE_WAIT", "soon")
	err = root.Execute()
	if err == nil || !strings.Contains(err.Error(), "MERIDIAN_FLAG_BOOKIE_WAIT=soon (--bookie-wait)") {
		t.Errorf("a bad value: %v, want an error naming the variable and the flag", err)
	}
}
