package global

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// Our records must read as pulsaradmin's structs, and pulsaradmin's as ours,
// because the admin API serves them to pulsar-client-go unchanged.

func fullPolicies() Policies {
	p := Policies{
		Bundles:             &BundlesData{NumBundles: 2, Boundaries: []string{"0x00000000", "0x80000000", "0xffffffff"}},
		ReplicationClusters: []string{"east", "west"},
		RetentionPolicies:   &RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 1024},
		BacklogQuotaMap: map[BacklogQuotaType]BacklogQuota{
			DestinationStorage: {LimitSize: 1 << 30, LimitTime: -1, Policy: ProducerException},
			MessageAge:         {LimitSize: -1, LimitTime: 3600, Policy: ConsumerBacklogEviction},
		},
		MessageTTLInSeconds:       ptr(120),
		DeduplicationEnabled:      ptr(false),
		AutoTopicCreationOverride: &AutoTopicCreation{Allow: true, Type: Partitioned, Partitions: ptr(3)},
		AuthPolicies: AuthPolicies{
			NamespaceAuth:         map[string][]AuthAction{"app": {ActionConsume, ActionProduce}},
			DestinationAuth:       map[string]map[string][]AuthAction{"persistent://t/ns/x": {"reader": {ActionConsume}}},
			SubscriptionAuthRoles: map[string][]string{"sub": {"reader"}},
		},
		SchemaCompatibilityStrategy: SchemaBackward,
		ActiveRegion:                "east",
	}
	p.normalize()
	return p
}

