package admin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/testkit"
)

// TestTenantsNamespacesClusters drives tenants, clusters and namespace
// policies through pulsaradmin.
func TestTenantsNamespacesClusters(t *testing.T) {
	id := uniq()
	tenant := "ns-test-" + id
	adm := newAdmin(t, web.URL)
	local := region.Service().Region()

	clusters, err := adm.Clusters().List()
	if err != nil || !slices.Contains(clusters, local) {
		t.Fatalf("clusters %v, %v", clusters, err)
	}
	cd, err := adm.Clusters().Get(local)
	if err != nil || cd.ServiceURL != webURL() || cd.BrokerServiceURL != region.ServiceURL() {
		t.Fatalf("cluster %+v, %v", cd, err)
	}
	other := utils.ClusterData{Name: "ns-test-other-" + id, ServiceURL: "http://other:8080", BrokerServiceURL: "pulsar://other:6650"}
	if err := adm.Clusters().Create(other); err != nil {
		t.Fatal(err)
	}
	other.ServiceURL = "http://other2:8080"
	if err := adm.Clusters().Update(other); err != nil {
		t.Fatal(err)
	}
	if got, _ := adm.Clusters().Get(other.Name); got.ServiceURL != "http://other2:8080" {
		t.Fatalf("updated cluster %+v", got)
	}

	if err := adm.Tenants().Create(utils.TenantData{Name: tenant, AdminRoles: []string{"alice"},
		AllowedClusters: []string{local}}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Tenants().Update(utils.TenantData{Name: tenant, AdminRoles: []string{"alice", "bob"},
		AllowedClusters: []string{local, other.Name}}); err != nil {
		t.Fatal(err)
	}
	td, err := adm.Tenants().Get(tenant)
	if err != nil || !slices.Equal(td.AdminRoles, []string{"alice", "bob"}) || len(td.AllowedClusters) != 2 {
		t.Fatalf("tenant %+v, %v", td, err)
	}
	tenants, _ := adm.Tenants().List()
	if !slices.Contains(tenants, tenant) {
		t.Fatalf("tenants %v", tenants)
	}

	ns := tenant + "/a"
	if err := adm.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().CreateNsWithNumBundles(tenant+"/b", 8); err != nil {
		t.Fatal(err)
	}
	list, err := adm.Namespaces().GetNamespaces(tenant)
	if err != nil || !slices.Equal(list, []string{tenant + "/a", tenant + "/b"}) {
		t.Fatalf("namespaces %v, %v", list, err)
	}
	pol, err := adm.Namespaces().GetPolicies(tenant + "/b")
	if err != nil || pol.Bundles == nil || pol.Bundles.NumBundles != 8 || !slices.Equal(pol.ReplicationClusters, []string{local}) {
		t.Fatalf("policies %+v, %v", pol, err)
	}

	// Replication clusters.
	if err := adm.Namespaces().SetNamespaceReplicationClusters(ns, []string{local, other.Name}); err != nil {
		t.Fatal(err)
	}
	rc, err := adm.Namespaces().GetNamespaceReplicationClusters(ns)
	if err != nil || !slices.Equal(rc, []string{other.Name, local}) {
		t.Fatalf("replication %v, %v", rc, err)
	}
	// A cluster in use cannot leave the tenant's allowed clusters.
	if err := adm.Tenants().Update(utils.TenantData{Name: tenant, AllowedClusters: []string{local}}); err == nil {
		t.Fatal("removing a cluster in use from the tenant succeeded")
	}

	// Retention, TTL, dedup, backlog quota, auto topic creation, schema
	// strategy, permissions.
	if err := adm.Namespaces().SetRetention(ns, utils.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 100}); err != nil {
		t.Fatal(err)
	}
	if r, err := adm.Namespaces().GetRetention(ns); err != nil || r == nil || r.RetentionTimeInMinutes != 60 || r.RetentionSizeInMB != 100 {
		t.Fatalf("retention %+v, %v", r, err)
	}
	if err := adm.Namespaces().SetNamespaceMessageTTL(ns, 300); err != nil {
		t.Fatal(err)
	}
	if ttl, err := adm.Namespaces().GetNamespaceMessageTTL(ns); err != nil || ttl != 300 {
		t.Fatalf("ttl %d, %v", ttl, err)
	}
	if err := adm.Namespaces().SetDeduplicationStatus(ns, true); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().SetBacklogQuota(ns, utils.NewBacklogQuota(1<<20, -1, utils.ProducerException),
		utils.DestinationStorage); err != nil {
		t.Fatal(err)
	}
	bq, err := adm.Namespaces().GetBacklogQuotaMap(ns)
	if err != nil || bq[utils.DestinationStorage].LimitSize != 1<<20 || bq[utils.DestinationStorage].Policy != utils.ProducerException {
		t.Fatalf("backlog quotas %+v, %v", bq, err)
	}
	nsName, _ := utils.GetNamespaceName(ns)
	two := 2
	if err := adm.Namespaces().SetTopicAutoCreation(*nsName, utils.TopicAutoCreationConfig{Allow: true,
		Type: utils.Partitioned, Partitions: &two}); err != nil {
		t.Fatal(err)
	}
	if ac, err := adm.Namespaces().GetTopicAutoCreation(*nsName); err != nil || ac == nil || !ac.Allow || ac.Partitions == nil || *ac.Partitions != 2 {
		t.Fatalf("auto topic creation %+v, %v", ac, err)
	}
	if err := adm.Namespaces().SetSchemaCompatibilityStrategy(*nsName, utils.SchemaCompatibilityStrategyBackward); err != nil {
		t.Fatal(err)
	}
	if s, err := adm.Namespaces().GetSchemaCompatibilityStrategy(*nsName); err != nil || s != utils.SchemaCompatibilityStrategyBackward {
		t.Fatalf("schema strategy %q, %v", s, err)
	}
	if err := adm.Namespaces().GrantNamespacePermission(*nsName, "carol", []utils.AuthAction{"produce", "consume"}); err != nil {
		t.Fatal(err)
	}
	perms, err := adm.Namespaces().GetNamespacePermissions(*nsName)
	if err != nil || len(perms["carol"]) != 2 {
		t.Fatalf("permissions %v, %v", perms, err)
	}
	if err := adm.Namespaces().RevokeNamespacePermission(*nsName, "carol"); err != nil {
		t.Fatal(err)
	}
	pol, err = adm.Namespaces().GetPolicies(ns)
	if err != nil || pol.DeduplicationEnabled == nil || !*pol.DeduplicationEnabled || pol.MessageTTLInSeconds == nil ||
		*pol.MessageTTLInSeconds != 300 || len(pol.AuthPolicies.NamespaceAuth) != 0 {
		t.Fatalf("policies %+v, %v", pol, err)
	}
	if err := adm.Namespaces().RemoveNamespaceMessageTTL(ns); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().RemoveBacklogQuota(ns); err != nil {
		t.Fatal(err)
	}
	if bq, _ := adm.Namespaces().GetBacklogQuotaMap(ns); len(bq) != 0 {
		t.Fatalf("backlog quotas after removal: %v", bq)
	}

	// A namespace with a topic cannot be deleted; nor a tenant with
	// namespaces; nor a cluster in use.
	tn := topicName(t, "persistent://"+tenant+"/a/t")
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().DeleteNamespace(ns); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("deleting a namespace with a topic: %v, want 409", err)
	}
	if err := adm.Tenants().Delete(tenant); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("deleting a tenant with namespaces: %v, want 409", err)
	}
	if err := adm.Clusters().Delete(other.Name); err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("deleting a cluster in use: %v, want 412", err)
	}
	if err := adm.Topics().Delete(tn, false, true); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ns, tenant + "/b"} {
		if err := adm.Namespaces().DeleteNamespace(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.Tenants().Delete(tenant); err != nil {
		t.Fatal(err)
	}
	if err := adm.Clusters().Delete(other.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Tenants().Get(tenant); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleted tenant: %v, want 404", err)
	}
}

// TestBrokers checks the broker list, health and leader.
func TestBrokers(t *testing.T) {
	adm := newAdmin(t, web.URL)
	brokers, err := adm.Brokers().GetActiveBrokers(region.Service().Region())
	want := strings.TrimPrefix(webURL(), "http://")
	if err != nil || !slices.Equal(brokers, []string{want}) {
		t.Fatalf("brokers %v, %v; want [%s]", brokers, err, want)
	}
	if err := adm.Brokers().HealthCheckWithTopicVersion(utils.TopicVersionV2); err != nil {
		t.Fatal(err)
	}
	// The leader is elected once the broker runs: wait for it.
	testkit.WaitFor(t, "the leader", func() bool {
		leader, err := adm.Brokers().GetLeaderBroker()
		return err == nil && leader.BrokerID == region.ID()
	})
}
