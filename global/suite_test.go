package global

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/meridian-mq/meridian/topology"
)

// env is one suite test's world: two independent clients (a and b) of the
// same metadata store, and a global Store over each, under one prefix.
type env struct {
	ma, mb meta.Store
	a, b   *Store
	prefix string
}

// harness gives the suite two clients of one store.
type harness func(t *testing.T) (a, b meta.Store)

func runSuite(t *testing.T, h harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, e env)
	}{
		{"ClusterCRUD", testClusterCRUD},
		{"TenantRules", testTenantRules},
		{"NamespaceRules", testNamespaceRules},
		{"TopicRecords", testTopicRecords},
		{"UpdateReappliesIntent", testUpdateReappliesIntent},
		{"ConcurrentUpdatesMerge", testConcurrentUpdatesMerge},
		{"CacheConvergesAcrossClients", testCacheConverges},
		{"CacheSubscription", testCacheSubscription},
		{"CacheRelistsAfterCompaction", testCacheRelists},
		{"CacheServesWhenStoreClosed", testCacheServesClosed},
		{"Bootstrap", testBootstrap},
		{"NewerRecordVersion", testNewerRecordVersion},
		{"RegionNumbers", testRegionNumbers},
		{"FailoverSwitch", testFailoverSwitch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ma, mb := h(t)
			prefix := metatest.Prefix(t)
			tc.run(t, env{ma: ma, mb: mb, a: newStore(t, ma, prefix), b: newStore(t, mb, prefix), prefix: prefix})
		})
	}
}

func TestMemorySuite(t *testing.T) {
	runSuite(t, func(t *testing.T) (meta.Store, meta.Store) {
		m := metatest.Memory(t)
		return m, m
	})
}

func TestEtcdSuite(t *testing.T) {
	e := metatest.Shared(t)
	runSuite(t, func(t *testing.T) (meta.Store, meta.Store) {
		return metatest.Dial(t, e.Endpoints()), metatest.Dial(t, e.Endpoints())
	})
}

var (
	east = ClusterData{ServiceURL: "http://east:8080", BrokerServiceURL: "pulsar://east:6650"}
	west = ClusterData{ServiceURL: "http://west:8080", BrokerServiceURL: "pulsar://west:6650,west2:6650",
		ServiceURLTLS: "https://west:8443", BrokerServiceURLTLS: "pulsar+ssl://west:6651",
		AuthenticationPlugin: "org.apache.pulsar.client.impl.auth.AuthenticationToken", AuthenticationParameters: "token:abc",
		BrokerClientTLSEnabled: true, BrokerClientTrustCertsFilePath: "/etc/pulsar/ca.pem"}
)

func topic(t *testing.T, name string) topology.TopicName {
	t.Helper()
	return must(topology.ParseTopicName(name)).ok(t)
}

func ptr[T any](v T) *T { return &v }

// snapshot is every key and value under the env's prefix, to show that a
// refused write changed nothing.
func snapshot(t *testing.T, e env) map[string]string {
	t.Helper()
	kvs, _, err := e.ma.List(ctxT(t), e.prefix+"/")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.Key] = fmt.Sprintf("%d %s", kv.ModRevision, kv.Value)
	}
	return out
}

func unchanged(t *testing.T, e env, before map[string]string, what string) {
	t.Helper()
	if after := snapshot(t, e); !reflect.DeepEqual(before, after) {
		t.Fatalf("%s changed the store:\nbefore %v\nafter  %v", what, before, after)
	}
}

