package node_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
)

// applyConf applies text onto region "r"'s default broker and returns the
// region's name and broker.
func applyConf(t *testing.T, text string) (string, node.BrokerConfig, []node.ConfKey, error) {
	t.Helper()
	b := node.DefaultBrokerConfig("localhost")
	cfg := node.Config{Regions: []node.RegionConfig{{Name: "r", Broker: &b}}}
	ignored, err := node.ApplyPulsarConf(strings.NewReader(text), "test.conf", &cfg)
	return cfg.Regions[0].Name, *cfg.Regions[0].Broker, ignored, err
}

func TestApplyPulsarConf(t *testing.T) {
	region, cfg, ignored, err := applyConf(t, `
# a comment
! another comment
   brokerServicePort=7650   
webServicePort = 9080
brokerServicePortTls=
bindAddress=0.0.0.0
clusterName=east
advertisedAddress=broker.example.com
tlsEnabled=true
tlsCertificateFilePath=/c.pem
tlsKeyFilePath=/k.pem
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderTls, token
tokenSecretKey=file:///secret.key
superUserRoles=admin,,super
authorizationEnabled=true
anonymousUserRole=anon
maxMessageSize=1048576
keepAliveIntervalSeconds=7
maxUnackedMessagesPerConsumer=0
brokerDeduplicationEnabled=true
allowAutoTopicCreationType=partitioned
allowAutoSubscriptionCreation=false
defaultNumPartitions=3
defaultRetentionTimeInMinutes=60
defaultRetentionSizeInMB=100
schemaCompatibilityStrategy=backward
managedLedgerDefaultEnsembleSize=3
managedLedgerDefaultWriteQuorum=3
managedLedgerDefaultAckQuorum=2
managedLedgerMaxEntriesPerLedger=50000
managedLedgerMinLedgerRolloverTimeMinutes=10
managedLedgerMaxLedgerRolloverTimeMinutes=240
defaultNumberOfNamespaceBundles=1
zookeeperServers=
loadBalancerEnabled=false
loadBalancerEnabled=true
brokerClientAuthenticationParameters={"tlsCertFile":"/a", \
  "tlsKeyFile":"/b"}
replicationStartAt=Earliest
dispatcherReadFailureBackoffInitialTimeInMs=15000
dispatcherReadFailureBackoffMaxTimeInMs=60000
authenticationRefreshCheckSeconds=5
replicatedSubscriptionsSnapshotFrequencyMillis=250
advertisedListeners=internal:pulsar://10.0.0.5:7650,external:pulsar://broker.example.com:16650
internalListenerName=internal
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"BrokerAddr", cfg.BrokerAddr, "0.0.0.0:7650"},
		{"WebAddr", cfg.WebAddr, "0.0.0.0:9080"},
		{"BrokerTLSAddr", cfg.BrokerTLSAddr, "0.0.0.0:6651"}, // tlsEnabled, empty brokerServicePortTls
		{"WebTLSAddr", cfg.WebTLSAddr, "0.0.0.0:8443"},
		{"Region", region, "east"},
		{"AdvertisedHost", cfg.AdvertisedHost, "broker.example.com"},
		{"AdvertisedListeners", cfg.AdvertisedListeners, "internal:pulsar://10.0.0.5:7650,external:pulsar://broker.example.com:16650"},
		{"InternalListenerName", cfg.InternalListenerName, "internal"},
		{"TLS", cfg.TLS, node.TLSConfig{CertFile: "/c.pem", KeyFile: "/k.pem"}},
		{"Auth.Enabled", cfg.Auth.Enabled, true},
		{"Auth.Providers", cfg.Auth.Providers, []string{"org.apache.pulsar.broker.authentication.AuthenticationProviderTls", "token"}},
		{"Auth.Token.SecretKey", cfg.Auth.Token.SecretKey, "file:///secret.key"},
		{"Auth.Token.RoleClaim", cfg.Auth.Token.RoleClaim, "sub"},
		{"Auth.AnonymousRole", cfg.Auth.AnonymousRole, "anon"},
		{"Authorization", cfg.Authorization, node.AuthorizationConfig{Enabled: true, SuperUserRoles: []string{"admin", "super"}}},
		{"MaxMessageSize", cfg.Broker.MaxMessageSize, 1048576},
		{"KeepAliveInterval", cfg.Broker.KeepAliveInterval, 7 * time.Second},
		{"AuthRefreshInterval", cfg.Broker.AuthRefreshInterval, 5 * time.Second},
		{"MaxUnackedPerConsumer", cfg.Service.Dispatch.MaxUnackedPerConsumer, 1<<31 - 1},
		{"Dedup", cfg.Service.Policies.DeduplicationEnabled, true},
		{"AutoTopicCreationType", cfg.Service.Policies.AutoTopicCreationType, global.Partitioned},
		{"AllowAutoSubscriptionCreation", cfg.Service.Policies.AllowAutoSubscriptionCreation, false},
		{"DefaultNumPartitions", cfg.Service.Policies.DefaultNumPartitions, 3},
		{"Retention", [2]int64{int64(cfg.Service.Policies.RetentionTimeInMinutes), cfg.Service.Policies.RetentionSizeInMB}, [2]int64{60, 100}},
		{"Schema", cfg.Service.Policies.SchemaCompatibilityStrategy, global.SchemaBackward},
		{"E/Qw/Qa", [3]int{cfg.Ledgers.EnsembleSize, cfg.Ledgers.WriteQuorum, cfg.Ledgers.AckQuorum}, [3]int{3, 3, 2}},
		{"MaxEntriesPerLedger", cfg.Ledgers.MaxEntriesPerLedger, int64(50000)},
		{"Rollover", [2]time.Duration{cfg.Ledgers.MinLedgerRolloverTime, cfg.Ledgers.MaxLedgerRolloverTime}, [2]time.Duration{10 * time.Minute, 240 * time.Minute}},
		{"DefaultNamespaceBundles", cfg.DefaultNamespaceBundles, 1},
		{"ReplicationStartAt", cfg.Service.ReplicationStartAt, broker.ReplicationStartEarliest},
		{"ReplicatedSubscriptions.Interval", cfg.Service.ReplicatedSubscriptions.Interval, 250 * time.Millisecond},
		{"ReadRetry", [2]time.Duration{cfg.Service.Dispatch.ReadRetryInitial, cfg.Service.Dispatch.ReadRetryMax}, [2]time.Duration{15 * time.Second, time.Minute}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	want := []node.ConfKey{{Key: "zookeeperServers", Source: "test.conf", Line: 36}, {Key: "loadBalancerEnabled", Source: "test.conf", Line: 37},
		{Key: "brokerClientAuthenticationParameters", Source: "test.conf", Line: 39}}
	if !slices.Equal(ignored, want) {
		t.Errorf("ignored %v, want %v (each key once, at its first line)", ignored, want)
	}
}

// TestApplyPulsarConfErrors: a bad value names the file, the line and the
// key, and leaves the config as it was.
func TestApplyPulsarConfErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"brokerServicePort=abc", "test.conf line 1: brokerServicePort=abc: want a port number"},
		{"\n\nbrokerServicePort=70000", "test.conf line 3: brokerServicePort=70000"},
		{"authenticationEnabled=yes", "line 1: authenticationEnabled=yes: want true or false"},
		{"authenticationProviders=kerberos", `unknown provider "kerberos"`},
		{"maxMessageSize=-1", "maxMessageSize=-1: want an integer from 1"},
		{"allowAutoTopicCreationType=some", "want partitioned or non-partitioned"},
		{"schemaCompatibilityStrategy=LOOSE", "schemaCompatibilityStrategy=LOOSE: want one of"},
		{"replicationStartAt=middle", "replicationStartAt=middle: want latest or earliest"},
		{"just some words", `line 1: "just some words" is not key=value`},
	} {
		region, cfg, _, err := applyConf(t, tc.text)
		if err == nil || !errors.Is(err, node.ErrConf) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrConf containing %q", tc.text, err, tc.want)
		}
		if region != "r" || !reflect.DeepEqual(cfg, node.DefaultBrokerConfig("localhost")) {
			t.Errorf("%q: the config changed despite the error", tc.text)
		}
	}
}

// pulsarClientGoDir is pulsar-client-go's directory in the module cache.
func pulsarClientGoDir(t *testing.T) string {
	t.Helper()
	info, ok := debug.ReadBuildInfo()
	version := "v0.19.0"
	if ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/apache/pulsar-client-go" {
				version = d.Version
			}
		}
	}
	gomodcache := os.Getenv("GOMODCACHE")
	if gomodcache == "" {
		home, _ := os.UserHomeDir()
		gomodcache = filepath.Join(home, "go", "pkg", "mod")
		if gp := os.Getenv("GOPATH"); gp != "" {
			gomodcache = filepath.Join(strings.Split(gp, string(os.PathListSeparator))[0], "pkg", "mod")
		}
	}
	dir := filepath.Join(gomodcache, "github.com", "apache", "pulsar-client-go@"+version)
	if _, err := os.Stat(filepath.Join(dir, "integration-tests", "conf", "standalone.conf")); err != nil {
		t.Skipf("pulsar-client-go's integration-tests are not in the module cache: %v", err)
	}
	return dir
}

// TestApplyPulsarClientGoStandaloneConf reads the configuration that
// pulsar-client-go's own integration tests run Pulsar with.
func TestApplyPulsarClientGoStandaloneConf(t *testing.T) {
	dir := pulsarClientGoDir(t)
	f, err := os.Open(filepath.Join(dir, "integration-tests", "conf", "standalone.conf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sa := node.Standalone(t.TempDir())
	ignored, err := node.ApplyPulsarConf(f, "standalone.conf", &sa)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sa.Regions[0].Broker
	if cfg.BrokerTLSAddr != "0.0.0.0:6651" || cfg.WebTLSAddr != "0.0.0.0:8443" || cfg.BrokerAddr != "0.0.0.0:6650" ||
		cfg.TLS.CertFile != "/pulsar/certs/broker-cert.pem" || !cfg.Auth.Enabled || len(cfg.Auth.Providers) != 3 ||
		!cfg.Authorization.Enabled || cfg.Auth.AnonymousRole != "anonymous" || cfg.Broker.MaxMessageSize != 1048576 {
		t.Errorf("unexpected mapping: %+v", cfg)
	}
	if len(ignored) < 50 || !slices.ContainsFunc(ignored, func(k node.ConfKey) bool { return k.Key == "zookeeperServers" }) {
		t.Errorf("ignored keys: %v", ignored)
	}
}

// TestPulsarConfFromEnv: Pulsar's images' environment carries over. A
// variable named as a key sets it, PULSAR_PREFIX_<key> too and wins over
// it, the environment wins over the file, the metadata store URLs (with
// Pulsar's etcd: prefix) set the process's stores, an unsupported
// PULSAR_PREFIX_ key is reported by name (a Kubernetes service link is
// not), and a bad value names its variable.
func TestPulsarConfFromEnv(t *testing.T) {
	b := node.DefaultBrokerConfig("localhost")
	cfg := node.Standalone(t.TempDir())
	cfg.Regions[0].Broker = &b
	file, err := node.ReadPulsarConf(strings.NewReader("clusterName=from-file\nbrokerServicePort=7000\nmaxMessageSize=1000\n"), "broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	file.Override(node.PulsarConfFromEnv([]string{
		"clusterName=from-env",
		"PULSAR_PREFIX_brokerServicePort=7100",
		"brokerServicePort=7200", // the prefixed variable wins
		"metadataStoreUrl=etcd:http://e1:2379,http://e2:2379",
		"PULSAR_PREFIX_configurationMetadataStoreUrl=etcd:http://g1:2379",
		"PULSAR_PREFIX_zookeeperSessionTimeoutMs=30000",
		"PULSAR_PREFIX_SERVICE_HOST=10.0.0.1", // a Service named pulsar-prefix
		"HOME=/root", "PATH=/bin",
	}))
	if err := file.Apply(&cfg); err != nil {
		t.Fatal(err)
	}
	r := cfg.Regions[0]
	if r.Name != "from-env" || b.BrokerAddr != "localhost:7100" || b.Broker.MaxMessageSize != 1000 {
		t.Errorf("region %q, broker %q, max message size %d; want from-env, localhost:7100 (prefixed), 1000 (file)",
			r.Name, b.BrokerAddr, b.Broker.MaxMessageSize)
	}
	if cfg.EmbedEtcd || !slices.Equal(cfg.Etcd, []string{"http://e1:2379", "http://e2:2379"}) || !slices.Equal(cfg.GlobalEtcd, []string{"http://g1:2379"}) {
		t.Errorf("embedded %v, etcd %v, global %v; want the environment's stores", cfg.EmbedEtcd, cfg.Etcd, cfg.GlobalEtcd)
	}
	want := []node.ConfKey{{Key: "zookeeperSessionTimeoutMs", Source: "environment", Variable: "PULSAR_PREFIX_zookeeperSessionTimeoutMs"}}
	if got := file.Ignored(); !slices.Equal(got, want) {
		t.Errorf("ignored %v, want %v", got, want)
	}

	for _, c := range []struct{ env, want string }{
		{"PULSAR_PREFIX_maxMessageSize=big", "environment variable PULSAR_PREFIX_maxMessageSize: maxMessageSize=big: want an integer"},
		{"metadataStoreUrl=zk:localhost:2181", `metadataStoreUrl=zk:localhost:2181: "zk:localhost:2181" is not an etcd client URL`},
		{"configurationMetadataStoreUrl=etcd:", "configurationMetadataStoreUrl=etcd:: want etcd:http://host:2379"},
	} {
		b := node.DefaultBrokerConfig("localhost")
		cfg := node.Config{Regions: []node.RegionConfig{{Name: "r", Broker: &b}}}
		err := node.PulsarConfFromEnv([]string{c.env}).Apply(&cfg)
		if !errors.Is(err, node.ErrConf) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConf containing %q", c.env, err, c.want)
		}
	}
}

// TestIsServiceLink: the variables Kubernetes injects for a Service are
// recognised whatever the Service's name, and settings are not.
func TestIsServiceLink(t *testing.T) {
	for name, want := range map[string]bool{
		"MERIDIAN_SERVICE_HOST":              true,
		"MERIDIAN_SERVICE_PORT":              true,
		"MERIDIAN_SERVICE_PORT_PULSAR":       true,
		"MERIDIAN_PORT":                      true,
		"MERIDIAN_PORT_6650_TCP":             true,
		"MERIDIAN_PORT_6650_TCP_ADDR":        true,
		"MERIDIAN_PORT_6650_TCP_PROTO":       true,
		"MERIDIAN_FLAG_BOOKIE_WAIT":          false,
		"PULSAR_PREFIX_brokerServicePort":    false,
		"MERIDIAN_FLAG_BROKER_PORT_6650_TCP": true, // a Service named meridian-flag-broker
		"MERIDIAN_FLAG_PORT_OF_CALL":         false,
	} {
		if got := node.IsServiceLink(name); got != want {
			t.Errorf("IsServiceLink(%s) = %v, want %v", name, got, want)
		}
	}
}
