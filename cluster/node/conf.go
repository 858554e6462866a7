package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// A Pulsar configuration file (broker.conf, standalone.conf) is a Java
// properties file of key=value lines. Pulsar's images also take its keys
// from the environment (apply-config-from-env): a variable named exactly
// as a key (metadataStoreUrl=...), or PULSAR_PREFIX_<key>. ReadPulsarConf
// and PulsarConfFromEnv read either into a PulsarConf, which Apply sets
// onto a Config (its first region, whose Broker must be set) through
// pulsarConfKeys, the one table that says which Pulsar settings Meridian
// honours and which field each one sets; flags map onto the same fields,
// so the file, the environment and the flags cannot disagree about what a
// setting means.
//
// As in Pulsar, a key given an empty value keeps its default, a key given
// twice takes its last value, and the environment wins over the file.
// Unlike Pulsar, a value that does not parse is an error naming where it
// came from (the file and line, or the variable) and the key, not a silent
// default.

// ConfKey is a setting that Meridian did not apply.
type ConfKey struct {
	Key string
	// Source is the file it came from, or "environment" (then Variable
	// names the variable).
	Source   string
	Line     int // in the file, of the key's first occurrence
	Variable string
}

// confSetter parses a non-empty value onto cfg, the first region of a
// Config.
type confSetter func(cfg *RegionConfig, v string) error

// confMapping is one supported Pulsar setting of the region.
type confMapping struct {
	key string
	set confSetter
}

// processMapping is one supported Pulsar setting of the whole process: its
// metadata stores.
type processMapping struct {
	key string
	set func(cfg *Config, v string) error
}

// pulsarProcessKeys are applied before pulsarConfKeys: with them, the two
// make the one table. Pulsar writes a store's URL as etcd:URL[,URL...];
// Meridian keeps its metadata in etcd only.
var pulsarProcessKeys = []processMapping{
	{"metadataStoreUrl", func(c *Config, v string) error {
		// The region's metadata store, instead of an embedded one.
		eps, err := etcdURLs(v)
		c.Etcd, c.EmbedEtcd = eps, false
		return err
	}},
	{"configurationMetadataStoreUrl", func(c *Config, v string) error {
		eps, err := etcdURLs(v)
		c.GlobalEtcd = eps
		return err
	}},
	{"metadataStoreConfigPath", func(c *Config, v string) error {
		// Pulsar's etcd client file, which Pulsar reads for both stores:
		// EtcdAuth, which the global store's etcd takes too unless the
		// --global-etcd-* flags set GlobalEtcdAuth.
		if c.EmbedEtcd {
			return errors.New("the embedded etcd takes no client settings: give metadataStoreUrl, an etcd of its own")
		}
		f, err := meta.ReadPulsarEtcdConfig(v)
		if err != nil {
			return err
		}
		// Pulsar takes TLS from useTls, Meridian from the URL: an http://
		// one would connect in plain text (with no TLS file set, nothing
		// else would tell).
		for _, u := range slices.Concat(c.Etcd, c.GlobalEtcd) {
			if host, ok := strings.CutPrefix(u, "http://"); ok && f.UseTLS {
				return fmt.Errorf("useTls is true but %s is plain http: write https://%s (Meridian takes TLS from the URL)", u, host)
			}
		}
		c.EtcdAuth.TLS = TLSFiles{CAFile: f.TrustCertsFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
		c.EtcdAuth.Authority = f.Authority
		return nil
	}},
}

// etcdURLs parses Pulsar's etcd:http://h1:2379,http://h2:2379 (the etcd:
// prefix may be left out) into client URLs.
func etcdURLs(v string) ([]string, error) {
	rest, _ := strings.CutPrefix(v, "etcd:")
	var eps []string
	for _, u := range list(rest) {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("%q is not an etcd client URL (Meridian keeps its metadata in etcd): want etcd:http://host:2379[,http://host2:2379...]", u)
		}
		eps = append(eps, u)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("want etcd:http://host:2379[,http://host2:2379...]")
	}
	return eps, nil
}