func testClusterCRUD(t *testing.T, e env) {
	ctx := ctxT(t)
	must(e.a.CreateCluster(ctx, "us-east", east)).ok(t)
	_, err := e.b.CreateCluster(ctx, "us-east", west)
	wantErr(t, "create twice", err, ErrExists)
	before := snapshot(t, e)
	_, err = e.a.CreateCluster(ctx, "bad/name", east)
	wantErr(t, "bad name", err, ErrInvalidName)
	_, err = e.a.CreateCluster(ctx, "eu", ClusterData{})
	wantErr(t, "no URL", err, ErrInvalidCluster)
	_, err = e.a.CreateCluster(ctx, "eu", ClusterData{BrokerServiceURL: "http://eu:6650"})
	wantErr(t, "wrong scheme", err, ErrInvalidCluster)
	_, err = e.a.CreateCluster(ctx, "eu", ClusterData{BrokerServiceURL: "pulsar://eu:6650", AuthenticationParameters: "token:abc"})
	wantErr(t, "auth parameters without a plugin", err, ErrInvalidCluster)
	_, err = e.a.CreateCluster(ctx, "eu", ClusterData{BrokerServiceURL: "pulsar://eu:6650", BrokerClientTLSEnabled: true})
	wantErr(t, "replicator TLS without a TLS URL", err, ErrInvalidCluster)
	unchanged(t, e, before, "refused cluster creates")

	must(e.b.CreateCluster(ctx, "eu-west", west)).ok(t)
	if got := must(e.b.Cluster(ctx, "us-east")).ok(t); got != east {
		t.Fatalf("Cluster = %+v, want %+v", got, east)
	}
	if got := must(e.a.Clusters(ctx)).ok(t); !slices.Equal(got, []string{"eu-west", "us-east"}) {
		t.Fatalf("Clusters = %v", got)
	}
	got, _, err := e.a.UpdateCluster(ctx, "us-east", func(d *ClusterData) error {
		d.ServiceURLTLS = "https://east:8443"
		return nil
	})
	if err != nil || got.ServiceURLTLS != "https://east:8443" {
		t.Fatalf("UpdateCluster = %+v, %v", got, err)
	}
	before = snapshot(t, e)
	_, _, err = e.a.UpdateCluster(ctx, "us-east", func(d *ClusterData) error { d.ServiceURL = "ftp://x"; return nil })
	wantErr(t, "invalid update", err, ErrInvalidCluster)
	_, _, err = e.a.UpdateCluster(ctx, "nowhere", func(*ClusterData) error { return nil })
	wantErr(t, "update missing", err, ErrNotFound)
	unchanged(t, e, before, "refused cluster updates")

	must(e.a.DeleteCluster(ctx, "us-east")).ok(t)
	_, err = e.b.Cluster(ctx, "us-east")
	wantErr(t, "get deleted", err, ErrNotFound)
	_, err = e.b.DeleteCluster(ctx, "us-east")
	wantErr(t, "delete twice", err, ErrNotFound)
}

func testTenantRules(t *testing.T, e env) {
	ctx := ctxT(t)
	must(e.a.CreateCluster(ctx, "c1", east)).ok(t)
	must(e.a.CreateCluster(ctx, "c2", west)).ok(t)

	before := snapshot(t, e)
	_, err := e.a.CreateTenant(ctx, "acme", TenantInfo{AllowedClusters: []string{"c1", "nope"}})
	wantErr(t, "unknown allowed cluster", err, ErrInvalidTenant, ErrNotFound)
	_, err = e.a.CreateTenant(ctx, "acme", TenantInfo{AdminRoles: []string{""}, AllowedClusters: []string{"c1"}})
	wantErr(t, "empty role", err, ErrInvalidTenant)
	_, err = e.a.CreateTenant(ctx, "a cme", TenantInfo{})
	wantErr(t, "bad tenant name", err, ErrInvalidName)
	unchanged(t, e, before, "refused tenant creates")

	must(e.a.CreateTenant(ctx, "acme", TenantInfo{AdminRoles: []string{"ops", "admin", "ops"}, AllowedClusters: []string{"c1"}})).ok(t)
	ti := must(e.b.Tenant(ctx, "acme")).ok(t)
	if !slices.Equal(ti.AdminRoles, []string{"admin", "ops"}) || !slices.Equal(ti.AllowedClusters, []string{"c1"}) {
		t.Fatalf("Tenant = %+v (roles are a sorted set)", ti)
	}
	_, err = e.a.CreateTenant(ctx, "acme", TenantInfo{})
	wantErr(t, "create twice", err, ErrExists)

	before = snapshot(t, e)
	_, _, err = e.a.UpdateTenant(ctx, "acme", func(t *TenantInfo) error {
		t.AllowedClusters = append(t.AllowedClusters, "nope")
		return nil
	})
	wantErr(t, "allow an unknown cluster", err, ErrInvalidTenant)
	_, err = e.a.DeleteCluster(ctx, "c1")
	wantErr(t, "delete a cluster a tenant allows", err, ErrClusterInUse)
	unchanged(t, e, before, "refused tenant update and cluster delete")

	must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{ReplicationClusters: []string{"c1"}})).ok(t)
	before = snapshot(t, e)
	_, _, err = e.b.UpdateTenant(ctx, "acme", func(t *TenantInfo) error {
		t.AllowedClusters = []string{"c2"}
		return nil
	})
	wantErr(t, "stop allowing a cluster a namespace uses", err, ErrClusterInUse)
	_, err = e.b.DeleteTenant(ctx, "acme")
	wantErr(t, "delete a tenant with namespaces", err, ErrTenantNotEmpty)
	unchanged(t, e, before, "refused tenant update and delete")

	// Allowing c2 as well is fine, and so is then moving the namespace.
	must3(t)(e.b.UpdateTenant(ctx, "acme", func(t *TenantInfo) error {
		t.AllowedClusters = append(t.AllowedClusters, "c2")
		return nil
	}))
	must3(t)(e.a.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error {
		p.ReplicationClusters = []string{"c2"}
		return nil
	}))
	must3(t)(e.b.UpdateTenant(ctx, "acme", func(t *TenantInfo) error {
		t.AllowedClusters = []string{"c2"}
		return nil
	}))
	must(e.a.DeleteCluster(ctx, "c1")).ok(t)
	must(e.a.DeleteNamespace(ctx, "acme", "ns")).ok(t)
	must(e.a.DeleteTenant(ctx, "acme")).ok(t)
	if got := must(e.b.Tenants(ctx)).ok(t); len(got) != 0 {
		t.Fatalf("Tenants after delete = %v", got)
	}
	must(e.a.DeleteCluster(ctx, "c2")).ok(t)
}

