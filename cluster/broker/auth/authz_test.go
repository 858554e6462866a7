package auth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// TestAuthorizer walks Pulsar's rules: superusers do anything, tenant
// admins administer and use their tenant, and other roles hold what the
// namespace or topic grants them.
func TestAuthorizer(t *testing.T) {
	ctx := context.Background()
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	gs, err := global.NewStore(store, global.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateCluster(ctx, "r1", global.ClusterData{ServiceURL: "http://r1:8080"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateTenant(ctx, "acme", global.TenantInfo{AdminRoles: []string{"acme-admin"}, AllowedClusters: []string{"r1"}}); err != nil {
		t.Fatal(err)
	}
	topic, _ := topology.ParseTopicName("persistent://acme/ns/orders-partition-1")
	r, err := gs.CreateNamespace(ctx, "acme", "ns", global.Policies{AuthPolicies: global.AuthPolicies{
		NamespaceAuth:   map[string][]global.AuthAction{"reader": {global.ActionConsume}},
		DestinationAuth: map[string]map[string][]global.AuthAction{"persistent://acme/ns/orders": {"writer": {global.ActionProduce}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := global.DefaultCacheConfig()
	cache, err := global.StartCache(gs, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if err := cache.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	a := auth.NewAuthorizer([]string{"root"}, cache)
	cases := []struct {
		role string
		act  auth.Action
		ok   bool
	}{
		{"root", auth.ActionProduce, true},
		{"acme-admin", auth.ActionConsume, true},
		{"reader", auth.ActionConsume, true},
		{"reader", auth.ActionProduce, false},
		{"reader", auth.ActionLookup, true},
		{"writer", auth.ActionProduce, true}, // a partition inherits its topic's grants
		{"writer", auth.ActionConsume, false},
		{"stranger", auth.ActionLookup, false},
		{"", auth.ActionLookup, false},
	}
	for _, c := range cases {
		err := a.Can(ctx, c.role, c.act, topic)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, auth.ErrForbidden)) {
			t.Errorf("role %q action %d: got %v, want allowed=%v", c.role, c.act, err, c.ok)
		}
	}
	if a.CanAdminTenant(ctx, "reader", "acme") == nil || a.CanAdminTenant(ctx, "acme-admin", "acme") != nil ||
		a.CanAdminTenant(ctx, "root", "other") != nil {
		t.Error("tenant administration: wrong answers")
	}
}