func TestPoliciesJSONCompatible(t *testing.T) {
	ours := fullPolicies()
	if err := ours.validate(); err != nil {
		t.Fatal(err)
	}
	// The stored form (with "v":1) and the served form both read as Pulsar's.
	stored := must(meta.EncodeJSON(recordVersion, ours)).ok(t)
	served := must(json.Marshal(ours)).ok(t)
	for name, data := range map[string][]byte{"stored": stored, "served": served} {
		var theirs utils.Policies
		if err := json.Unmarshal(data, &theirs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch {
		case theirs.Bundles == nil || theirs.Bundles.NumBundles != 2 || !slices.Equal(theirs.Bundles.Boundaries, ours.Bundles.Boundaries):
			t.Fatalf("%s: bundles %+v", name, theirs.Bundles)
		case !slices.Equal(theirs.ReplicationClusters, []string{"east", "west"}):
			t.Fatalf("%s: replication_clusters %v", name, theirs.ReplicationClusters)
		case theirs.RetentionPolicies == nil || *theirs.RetentionPolicies != (utils.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 1024}):
			t.Fatalf("%s: retention %+v", name, theirs.RetentionPolicies)
		case theirs.BacklogQuotaMap[utils.DestinationStorage] != (utils.BacklogQuota{LimitSize: 1 << 30, LimitTime: -1, Policy: utils.ProducerException}):
			t.Fatalf("%s: backlog quota %+v", name, theirs.BacklogQuotaMap)
		case theirs.BacklogQuotaMap[utils.MessageAge] != (utils.BacklogQuota{LimitSize: -1, LimitTime: 3600, Policy: utils.ConsumerBacklogEviction}):
			t.Fatalf("%s: message age quota %+v", name, theirs.BacklogQuotaMap)
		case theirs.MessageTTLInSeconds == nil || *theirs.MessageTTLInSeconds != 120:
			t.Fatalf("%s: ttl %v", name, theirs.MessageTTLInSeconds)
		case theirs.DeduplicationEnabled == nil || *theirs.DeduplicationEnabled:
			t.Fatalf("%s: dedup %v", name, theirs.DeduplicationEnabled)
		case theirs.TopicAutoCreationConfig == nil || !theirs.TopicAutoCreationConfig.Allow ||
			theirs.TopicAutoCreationConfig.Type != utils.Partitioned || *theirs.TopicAutoCreationConfig.Partitions != 3:
			t.Fatalf("%s: auto creation %+v", name, theirs.TopicAutoCreationConfig)
		case theirs.SchemaCompatibilityStrategy != utils.SchemaCompatibilityStrategyBackward:
			t.Fatalf("%s: schema strategy %q", name, theirs.SchemaCompatibilityStrategy)
		case len(theirs.AuthPolicies.NamespaceAuth["app"]) != 2 || theirs.AuthPolicies.NamespaceAuth["app"][1].String() != "produce" ||
			theirs.AuthPolicies.DestinationAuth["persistent://t/ns/x"]["reader"][0].String() != "consume" ||
			!slices.Equal(theirs.AuthPolicies.SubscriptionAuthRoles["sub"], []string{"reader"}):
			t.Fatalf("%s: auth %+v", name, theirs.AuthPolicies)
		}
	}

	// The reverse: what pulsaradmin sends (its defaults included) reads as
	// ours, keeping every field we model.
	theirs := utils.NewDefaultPolicies()
	theirs.ReplicationClusters = []string{"west"}
	theirs.MessageTTLInSeconds = ptr(5)
	theirs.DeduplicationEnabled = ptr(true)
	theirs.RetentionPolicies = &utils.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}
	theirs.BacklogQuotaMap[utils.DestinationStorage] = utils.NewBacklogQuota(100, -1, utils.ProducerRequestHold)
	theirs.TopicAutoCreationConfig = &utils.TopicAutoCreationConfig{Allow: false, Type: utils.NonPartitioned}
	theirs.Bundles = utils.NewDefaultBoundle()
	theirs.AuthPolicies.NamespaceAuth["r"] = []utils.AuthAction{must(utils.ParseAuthAction("produce")).ok(t)}
	var back Policies
	if err := json.Unmarshal(must(json.Marshal(theirs)).ok(t), &back); err != nil {
		t.Fatal(err)
	}
	back.normalize()
	if err := back.validate(); err != nil {
		t.Fatalf("pulsaradmin's policies do not validate: %v", err)
	}
	want := Policies{
		Bundles:                     &BundlesData{NumBundles: 1, Boundaries: []string{"0x00000000", "0xffffffff"}},
		ReplicationClusters:         []string{"west"},
		RetentionPolicies:           &RetentionPolicies{-1, -1},
		BacklogQuotaMap:             map[BacklogQuotaType]BacklogQuota{DestinationStorage: {LimitSize: 100, LimitTime: -1, Policy: ProducerRequestHold}},
		MessageTTLInSeconds:         ptr(5),
		DeduplicationEnabled:        ptr(true),
		AutoTopicCreationOverride:   &AutoTopicCreation{Allow: false, Type: NonPartitioned},
		AuthPolicies:                AuthPolicies{NamespaceAuth: map[string][]AuthAction{"r": {ActionProduce}}, DestinationAuth: map[string]map[string][]AuthAction{}, SubscriptionAuthRoles: map[string][]string{}},
		SchemaCompatibilityStrategy: SchemaUndefined,
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("pulsaradmin policies read as\n%+v\nwant\n%+v", back, want)
	}

	// A stored record decodes back to itself.
	var again Policies
	if _, err := meta.DecodeJSON(stored, recordVersion, &again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, ours) {
		t.Fatalf("round trip\n%+v\nwant\n%+v", again, ours)
	}
}