// must3 checks the error of a (value, Receipt, error) call.
func must3(t *testing.T) func(any, Receipt, error) Receipt {
	return func(_ any, r Receipt, err error) Receipt {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func setupTenant(t *testing.T, e env, tenant string, clusters ...string) {
	t.Helper()
	ctx := ctxT(t)
	for _, c := range clusters {
		if _, err := e.a.CreateCluster(ctx, c, east); err != nil && !errors.Is(err, ErrExists) {
			t.Fatal(err)
		}
	}
	must(e.a.CreateTenant(ctx, tenant, TenantInfo{AllowedClusters: clusters})).ok(t)
}

func testNamespaceRules(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1", "c2")
	must(e.a.CreateCluster(ctx, "c3", west)).ok(t) // exists, but acme does not allow it

	before := snapshot(t, e)
	for _, tc := range []struct {
		what   string
		tenant string
		p      Policies
		want   error
	}{
		{"missing tenant", "nobody", Policies{}, ErrNotFound},
		{"cluster not allowed", "acme", Policies{ReplicationClusters: []string{"c1", "c3"}}, ErrNotAllowedCluster},
		{"negative TTL", "acme", Policies{MessageTTLInSeconds: ptr(-1)}, ErrInvalidPolicies},
		{"retention -1 with 0", "acme", Policies{RetentionPolicies: &RetentionPolicies{-1, 0}}, ErrInvalidPolicies},
		{"backlog quota type", "acme", Policies{BacklogQuotaMap: map[BacklogQuotaType]BacklogQuota{"disk": {Policy: ProducerException}}}, ErrInvalidPolicies},
		{"backlog quota policy", "acme", Policies{BacklogQuotaMap: map[BacklogQuotaType]BacklogQuota{DestinationStorage: {Policy: "drop"}}}, ErrInvalidPolicies},
		{"auth action", "acme", Policies{AuthPolicies: AuthPolicies{NamespaceAuth: map[string][]AuthAction{"r": {"write"}}}}, ErrInvalidPolicies},
		{"auto creation", "acme", Policies{AutoTopicCreationOverride: &AutoTopicCreation{Allow: true, Type: Partitioned}}, ErrInvalidPolicies},
		{"schema strategy", "acme", Policies{SchemaCompatibilityStrategy: "SOMETIMES"}, ErrInvalidPolicies},
		{"bundles", "acme", Policies{Bundles: &BundlesData{NumBundles: 2, Boundaries: []string{"0x00000000", "0xffffffff"}}}, ErrInvalidPolicies},
		{"active region outside replication", "acme", Policies{ReplicationClusters: []string{"c1"}, ActiveRegion: "c2"}, ErrNotAllowedCluster},
	} {
		_, err := e.a.CreateNamespace(ctx, tc.tenant, "ns", tc.p)
		wantErr(t, tc.what, err, tc.want)
	}
	unchanged(t, e, before, "refused namespace creates")

	must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{ReplicationClusters: []string{"c2", "c1"}, ActiveRegion: "c1"})).ok(t)
	p := must(e.b.Namespace(ctx, "acme", "ns")).ok(t)
	want4 := must(EvenBundlesData(4)).ok(t)
	if p.Bundles == nil || !reflect.DeepEqual(*p.Bundles, want4) {
		t.Fatalf("default bundles = %+v, want %+v", p.Bundles, want4)
	}
	if !slices.Equal(p.ReplicationClusters, []string{"c1", "c2"}) || p.SchemaCompatibilityStrategy != SchemaUndefined || p.ActiveRegion != "c1" {
		t.Fatalf("Namespace = %+v", p)
	}
	_, err := e.b.CreateNamespace(ctx, "acme", "ns", Policies{})
	wantErr(t, "create twice", err, ErrExists)
	must(e.b.CreateNamespace(ctx, "acme", "ns2", Policies{Bundles: &BundlesData{NumBundles: 1, Boundaries: []string{"0x00000000", "0xffffffff"}}})).ok(t)
	if got := must(e.a.Namespaces(ctx, "acme")).ok(t); !slices.Equal(got, []string{"ns", "ns2"}) {
		t.Fatalf("Namespaces = %v", got)
	}

	before = snapshot(t, e)
	_, _, err = e.a.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error { p.MessageTTLInSeconds = ptr(-5); return nil })
	wantErr(t, "negative TTL update", err, ErrInvalidPolicies)
	_, _, err = e.a.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error { p.ReplicationClusters = []string{"c3"}; return nil })
	wantErr(t, "replicate to a cluster not allowed", err, ErrNotAllowedCluster)
	_, _, err = e.a.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error { p.Bundles = nil; return nil })
	wantErr(t, "remove bundles", err, ErrInvalidPolicies)
	mutateErr := errors.New("caller refuses")
	_, _, err = e.a.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error { p.MessageTTLInSeconds = ptr(1); return mutateErr })
	wantErr(t, "mutate error", err, mutateErr)
	_, err = e.a.DeleteCluster(ctx, "c2")
	wantErr(t, "delete a replicated cluster", err, ErrClusterInUse)
	unchanged(t, e, before, "refused namespace updates")

	got, _, err := e.b.UpdateNamespace(ctx, "acme", "ns", func(p *Policies) error {
		p.MessageTTLInSeconds = ptr(60)
		p.DeduplicationEnabled = ptr(true)
		p.AuthPolicies.NamespaceAuth["app"] = []AuthAction{ActionProduce, ActionConsume}
		return nil
	})
	if err != nil || *got.MessageTTLInSeconds != 60 || !slices.Equal(got.AuthPolicies.NamespaceAuth["app"], []AuthAction{ActionConsume, ActionProduce}) {
		t.Fatalf("UpdateNamespace = %+v, %v", got, err)
	}

	must(e.a.CreateTopic(ctx, topic(t, "persistent://acme/ns/t"), TopicPolicies{Partitions: 3})).ok(t)
	_, err = e.a.DeleteNamespace(ctx, "acme", "ns")
	wantErr(t, "delete a namespace with topics", err, ErrNamespaceNotEmpty)
	must(e.a.DeleteTopic(ctx, topic(t, "persistent://acme/ns/t"))).ok(t)
	must(e.a.DeleteNamespace(ctx, "acme", "ns")).ok(t)
	_, err = e.a.Namespace(ctx, "acme", "ns")
	wantErr(t, "get deleted", err, ErrNotFound)
}