// pulsarConfKeys maps Pulsar's setting names onto RegionConfig, applied in
// this order whatever the file's order (bindAddress after the ports, so
// that it sets the host of every listener the ports enabled; tlsEnabled
// after the TLS ports, so that explicit ports win).
var pulsarConfKeys = []confMapping{
	{"clusterName", str(func(c *RegionConfig) *string { return &c.Name })},
	{"advertisedAddress", str(func(c *RegionConfig) *string { return &c.Broker.AdvertisedHost })},
	{"advertisedListeners", str(func(c *RegionConfig) *string { return &c.Broker.AdvertisedListeners })},
	{"internalListenerName", str(func(c *RegionConfig) *string { return &c.Broker.InternalListenerName })},
	{"brokerServicePort", port(func(c *RegionConfig) *string { return &c.Broker.BrokerAddr })},
	{"webServicePort", port(func(c *RegionConfig) *string { return &c.Broker.WebAddr })},
	{"brokerServicePortTls", port(func(c *RegionConfig) *string { return &c.Broker.BrokerTLSAddr })},
	{"webServicePortTls", port(func(c *RegionConfig) *string { return &c.Broker.WebTLSAddr })},
	{"tlsEnabled", func(c *RegionConfig, v string) error {
		// Pulsar's deprecated switch: TLS on its default ports unless
		// brokerServicePortTls / webServicePortTls say otherwise.
		on, err := parseBool(v)
		if err != nil || !on {
			return err
		}
		if c.Broker.BrokerTLSAddr == "" {
			c.Broker.BrokerTLSAddr = withPort(c.Broker.BrokerAddr, "6651")
		}
		if c.Broker.WebTLSAddr == "" {
			c.Broker.WebTLSAddr = withPort(c.Broker.WebAddr, "8443")
		}
		return nil
	}},
	{"bindAddress", func(c *RegionConfig, v string) error {
		for _, a := range []*string{&c.Broker.BrokerAddr, &c.Broker.WebAddr, &c.Broker.BrokerTLSAddr, &c.Broker.WebTLSAddr} {
			if *a != "" {
				_, p, _ := net.SplitHostPort(*a)
				*a = net.JoinHostPort(v, p)
			}
		}
		return nil
	}},

	{"tlsCertificateFilePath", str(func(c *RegionConfig) *string { return &c.Broker.TLS.CertFile })},
	{"tlsKeyFilePath", str(func(c *RegionConfig) *string { return &c.Broker.TLS.KeyFile })},
	{"tlsTrustCertsFilePath", str(func(c *RegionConfig) *string { return &c.Broker.TLS.TrustCertsFile })},
	{"tlsAllowInsecureConnection", boolean(func(c *RegionConfig) *bool { return &c.Broker.TLS.AllowInsecureConnection })},
	{"tlsRequireTrustedClientCertOnConnect", boolean(func(c *RegionConfig) *bool { return &c.Broker.TLS.RequireTrustedClientCert })},

	// The ledger client's TLS to the bookies, as Pulsar's BookKeeper
	// client takes it (--bookie-tls-* flags).
	{"bookkeeperTLSTrustCertsFilePath", str(func(c *RegionConfig) *string { return &c.BookieClient.TLS.CAFile })},
	{"bookkeeperTLSCertificateFilePath", str(func(c *RegionConfig) *string { return &c.BookieClient.TLS.CertFile })},
	{"bookkeeperTLSKeyFilePath", str(func(c *RegionConfig) *string { return &c.BookieClient.TLS.KeyFile })},

	{"authenticationEnabled", boolean(func(c *RegionConfig) *bool { return &c.Broker.Auth.Enabled })},
	{"authenticationProviders", func(c *RegionConfig, v string) error {
		ps := list(v)
		if err := (auth.Config{Providers: ps}).Validate(); err != nil {
			return err
		}
		c.Broker.Auth.Providers = ps
		return nil
	}},
	{"anonymousUserRole", str(func(c *RegionConfig) *string { return &c.Broker.Auth.AnonymousRole })},
	{"tokenSecretKey", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.SecretKey })},
	{"tokenPublicKey", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.PublicKey })},
	{"tokenPublicAlg", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.PublicAlg })},
	{"tokenAuthClaim", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.RoleClaim })},
	{"tokenAudienceClaim", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.AudienceClaim })},
	{"tokenAudience", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Token.Audience })},
	{"basicAuthConf", str(func(c *RegionConfig) *string { return &c.Broker.Auth.Basic.Conf })},
	{"authorizationEnabled", boolean(func(c *RegionConfig) *bool { return &c.Broker.Authorization.Enabled })},
	{"superUserRoles", func(c *RegionConfig, v string) error { c.Broker.Authorization.SuperUserRoles = list(v); return nil }},

	{"maxMessageSize", integer(1, 100<<20, func(c *RegionConfig) *int { return &c.Broker.Broker.MaxMessageSize })},
	{"keepAliveIntervalSeconds", seconds(1, 3600, func(c *RegionConfig) *time.Duration { return &c.Broker.Broker.KeepAliveInterval })},
	{"authenticationRefreshCheckSeconds", seconds(0, 86400, func(c *RegionConfig) *time.Duration { return &c.Broker.Broker.AuthRefreshInterval })},
	{"maxConcurrentLookupRequest", integer(1, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.MaxConcurrentLookups })},
	{"maxConcurrentTopicLoadRequest", integer(1, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.MaxConcurrentTopicLoads })},
	{"brokerMaxConnections", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Broker.MaxConnections })},
	{"brokerMaxConnectionsPerIp", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Broker.MaxConnectionsPerIP })},
	{"maxHttpServerConnections", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Web.MaxConnections })},
	{"maxPendingPublishRequestsPerConnection", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Broker.MaxPendingPublishes })},
	{"maxUnackedMessagesPerConsumer", func(c *RegionConfig, v string) error {
		// Pulsar's 0 means "no limit".
		n, err := parseInt(v, 0, 1<<31-1)
		if n == 0 {
			n = 1<<31 - 1
		}
		c.Broker.Service.Dispatch.MaxUnackedPerConsumer = int(n)
		return err
	}},
	{"maxUnackedMessagesPerSubscription", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Dispatch.MaxUnackedPerSubscription })},
	{"exposeTopicLevelMetricsInPrometheus", func(c *RegionConfig, v string) error {
		on, err := parseBool(v)
		c.Metrics.NamespaceLevel = !on
		return err
	}},
	{"statsUpdateFrequencyInSecs", seconds(1, 3600, func(c *RegionConfig) *time.Duration { return &c.Metrics.StatsPeriod })},
	{"dispatcherMaxReadBatchSize", integer(1, 10000, func(c *RegionConfig) *int { return &c.Broker.Service.Dispatch.MaxReadEntries })},
	{"dispatcherReadFailureBackoffInitialTimeInMs", millis(1, 600_000, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.Dispatch.ReadRetryInitial })},
	{"dispatcherReadFailureBackoffMaxTimeInMs", millis(1, 600_000, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.Dispatch.ReadRetryMax })},
	{"brokerDeduplicationEntriesInterval", integer(1, 1<<30, func(c *RegionConfig) *int { return &c.Broker.Service.DedupSnapshotInterval })},
	{"brokerDeduplicationSnapshotIntervalSeconds", seconds(0, 86400, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.DedupSnapshotTime })},
	{"brokerDeduplicationSnapshotFrequencyInSeconds", seconds(1, 86400, func(c *RegionConfig) *time.Duration {
		return &c.Broker.Service.DedupSnapshotCheckInterval
	})},
	{"topicLoadTimeoutSeconds", seconds(1, 3600, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.TopicLoadTimeout })},
	{"backlogQuotaCheckIntervalInSeconds", seconds(1, 86400, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.BacklogQuotaCheckInterval })},
	{"messageExpiryCheckIntervalInMinutes", minutes(1, 1440, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.MessageExpiryCheckInterval })},
	{"replicationStartAt", func(c *RegionConfig, v string) error {
		switch at := broker.ReplicationStart(strings.ToLower(v)); at {
		case broker.ReplicationStartLatest, broker.ReplicationStartEarliest:
			c.Broker.Service.ReplicationStartAt = at
			return nil
		}
		return fmt.Errorf("want %s or %s", broker.ReplicationStartLatest, broker.ReplicationStartEarliest)
	}},
	{"replicatedSubscriptionsSnapshotFrequencyMillis", millis(10, 3_600_000, func(c *RegionConfig) *time.Duration {
		return &c.Broker.Service.ReplicatedSubscriptions.Interval
	})},
	{"defaultNumberOfNamespaceBundles", integer(1, 1024, func(c *RegionConfig) *int { return &c.Broker.DefaultNamespaceBundles })},

	{"loadBalancerReportUpdateMinIntervalMillis", millis(100, 3_600_000, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.LoadBalance.ReportInterval })},
	{"loadBalancerSheddingEnabled", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.LoadBalance.SheddingEnabled })},
	{"loadBalancerSheddingIntervalMinutes", minutes(1, 1<<20, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.LoadBalance.SheddingInterval })},
	{"loadBalancerBrokerThresholdShedderPercentage", number(1, 100, 1, func(c *RegionConfig) *float64 { return &c.Broker.Service.LoadBalance.SheddingThreshold })},
	{"loadBalancerSheddingGracePeriodMinutes", minutes(0, 1<<20, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.LoadBalance.SheddingGracePeriod })},
	{"loadBalancerBundleUnloadMinThroughputThreshold", number(0, 1<<20, 1<<20, func(c *RegionConfig) *float64 { return &c.Broker.Service.LoadBalance.MinSheddingThroughput })},
	{"loadBalancerAutoBundleSplitEnabled", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.LoadBalance.AutoBundleSplit })},
	{"loadBalancerNamespaceBundleMaxTopics", integer(1, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.LoadBalance.BundleMaxTopics })},
	{"loadBalancerNamespaceBundleMaxSessions", integer(1, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.LoadBalance.BundleMaxSessions })},
	{"loadBalancerNamespaceBundleMaxMsgRate", number(1, 1<<40, 1, func(c *RegionConfig) *float64 { return &c.Broker.Service.LoadBalance.BundleMaxMsgRate })},
	{"loadBalancerNamespaceBundleMaxBandwidthMbytes", number(1, 1<<20, 1<<20, func(c *RegionConfig) *float64 { return &c.Broker.Service.LoadBalance.BundleMaxThroughput })},
	{"loadBalancerNamespaceMaximumBundles", integer(1, 1024, func(c *RegionConfig) *int { return &c.Broker.Service.LoadBalance.MaxBundles })},

	{"brokerDeduplicationEnabled", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.Policies.DeduplicationEnabled })},
	{"allowAutoTopicCreation", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.Policies.AllowAutoTopicCreation })},
	{"allowAutoSubscriptionCreation", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.Policies.AllowAutoSubscriptionCreation })},
	{"allowAutoTopicCreationType", func(c *RegionConfig, v string) error {
		switch t := global.TopicType(v); t {
		case global.Partitioned, global.NonPartitioned:
			c.Broker.Service.Policies.AutoTopicCreationType = t
			return nil
		}
		return fmt.Errorf("want %s or %s", global.Partitioned, global.NonPartitioned)
	}},
	{"defaultNumPartitions", integer(1, 1<<16, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.DefaultNumPartitions })},
	{"maxProducersPerTopic", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MaxProducersPerTopic })},
	{"maxConsumersPerTopic", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MaxConsumersPerTopic })},
	{"maxConsumersPerSubscription", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MaxConsumersPerSubscription })},
	{"subscribeThrottlingRatePerConsumer", integer(0, 1<<31-1, func(c *RegionConfig) *int {
		return &c.Broker.Service.Policies.SubscribeRate.SubscribeThrottlingRatePerConsumer
	})},
	{"subscribeRatePeriodPerConsumerInSecond", integer(1, 1<<31-1, func(c *RegionConfig) *int {
		return &c.Broker.Service.Policies.SubscribeRate.RatePeriodInSecond
	})},
	{"maxTopicsPerNamespace", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MaxTopicsPerNamespace })},
	{"maxNumPartitionsPerPartitionedTopic", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MaxNumPartitions })},
	{"defaultRetentionTimeInMinutes", integer(-1, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.RetentionTimeInMinutes })},
	{"defaultRetentionSizeInMB", int64Field(-1, 1<<40, func(c *RegionConfig) *int64 { return &c.Broker.Service.Policies.RetentionSizeInMB })},
	{"ttlDurationDefaultInSeconds", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.MessageTTLInSeconds })},
	{"subscriptionExpirationTimeMinutes", integer(0, 1<<31-1, func(c *RegionConfig) *int { return &c.Broker.Service.Policies.SubscriptionExpirationTimeMinutes })},
	{"subscriptionExpiryCheckIntervalInMinutes", minutes(1, 1440, func(c *RegionConfig) *time.Duration { return &c.Broker.Service.SubscriptionExpiryCheckInterval })},
	{"backlogQuotaDefaultLimitBytes", int64Field(-1, 1<<62, func(c *RegionConfig) *int64 { return &c.Broker.Service.Policies.BacklogQuotaLimitBytes })},
	{"backlogQuotaDefaultLimitSecond", int64Field(-1, 1<<40, func(c *RegionConfig) *int64 { return &c.Broker.Service.Policies.BacklogQuotaLimitSeconds })},
	{"backlogQuotaDefaultLimitGB", func(c *RegionConfig, v string) error {
		// Deprecated in Pulsar, and taken over the bytes setting when
		// positive, as Pulsar does.
		gb, err := strconv.ParseFloat(v, 64)
		if err != nil || gb > 1<<30 {
			return fmt.Errorf("want a number of GiB")
		}
		if gb > 0 {
			c.Broker.Service.Policies.BacklogQuotaLimitBytes = int64(gb * (1 << 30))
		}
		return nil
	}},
	{"isSchemaValidationEnforced", boolean(func(c *RegionConfig) *bool { return &c.Broker.Service.Policies.SchemaValidationEnforced })},
	{"schemaCompatibilityStrategy", func(c *RegionConfig, v string) error {
		s := global.SchemaCompatibilityStrategy(strings.ToUpper(v))
		d := c.Broker.Service.Policies
		d.SchemaCompatibilityStrategy = s
		if s == global.SchemaUndefined || d.Validate() != nil {
			return fmt.Errorf("want one of ALWAYS_INCOMPATIBLE, ALWAYS_COMPATIBLE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE, FULL_TRANSITIVE")
		}
		c.Broker.Service.Policies.SchemaCompatibilityStrategy = s
		return nil
	}},

	{"managedLedgerDefaultEnsembleSize", integer(1, 64, func(c *RegionConfig) *int { return &c.Broker.Ledgers.EnsembleSize })},
	{"managedLedgerDefaultWriteQuorum", integer(1, 64, func(c *RegionConfig) *int { return &c.Broker.Ledgers.WriteQuorum })},
	{"managedLedgerDefaultAckQuorum", integer(1, 64, func(c *RegionConfig) *int { return &c.Broker.Ledgers.AckQuorum })},
	{"managedLedgerMaxEntriesPerLedger", int64Field(1, 1<<30, func(c *RegionConfig) *int64 { return &c.Broker.Ledgers.MaxEntriesPerLedger })},
	{"managedLedgerMaxSizePerLedgerMbytes", func(c *RegionConfig, v string) error {
		n, err := parseInt(v, 1, 1<<20)
		c.Broker.Ledgers.MaxSizePerLedger = n << 20
		return err
	}},
	{"managedLedgerMinLedgerRolloverTimeMinutes", minutes(0, 1<<20, func(c *RegionConfig) *time.Duration { return &c.Broker.Ledgers.MinLedgerRolloverTime })},
	{"managedLedgerMaxLedgerRolloverTimeMinutes", minutes(1, 1<<20, func(c *RegionConfig) *time.Duration { return &c.Broker.Ledgers.MaxLedgerRolloverTime })},
}