func TestTenantAndClusterJSONCompatible(t *testing.T) {
	ti := TenantInfo{AdminRoles: []string{"admin"}, AllowedClusters: []string{"east", "west"}}
	var theirT utils.TenantData
	if err := json.Unmarshal(must(meta.EncodeJSON(recordVersion, ti)).ok(t), &theirT); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(theirT.AdminRoles, ti.AdminRoles) || !slices.Equal(theirT.AllowedClusters, ti.AllowedClusters) {
		t.Fatalf("TenantData = %+v", theirT)
	}
	var backT TenantInfo
	if err := json.Unmarshal(must(json.Marshal(utils.TenantData{Name: "x", AdminRoles: []string{"r"}, AllowedClusters: []string{"c"}})).ok(t), &backT); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(backT, TenantInfo{AdminRoles: []string{"r"}, AllowedClusters: []string{"c"}}) {
		t.Fatalf("TenantInfo = %+v", backT)
	}
	// An empty tenant shows [] as Pulsar does, not null.
	empty := TenantInfo{}
	empty.normalize()
	if got := string(must(json.Marshal(empty)).ok(t)); got != `{"adminRoles":[],"allowedClusters":[]}` {
		t.Fatalf("empty tenant JSON = %s", got)
	}

	cd := west
	var theirC utils.ClusterData
	if err := json.Unmarshal(must(meta.EncodeJSON(recordVersion, cd)).ok(t), &theirC); err != nil {
		t.Fatal(err)
	}
	if theirC.ServiceURL != cd.ServiceURL || theirC.ServiceURLTls != cd.ServiceURLTLS ||
		theirC.BrokerServiceURL != cd.BrokerServiceURL || theirC.BrokerServiceURLTls != cd.BrokerServiceURLTLS ||
		theirC.AuthenticationPlugin != cd.AuthenticationPlugin || theirC.AuthenticationParameters != cd.AuthenticationParameters ||
		theirC.BrokerClientTLSEnabled != cd.BrokerClientTLSEnabled || theirC.BrokerClientTrustCertsFilePath != cd.BrokerClientTrustCertsFilePath {
		t.Fatalf("ClusterData = %+v", theirC)
	}
	var backC ClusterData
	if err := json.Unmarshal(must(json.Marshal(theirC)).ok(t), &backC); err != nil {
		t.Fatal(err)
	}
	if backC != cd {
		t.Fatalf("round trip through pulsaradmin = %+v, want %+v", backC, cd)
	}
	// pulsaradmin lacks Pulsar's tlsAllowInsecureConnection; it is spelled as
	// Pulsar's ClusterData spells it.
	insecure := ClusterData{BrokerServiceURLTLS: "pulsar+ssl://x:6651", TLSAllowInsecureConnection: true}
	if got, want := string(must(json.Marshal(insecure)).ok(t)), `"tlsAllowInsecureConnection":true`; !strings.Contains(got, want) {
		t.Fatalf("ClusterData JSON %s lacks %s", got, want)
	}

	var meta1 utils.PartitionedTopicMetadata
	if err := json.Unmarshal(must(json.Marshal(TopicPolicies{Partitions: 6})).ok(t), &meta1); err != nil || meta1.Partitions != 6 {
		t.Fatalf("PartitionedTopicMetadata = %+v, %v", meta1, err)
	}
}

func TestBundles(t *testing.T) {
	d := must(EvenBundlesData(4)).ok(t)
	want := []string{"0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"}
	if d.NumBundles != 4 || !slices.Equal(d.Boundaries, want) {
		t.Fatalf("EvenBundlesData(4) = %+v", d)
	}
	bs := must(d.Bundles()).ok(t)
	if len(bs) != 4 || bs[0].String() != "0x00000000_0x40000000" || bs[3].String() != "0xc0000000_0xffffffff" {
		t.Fatalf("Bundles = %v", bs)
	}
	for _, bad := range []BundlesData{
		{NumBundles: 0},
		{NumBundles: 1, Boundaries: []string{"0x00000000"}},
		{NumBundles: 1, Boundaries: []string{"0x00000001", "0xffffffff"}},
		{NumBundles: 1, Boundaries: []string{"0x00000000", "0xfffffffe"}},
		{NumBundles: 2, Boundaries: []string{"0x00000000", "0xffffffff", "0xffffffff"}},
		{NumBundles: 1, Boundaries: []string{"0x00000000", "zz"}},
	} {
		if _, err := bad.Bundles(); err == nil {
			t.Errorf("Bundles(%+v) accepted", bad)
		}
	}
	if _, err := EvenBundlesData(0); err == nil {
		t.Error("EvenBundlesData(0) accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultCacheConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultBrokerDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Config){
		"prefix without /":  func(c *Config) { c.Prefix = "meridian" },
		"prefix ending /":   func(c *Config) { c.Prefix = "/meridian/global/" },
		"zero attempts":     func(c *Config) { c.MaxUpdateAttempts = 0 },
		"too many attempts": func(c *Config) { c.MaxUpdateAttempts = 101 },
		"short timeout":     func(c *Config) { c.RequestTimeout = time.Millisecond },
		"zero bundles":      func(c *Config) { c.DefaultBundles = 0 },
	} {
		c := DefaultConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("Config with %s accepted", name)
		}
		if _, err := NewStore(nil, c); err == nil {
			t.Errorf("NewStore with %s accepted", name)
		}
	}
	for name, f := range map[string]func(*CacheConfig){
		"tiny RetryMin":     func(c *CacheConfig) { c.RetryMin = time.Millisecond },
		"RetryMax < Min":    func(c *CacheConfig) { c.RetryMax = c.RetryMin / 2 },
		"short ListTimeout": func(c *CacheConfig) { c.ListTimeout = time.Millisecond },
		"zero subscribers":  func(c *CacheConfig) { c.SubscriberLimit = 0 },
		"tiny probe":        func(c *CacheConfig) { c.ProbeInterval = time.Millisecond },
		"no clock":          func(c *CacheConfig) { c.Clock = nil },
	} {
		c := DefaultCacheConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("CacheConfig with %s accepted", name)
		}
	}
	for name, f := range map[string]func(*BrokerDefaults){
		"negative TTL":     func(d *BrokerDefaults) { d.MessageTTLInSeconds = -1 },
		"retention -1/0":   func(d *BrokerDefaults) { d.RetentionTimeInMinutes = -1 },
		"zero partitions":  func(d *BrokerDefaults) { d.DefaultNumPartitions = 0 },
		"bad type":         func(d *BrokerDefaults) { d.AutoTopicCreationType = "" },
		"bad quota policy": func(d *BrokerDefaults) { d.BacklogQuotaPolicy = "x" },
		"undefined schema": func(d *BrokerDefaults) { d.SchemaCompatibilityStrategy = SchemaUndefined },
		"quota below -1":   func(d *BrokerDefaults) { d.BacklogQuotaLimitBytes = -2 },
	} {
		d := DefaultBrokerDefaults()
		f(&d)
		if d.Validate() == nil {
			t.Errorf("BrokerDefaults with %s accepted", name)
		}
	}
}