func testTopicRecords(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1", "c2")
	must(e.a.CreateCluster(ctx, "c3", west)).ok(t)
	must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{ReplicationClusters: []string{"c1", "c2"}})).ok(t)

	before := snapshot(t, e)
	for _, tc := range []struct {
		what  string
		topic string
		p     TopicPolicies
		want  error
	}{
		{"missing namespace", "persistent://acme/none/t", TopicPolicies{}, ErrNotFound},
		{"negative partitions", "persistent://acme/ns/t", TopicPolicies{Partitions: -1}, ErrInvalidPolicies},
		{"cluster not allowed", "persistent://acme/ns/t", TopicPolicies{ReplicationClusters: []string{"c3"}}, ErrNotAllowedCluster},
		{"V1 name", "persistent://acme/c1/ns/t", TopicPolicies{}, ErrInvalidName},
	} {
		_, err := e.a.CreateTopic(ctx, topic(t, tc.topic), tc.p)
		wantErr(t, tc.what, err, tc.want)
	}
	unchanged(t, e, before, "refused topic creates")

	// A partition's record is its partitioned topic's.
	must(e.a.CreateTopic(ctx, topic(t, "persistent://acme/ns/orders-partition-2"), TopicPolicies{Partitions: 4})).ok(t)
	if got := must(e.b.Topic(ctx, topic(t, "persistent://acme/ns/orders"))).ok(t); got.Partitions != 4 {
		t.Fatalf("Topic = %+v", got)
	}
	// Domains and odd names stay apart.
	must(e.a.CreateTopic(ctx, topic(t, "non-persistent://acme/ns/orders"), TopicPolicies{MessageTTLInSeconds: ptr(5)})).ok(t)
	must(e.a.CreateTopic(ctx, topic(t, "persistent://acme/ns/we%ird name?"), TopicPolicies{})).ok(t)
	must(e.a.CreateTopic(ctx, topic(t, "persistent://acme/ns/orders2"), TopicPolicies{ReplicationClusters: []string{}})).ok(t)
	var names []string
	for _, tn := range must(e.b.Topics(ctx, "acme", "ns")).ok(t) {
		names = append(names, tn.String())
	}
	want := []string{"non-persistent://acme/ns/orders", "persistent://acme/ns/orders", "persistent://acme/ns/orders2", "persistent://acme/ns/we%ird name?"}
	if !slices.Equal(names, want) {
		t.Fatalf("Topics = %q, want %q", names, want)
	}
	if got := must(e.b.Topic(ctx, topic(t, "persistent://acme/ns/orders2"))).ok(t); got.ReplicationClusters == nil {
		t.Fatal("an empty replication override must survive as empty, not as 'no override'")
	}

	before = snapshot(t, e)
	_, _, err := e.a.UpdateTopic(ctx, topic(t, "persistent://acme/ns/orders"), func(p *TopicPolicies) error { p.Partitions = 2; return nil })
	wantErr(t, "shrink partitions", err, ErrInvalidPolicies)
	unchanged(t, e, before, "refused partition shrink")
	got, _, err := e.b.UpdateTopic(ctx, topic(t, "persistent://acme/ns/orders"), func(p *TopicPolicies) error {
		p.Partitions = 8
		p.ReplicationClusters = []string{"c1"}
		return nil
	})
	if err != nil || got.Partitions != 8 {
		t.Fatalf("UpdateTopic = %+v, %v", got, err)
	}
	_, _, err = e.a.UpdateTenant(ctx, "acme", func(t *TenantInfo) error { t.AllowedClusters = []string{"c2"}; return nil })
	wantErr(t, "stop allowing a cluster a topic uses", err, ErrClusterInUse)
	must(e.a.DeleteTopic(ctx, topic(t, "persistent://acme/ns/orders"))).ok(t)
	_, err = e.a.Topic(ctx, topic(t, "persistent://acme/ns/orders"))
	wantErr(t, "get deleted", err, ErrNotFound)
	if got := must(e.a.Topic(ctx, topic(t, "non-persistent://acme/ns/orders"))).ok(t); *got.MessageTTLInSeconds != 5 {
		t.Fatalf("the non-persistent twin = %+v", got)
	}
}