// PulsarConfKeys are the Pulsar settings Apply applies, in the order it
// applies them.
func PulsarConfKeys() []string {
	var keys []string
	for _, k := range pulsarProcessKeys {
		keys = append(keys, k.key)
	}
	for _, k := range pulsarConfKeys {
		keys = append(keys, k.key)
	}
	return keys
}

func supportedKey(key string) bool {
	return slices.ContainsFunc(pulsarConfKeys, func(k confMapping) bool { return k.key == key }) ||
		slices.ContainsFunc(pulsarProcessKeys, func(k processMapping) bool { return k.key == key })
}

// PulsarConf is a set of Pulsar settings read from a file or from the
// environment, not yet applied.
type PulsarConf struct {
	values  map[string]confValue
	ignored []ConfKey
}

// confValue is a setting's value and where it came from, for errors.
type confValue struct {
	value string
	where string // "FILE line N", or "environment variable NAME"
}

// PulsarPrefixEnv is the prefix of the environment variables that carry a
// Pulsar setting by its key, as Pulsar's images read them.
const PulsarPrefixEnv = "PULSAR_PREFIX_"

// ReadPulsarConf reads a Pulsar configuration file from r (name is for
// errors). A malformed line is an error that names the file and line.
func ReadPulsarConf(r io.Reader, name string) (*PulsarConf, error) {
	c := &PulsarConf{values: map[string]confValue{}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lineNo, start := 0, 0
	var pending string // a logical line continued with a trailing backslash
	for sc.Scan() {
		lineNo++
		text := strings.TrimLeft(sc.Text(), " \t\f")
		if pending == "" {
			start = lineNo
			if text == "" || text[0] == '#' || text[0] == '!' {
				continue
			}
		}
		if strings.HasSuffix(text, `\`) && (len(text)-len(strings.TrimRight(text, `\`)))%2 == 1 {
			pending += text[:len(text)-1]
			continue
		}
		text, pending = pending+text, ""
		i := strings.IndexAny(text, "=:")
		if i < 0 {
			return nil, fmt.Errorf("%w: %s line %d: %q is not key=value", ErrConf, name, start, text)
		}
		key, value := strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+1:])
		if key == "" {
			return nil, fmt.Errorf("%w: %s line %d: empty key", ErrConf, name, start)
		}
		c.values[key] = confValue{value, fmt.Sprintf("%s line %d", name, start)}
		if !seen[key] {
			seen[key] = true
			if !supportedKey(key) {
				c.ignored = append(c.ignored, ConfKey{Key: key, Source: name, Line: start})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrConf, name, err)
	}
	return c, nil
}

// PulsarConfFromEnv takes Pulsar's settings from environ (os.Environ's
// form), as Pulsar's apply-config-from-env does: a variable named exactly
// as a supported key (clusterName=east), and PULSAR_PREFIX_<key> for any
// key, which wins over the bare name. A PULSAR_PREFIX_ key that Meridian
// does not support is ignored and reported; other variables are not
// settings, and are left alone.
func PulsarConfFromEnv(environ []string) *PulsarConf {
	c := &PulsarConf{values: map[string]confValue{}}
	prefixed := map[string]confValue{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		where := "environment variable " + name
		if key, ok := strings.CutPrefix(name, PulsarPrefixEnv); ok && key != "" {
			if !supportedKey(key) {
				if !IsServiceLink(name) {
					c.ignored = append(c.ignored, ConfKey{Key: key, Source: "environment", Variable: name})
				}
				continue
			}
			prefixed[key] = confValue{strings.TrimSpace(value), where}
			continue
		}
		if supportedKey(name) {
			c.values[name] = confValue{strings.TrimSpace(value), where}
		}
	}
	for k, v := range prefixed {
		c.values[k] = v
	}
	slices.SortFunc(c.ignored, func(a, b ConfKey) int { return strings.Compare(a.Variable, b.Variable) })
	return c
}

// IsServiceLink reports whether name has the shape of the variables that
// Kubernetes injects for every Service of a namespace (<SVC>_SERVICE_HOST,
// <SVC>_SERVICE_PORT[_<NAME>], <SVC>_PORT[_<N>_<PROTO>[_PROTO|_PORT|_ADDR]]),
// which are no settings whatever their prefix.
func IsServiceLink(name string) bool {
	if strings.HasSuffix(name, "_SERVICE_HOST") || strings.HasSuffix(name, "_PORT") ||
		strings.Contains(name, "_SERVICE_PORT") {
		return true
	}
	_, rest, ok := strings.Cut(name, "_PORT_")
	if !ok {
		return false
	}
	// <N>_<PROTO>[_PROTO|_PORT|_ADDR]
	f := strings.Split(rest, "_")
	if len(f) < 2 || len(f) > 3 {
		return false
	}
	if _, err := strconv.Atoi(f[0]); err != nil {
		return false
	}
	return slices.Contains([]string{"TCP", "UDP", "SCTP"}, f[1]) &&
		(len(f) == 2 || slices.Contains([]string{"PROTO", "PORT", "ADDR"}, f[2]))
}

// Override sets every value of o over c's (the environment over a file).
func (c *PulsarConf) Override(o *PulsarConf) {
	for k, v := range o.values {
		c.values[k] = v
	}
	c.ignored = append(c.ignored, o.ignored...)
}

// Ignored are the settings given that Meridian does not support, each
// once, in the order they were read: the caller says so (they may matter
// to the user).
func (c *PulsarConf) Ignored() []ConfKey { return slices.Clone(c.ignored) }

// Apply sets the supported settings onto cfg, whose first region's Broker
// must be set. A value that does not parse is an error that names where
// it came from and the key; cfg is then unchanged.
func (c *PulsarConf) Apply(cfg *Config) error {
	if len(cfg.Regions) == 0 || cfg.Regions[0].Broker == nil {
		return fmt.Errorf("%w: no broker to configure", ErrConf)
	}
	next, b := *cfg, *cfg.Regions[0].Broker
	region := cfg.Regions[0]
	region.Broker = &b
	// Slices in next and region still share arrays with cfg; setters
	// replace them whole, never write into them.
	for _, k := range pulsarProcessKeys {
		if e, ok := c.values[k.key]; ok && e.value != "" {
			if err := k.set(&next, e.value); err != nil {
				return fmt.Errorf("%w: %s: %s=%s: %v", ErrConf, e.where, k.key, e.value, err)
			}
		}
	}
	for _, k := range pulsarConfKeys {
		if e, ok := c.values[k.key]; ok && e.value != "" {
			if err := k.set(&region, e.value); err != nil {
				return fmt.Errorf("%w: %s: %s=%s: %v", ErrConf, e.where, k.key, e.value, err)
			}
		}
	}
	// The caller's broker and region are written in place: flags point
	// into them.
	*cfg.Regions[0].Broker = b
	region.Broker = cfg.Regions[0].Broker
	cfg.Regions[0] = region
	next.Regions = cfg.Regions
	*cfg = next
	return nil
}

// ApplyPulsarConf reads a Pulsar configuration file from r (name is for
// errors) and applies the settings Meridian supports to cfg (ReadPulsarConf,
// then Apply). It returns the keys it did not apply.
func ApplyPulsarConf(r io.Reader, name string, cfg *Config) (ignored []ConfKey, err error) {
	c, err := ReadPulsarConf(r, name)
	if err != nil {
		return nil, err
	}
	if err := c.Apply(cfg); err != nil {
		return nil, err
	}
	return c.Ignored(), nil
}

func str(field func(*RegionConfig) *string) confSetter {
	return func(c *RegionConfig, v string) error { *field(c) = v; return nil }
}

func boolean(field func(*RegionConfig) *bool) confSetter {
	return func(c *RegionConfig, v string) error {
		b, err := parseBool(v)
		*field(c) = b
		return err
	}
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

func parseInt(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func integer(lo, hi int64, field func(*RegionConfig) *int) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := parseInt(v, lo, hi)
		*field(c) = int(n)
		return err
	}
}

func int64Field(lo, hi int64, field func(*RegionConfig) *int64) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := parseInt(v, lo, hi)
		*field(c) = n
		return err
	}
}

func seconds(lo, hi int64, field func(*RegionConfig) *time.Duration) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := parseInt(v, lo, hi)
		*field(c) = time.Duration(n) * time.Second
		return err
	}
}

func minutes(lo, hi int64, field func(*RegionConfig) *time.Duration) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := parseInt(v, lo, hi)
		*field(c) = time.Duration(n) * time.Minute
		return err
	}
}

func millis(lo, hi int64, field func(*RegionConfig) *time.Duration) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := parseInt(v, lo, hi)
		*field(c) = time.Duration(n) * time.Millisecond
		return err
	}
}

// number sets a float field to the value, from lo to hi, times unit (the
// bytes of a MB, for example).
func number(lo, hi, unit float64, field func(*RegionConfig) *float64) confSetter {
	return func(c *RegionConfig, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want a number from %v to %v", lo, hi)
		}
		*field(c) = n * unit
		return nil
	}
}

// port sets the port of a listen address, keeping its host (an address
// not set yet takes the host of the protocol listener).
func port(field func(*RegionConfig) *string) confSetter {
	return func(c *RegionConfig, v string) error {
		if _, err := parseInt(v, 0, 65535); err != nil {
			return fmt.Errorf("want a port number from 0 to 65535")
		}
		a := field(c)
		base := *a
		if base == "" {
			base = c.Broker.BrokerAddr
		}
		*a = withPort(base, v)
		return nil
	}
}

// withPort is addr with its port replaced by p.
func withPort(addr, p string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return net.JoinHostPort(host, p)
}

// list splits a comma-separated value, dropping empty items.
func list(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