// TestExtra checks that stored policies must be well-formed JSON under a
// name, and that a clone shares no bytes with the original.
func TestExtra(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra Extra
		ok    bool
	}{
		{"none", nil, true},
		{"number and object", Extra{"max_producers_per_topic": json.RawMessage(`3`), "persistence": json.RawMessage(`{"a":1}`)}, true},
		{"empty name", Extra{"": json.RawMessage(`1`)}, false},
		{"not JSON", Extra{"x": json.RawMessage(`{`)}, false},
		{"empty value", Extra{"x": json.RawMessage(``)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policies{Extra: tc.extra}
			p.normalize()
			err := p.validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidPolicies)) {
				t.Fatalf("namespace: %v, want ok=%v", err, tc.ok)
			}
			if err := (TopicPolicies{Extra: tc.extra}).validate(); (err == nil) != tc.ok {
				t.Fatalf("topic: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	orig := Extra{"k": json.RawMessage(`12`)}
	c := orig.Clone()
	c["k"][0] = '9'
	if string(orig["k"]) != "12" {
		t.Fatalf("a clone's change reached the original: %s", orig["k"])
	}
}

func TestServiceHosts(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		scheme string
		hosts  []string
	}{
		{"pulsar://a:6650", "pulsar", []string{"a:6650"}},
		{"pulsar://a:6650,b:6651/", "pulsar", []string{"a:6650", "b:6651"}},
		{"http://a:8080,b:8080", "http", []string{"a:8080", "b:8080"}},
		{"a:6650", "", nil},
		{"pulsar://", "", nil},
		{"pulsar://a:6650,,b:6650", "", nil},
		{"pulsar://a:6650/path", "", nil},
	} {
		scheme, hosts, ok := ServiceHosts(tc.raw)
		if ok != (tc.hosts != nil) || scheme != tc.scheme || !slices.Equal(hosts, tc.hosts) {
			t.Errorf("ServiceHosts(%q) = %q, %q, %v; want %q, %q", tc.raw, scheme, hosts, ok, tc.scheme, tc.hosts)
		}
	}
	for i, want := range []string{"pulsar://a:1", "pulsar://b:2", "pulsar://a:1"} {
		if got := OneHost("pulsar://a:1,b:2", uint64(i)); got != want {
			t.Errorf("OneHost(..., %d) = %q, want %q", i, got, want)
		}
	}
	if got := OneHost("", 3); got != "" {
		t.Errorf("OneHost of no URL = %q", got)
	}
}