// An update that loses its CAS re-applies the caller's intent to the
// winner's record: both changes survive. With one attempt allowed it fails
// with ErrConflict and the winner's change stands alone.
func testUpdateReappliesIntent(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	calls := 0
	got, _, err := e.a.UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
		calls++
		if calls == 1 { // another admin wins the race in between
			must3(t)(e.b.UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
				ti.AdminRoles = append(ti.AdminRoles, "bob")
				return nil
			}))
		}
		ti.AdminRoles = append(ti.AdminRoles, "alice")
		return nil
	})
	if err != nil || calls != 2 || !slices.Equal(got.AdminRoles, []string{"alice", "bob"}) {
		t.Fatalf("UpdateTenant = %+v, %v after %d calls; want alice and bob after 2", got, err, calls)
	}

	cfg := e.a.cfg
	cfg.MaxUpdateAttempts = 1
	once := must(NewStore(e.ma, cfg)).ok(t)
	_, _, err = once.UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
		must3(t)(e.b.UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
			ti.AdminRoles = append(ti.AdminRoles, "carol")
			return nil
		}))
		ti.AdminRoles = append(ti.AdminRoles, "dave")
		return nil
	})
	wantErr(t, "one attempt, lost race", err, ErrConflict)
	if got := must(e.a.Tenant(ctx, "acme")).ok(t); !slices.Equal(got.AdminRoles, []string{"alice", "bob", "carol"}) {
		t.Fatalf("after the lost race roles = %v", got.AdminRoles)
	}
}

// Many admins adding one role each, through two clients at once: none is
// lost.
func testConcurrentUpdatesMerge(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	cfg := e.a.cfg
	cfg.MaxUpdateAttempts = 100
	stores := []*Store{must(NewStore(e.ma, cfg)).ok(t), must(NewStore(e.mb, cfg)).ok(t)}
	const n = 8
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range n {
		wg.Go(func() {
			_, _, err := stores[i%2].UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
				ti.AdminRoles = append(ti.AdminRoles, fmt.Sprintf("role-%d", i))
				return nil
			})
			if err != nil {
				t.Error(err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := must(e.b.Tenant(ctx, "acme")).ok(t); len(got.AdminRoles) != n {
		t.Fatalf("roles = %v, want %d", got.AdminRoles, n)
	}
}

func testCacheConverges(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1", "c2")
	c := startCache(t, e.b) // reads through client b; writes go through a
	r := must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{ReplicationClusters: []string{"c1", "c2"}, MessageTTLInSeconds: ptr(30)})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Namespace("acme", "ns"); !ok || *p.MessageTTLInSeconds != 30 {
		t.Fatalf("cache Namespace = %+v, %v", p, ok)
	}
	if got := c.Clusters(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("cache Clusters = %v", got)
	}
	if got := c.Tenants(); !slices.Equal(got, []string{"acme"}) {
		t.Fatalf("cache Tenants = %v", got)
	}
	if d, ok := c.Cluster("c1"); !ok || d != east {
		t.Fatalf("cache Cluster = %+v, %v", d, ok)
	}
	// A copy: changing it does not change the cache.
	p, _ := c.Namespace("acme", "ns")
	p.ReplicationClusters[0] = "zzz"
	if p, _ := c.Namespace("acme", "ns"); p.ReplicationClusters[0] != "c1" {
		t.Fatal("a caller's change leaked into the cache")
	}

	tn := topic(t, "persistent://acme/ns/orders-partition-1")
	r = must(e.a.CreateTopic(ctx, tn, TopicPolicies{Partitions: 2, MessageTTLInSeconds: ptr(10), ReplicationClusters: []string{"c2"}})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	eff := must(c.Resolve(tn, DefaultBrokerDefaults())).ok(t)
	if eff.MessageTTLInSeconds != 10 || eff.Partitions != 2 || !slices.Equal(eff.ReplicationClusters, []string{"c2"}) || len(eff.Bundles) != 4 {
		t.Fatalf("Resolve = %+v", eff)
	}
	if got := c.Topics("acme", "ns"); !slices.Equal(got, []string{"persistent://acme/ns/orders"}) {
		t.Fatalf("cache Topics = %v", got)
	}
	_, err := c.Resolve(topic(t, "persistent://acme/none/x"), DefaultBrokerDefaults())
	wantErr(t, "resolve in a missing namespace", err, ErrNotFound)

	// Deletes are awaited by the version they removed.
	r = must(e.a.DeleteTopic(ctx, tn)).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Topic(tn); ok {
		t.Fatal("deleted topic still in the cache after Await")
	}
	eff = must(c.Resolve(tn, DefaultBrokerDefaults())).ok(t)
	if eff.MessageTTLInSeconds != 30 || !slices.Equal(eff.ReplicationClusters, []string{"c1", "c2"}) {
		t.Fatalf("Resolve without the topic record = %+v", eff)
	}
	if err := c.AwaitRevision(ctx, c.Revision()); err != nil {
		t.Fatal(err)
	}
	if c.Err() != nil {
		t.Fatalf("healthy cache Err = %v", c.Err())
	}
	select {
	case <-c.Ready():
	default:
		t.Fatal("a cache that answered is not Ready")
	}
}

func nextBatch(t *testing.T, s *Subscription) Batch {
	t.Helper()
	b, err := s.Next(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testCacheSubscription(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	c := startCache(t, e.b, func(cfg *CacheConfig) { cfg.SubscriberLimit = 3 })
	sub := c.Subscribe()
	defer sub.Close()
	if b := nextBatch(t, sub); !b.Resync {
		t.Fatalf("first batch %+v, want Resync (read the initial state)", b)
	}

	// Three updates of one record coalesce into one change.
	var r Receipt
	for i := range 3 {
		r = must3(t)(e.a.UpdateTenant(ctx, "acme", func(ti *TenantInfo) error {
			ti.AdminRoles = append(ti.AdminRoles, fmt.Sprint("r", i))
			return nil
		}))
	}
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	b := nextBatch(t, sub)
	want := []Change{{Kind: KindTenant, Name: "acme", Revision: r.Revision}}
	if b.Resync || !reflect.DeepEqual(b.Changes, want) {
		t.Fatalf("batch %+v, want %+v", b, want)
	}

	// Past SubscriberLimit distinct records, the subscriber is told to
	// resync instead of the cache holding everything for it.
	for i := range 4 {
		r = must(e.a.CreateNamespace(ctx, "acme", fmt.Sprint("ns", i), Policies{})).ok(t)
	}
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if b := nextBatch(t, sub); !b.Resync || len(b.Changes) != 0 || b.Revision != r.Revision {
		t.Fatalf("batch after overflow %+v, want Resync at %d", b, r.Revision)
	}

	r = must(e.a.DeleteNamespace(ctx, "acme", "ns0")).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if b := nextBatch(t, sub); len(b.Changes) != 1 || !b.Changes[0].Deleted || b.Changes[0].Name != "acme/ns0" || b.Changes[0].Kind != KindNamespace {
		t.Fatalf("batch after delete %+v", b)
	}

	// Nothing pending: Next waits, for ctx.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sub.Next(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with nothing pending = %v", err)
	}
	c.Close()
	if _, err := sub.Next(ctx); !errors.Is(err, ErrCacheClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
	if err := c.AwaitRevision(ctx, r.Revision+1000); !errors.Is(err, ErrCacheClosed) {
		t.Fatalf("AwaitRevision after Close = %v", err)
	}
}

// faultStore is a real store whose watches can be ended with ErrCompacted
// on demand, and which counts Lists.
type faultStore struct {
	meta.Store
	lists atomic.Int64
	// watches counts Watch calls, each counted after it took its kill
	// channel.
	watches atomic.Int64
	mu      sync.Mutex
	kill    chan struct{}
}

func (f *faultStore) List(ctx context.Context, prefix string) ([]meta.KV, int64, error) {
	f.lists.Add(1)
	return f.Store.List(ctx, prefix)
}

func (f *faultStore) killWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.kill)
	f.kill = make(chan struct{})
}

func (f *faultStore) Watch(ctx context.Context, prefix string, from int64) <-chan meta.WatchResponse {
	f.mu.Lock()
	kill := f.kill
	f.mu.Unlock()
	f.watches.Add(1)
	in := f.Store.Watch(ctx, prefix, from)
	out := make(chan meta.WatchResponse)
	go func() {
		defer close(out)
		for {
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
			case <-kill:
				select {
				case out <- meta.WatchResponse{Err: fmt.Errorf("%w: injected", meta.ErrCompacted)}:
				case <-ctx.Done():
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func testCacheRelists(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	fs := &faultStore{Store: e.mb, kill: make(chan struct{})}
	c := startCache(t, newStore(t, fs, e.prefix))
	sub := c.Subscribe()
	defer sub.Close()
	<-c.Ready()
	if n := fs.lists.Load(); n != 1 {
		t.Fatalf("%d Lists before any fault, want 1", n)
	}
	nextBatch(t, sub) // the initial resync

	testkit.WaitFor(t, "the cache's watch", func() bool { return fs.watches.Load() == 1 })
	fs.killWatches()
	testkit.WaitFor(t, "a re-list after ErrCompacted", func() bool { return fs.lists.Load() >= 2 })
	if b := nextBatch(t, sub); !b.Resync {
		t.Fatalf("batch after a re-list %+v, want Resync", b)
	}
	r := must(e.a.CreateNamespace(ctx, "acme", "after", Policies{})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Namespace("acme", "after"); !ok {
		t.Fatal("the re-listed cache missed a later write")
	}
}

func testCacheServesClosed(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{ReplicationClusters: []string{"c1"}, MessageTTLInSeconds: ptr(7)})).ok(t)
	c := startCache(t, e.b)
	r := must(e.a.CreateTopic(ctx, topic(t, "acme/ns/t"), TopicPolicies{Partitions: 1})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := e.mb.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the cache noticing the closed store", func() bool { return c.Err() != nil })
	eff, err := c.Resolve(topic(t, "acme/ns/t"), DefaultBrokerDefaults())
	if err != nil || eff.MessageTTLInSeconds != 7 || eff.Partitions != 1 {
		t.Fatalf("Resolve from the cache of a closed store = %+v, %v", eff, err)
	}
	if _, ok := c.Tenant("acme"); !ok {
		t.Fatal("cache forgot the tenant")
	}
	_, err = e.b.CreateTenant(ctx, "other", TenantInfo{})
	wantErr(t, "write to a closed store", err, ErrUnavailable, meta.ErrClosed)
	_, _, err = e.b.UpdateNamespace(ctx, "acme", "ns", func(*Policies) error { return nil })
	wantErr(t, "update on a closed store", err, ErrUnavailable)
}

func testBootstrap(t *testing.T, e env) {
	ctx := ctxT(t)
	b := Bootstrap{Clusters: map[string]ClusterData{"standalone": east}}
	if err := e.a.Ensure(ctx, b); err != nil {
		t.Fatal(err)
	}
	first := snapshot(t, e)
	if err := e.b.Ensure(ctx, b); err != nil {
		t.Fatal(err)
	}
	unchanged(t, e, first, "a second Ensure")
	if p := must(e.a.Namespace(ctx, "public", "default")).ok(t); !slices.Equal(p.ReplicationClusters, []string{"standalone"}) || p.Bundles.NumBundles != 4 {
		t.Fatalf("public/default = %+v", p)
	}

	// An operator's edits survive; a new region is merged in.
	must3(t)(e.a.UpdateCluster(ctx, "standalone", func(d *ClusterData) error { d.ServiceURL = "http://edited:8080"; return nil }))
	must3(t)(e.a.UpdateNamespace(ctx, "public", "default", func(p *Policies) error { p.MessageTTLInSeconds = ptr(9); return nil }))
	b.Clusters["dc2"] = west
	var wg sync.WaitGroup
	for _, s := range []*Store{e.a, e.b} { // two processes bootstrapping at once
		wg.Go(func() {
			if err := s.Ensure(ctx, b); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if d := must(e.a.Cluster(ctx, "standalone")).ok(t); d.ServiceURL != "http://edited:8080" {
		t.Fatalf("Ensure rewrote an edited cluster: %+v", d)
	}
	if ti := must(e.a.Tenant(ctx, "public")).ok(t); !slices.Equal(ti.AllowedClusters, []string{"dc2", "standalone"}) {
		t.Fatalf("public = %+v", ti)
	}
	p := must(e.a.Namespace(ctx, "public", "default")).ok(t)
	if !slices.Equal(p.ReplicationClusters, []string{"dc2", "standalone"}) || *p.MessageTTLInSeconds != 9 {
		t.Fatalf("public/default = %+v", p)
	}
	if err := e.a.Ensure(ctx, Bootstrap{}); !errors.Is(err, ErrInvalidCluster) {
		t.Fatalf("Ensure with no cluster = %v", err)
	}
}

// A record written by a newer binary (v2) is not understood: the Store says
// ErrCorrupt instead of guessing, and the cache keeps serving the last value
// it understood rather than forgetting the namespace.
func testNewerRecordVersion(t *testing.T, e env) {
	ctx := ctxT(t)
	setupTenant(t, e, "acme", "c1")
	must(e.a.CreateNamespace(ctx, "acme", "ns", Policies{MessageTTLInSeconds: ptr(4)})).ok(t)
	c := startCache(t, e.b)
	<-c.Ready()
	sub := c.Subscribe()
	defer sub.Close()
	nextBatch(t, sub)

	key := e.prefix + meta.Key("namespaces", "acme", "ns")
	kv := must(e.ma.Get(ctx, key)).ok(t)
	rev := must(e.ma.Update(ctx, key, []byte(`{"v":2,"message_ttl_in_seconds":"soon"}`), kv.ModRevision)).ok(t)
	if err := c.AwaitRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Namespace("acme", "ns"); !ok || *p.MessageTTLInSeconds != 4 {
		t.Fatalf("cache after an unreadable update = %+v, %v", p, ok)
	}
	_, err := e.b.Namespace(ctx, "acme", "ns")
	wantErr(t, "read a v2 record", err, ErrCorrupt, meta.ErrValueVersion)
	_, _, err = e.b.UpdateNamespace(ctx, "acme", "ns", func(*Policies) error { return nil })
	wantErr(t, "update a v2 record", err, ErrCorrupt)
	// A later readable change is applied and announced as usual.
	r := must(e.a.CreateNamespace(ctx, "acme", "ns2", Policies{})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if b := nextBatch(t, sub); len(b.Changes) != 1 || b.Changes[0].Name != "acme/ns2" {
		t.Fatalf("batch = %+v, want only acme/ns2 (the unreadable change is not announced)", b)
	}
}
