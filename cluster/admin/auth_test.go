package admin_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// roles is a fixed authorizer: "root" is a superuser, "alice" administers
// tenant public, "reader" may look up and consume everything.
type roles struct{}

var errNo = errors.New("not allowed by the test authorizer")

func (roles) IsSuperUser(role string) bool { return role == "root" }
func (roles) CanAdminTenant(_ context.Context, role, tenant string) error {
	if role == "alice" && tenant == "public" {
		return nil
	}
	return errNo
}
func (roles) CanProduce(context.Context, string, topology.TopicName) error { return errNo }
func (roles) CanConsume(_ context.Context, role string, _ topology.TopicName) error {
	if role == "reader" {
		return nil
	}
	return errNo
}
func (r roles) CanLookup(ctx context.Context, role string, t topology.TopicName) error {
	return r.CanConsume(ctx, role, t)
}

// guardedAdmin serves an admin API over the shared region that
// authenticates as ac says and authorizes with the test's roles.
func guardedAdmin(t *testing.T, ac auth.Config) (http.Handler, *httptest.Server) {
	t.Helper()
	a, err := auth.New(ac)
	if err != nil {
		t.Fatal(err)
	}
	cfg := admin.DefaultConfig()
	cfg.Authenticator, cfg.Authorizer = a, roles{}
	h, err := admin.New(cfg, region.Service(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

// statusOf sends method path with a JSON body and an Authorization header
// (none when empty) to srv, and returns the answer's status.
func statusOf(t *testing.T, srv *httptest.Server, method, path, body, authz string) int {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, stringsReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAuthentication serves the admin API with token and basic
// authentication and the test authorizer, and checks 401 for missing,
// wrong, forged and expired credentials, 403 for a role that may not, and
// that a refused write changes nothing.
func TestAuthentication(t *testing.T) {
	key := auth.GenerateSecretKey()
	otherKey := auth.GenerateSecretKey()
	htpasswd := "alice:" + auth.APR1("alice-pw", "8charslt") + "\n"
	_, srv := guardedAdmin(t, auth.Config{Enabled: true, Providers: []string{"token", "basic"},
		Token: auth.TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(key)},
		Basic: auth.BasicConfig{Conf: "data:;base64," + base64.StdEncoding.EncodeToString([]byte(htpasswd))}})
	token := func(signing []byte, role string, exp time.Time) string {
		tok, err := auth.CreateToken(signing, "HS256", role, exp, nil)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	do := func(method, path, body, authz string) int { return statusOf(t, srv, method, path, body, authz) }
	const policies = "/admin/v2/namespaces/public/default"
	secured := "secured-" + uniq()
	rc, err := region.Service().Global().CreateCluster(context.Background(), secured, global.ClusterData{
		BrokerServiceURL: "pulsar://far.example:6650", AuthenticationPlugin: "org.apache.pulsar.client.impl.auth.AuthenticationToken",
		AuthenticationParameters: "token:secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := region.Service().Policies().Await(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	defer region.Service().Global().DeleteCluster(context.Background(), secured)
	before := snapshot(t, []string{policies})
	for _, tc := range []struct {
		name, method, path, body, authz string
		status                          int
	}{
		{"no credentials", "GET", "/admin/v2/tenants", "", "", 401},
		{"unknown scheme", "GET", "/admin/v2/tenants", "", "Digest x", 401},
		{"forged token", "GET", "/admin/v2/tenants", "", token(otherKey, "root", time.Time{}), 401},
		{"expired token", "GET", "/admin/v2/tenants", "", token(key, "root", time.Now().Add(-time.Hour)), 401},
		{"wrong password", "GET", "/admin/v2/tenants", "", basic("alice", "nope"), 401},
		{"superuser token", "GET", "/admin/v2/tenants", "", token(key, "root", time.Now().Add(time.Hour)), 200},
		{"tenant admin over basic", "GET", policies, "", basic("alice", "alice-pw"), 200},
		{"tenant admin writes", "POST", policies + "/messageTTL", "0", basic("alice", "alice-pw"), 204},
		{"tenant admin is no superuser", "PUT", "/admin/v2/tenants/alices", `{"allowedClusters":["standalone"]}`, basic("alice", "alice-pw"), 403},
		{"forbidden role reads", "GET", policies, "", token(key, "mallory", time.Time{}), 403},
		{"forbidden role writes", "POST", policies + "/messageTTL", "99", token(key, "mallory", time.Time{}), 403},
		{"namespace admin sets the active region", "POST", policies + "/activeRegion", `{"activeRegion":"standalone"}`, basic("alice", "alice-pw"), 204},
		{"forbidden role reads the active region", "GET", policies + "/activeRegion", "", token(key, "mallory", time.Time{}), 403},
		{"forbidden role sets the active region", "POST", policies + "/activeRegion", `{"activeRegion":"standalone"}`, token(key, "mallory", time.Time{}), 403},
		{"forbidden role removes the active region", "DELETE", policies + "/activeRegion", "", token(key, "mallory", time.Time{}), 403},
		{"consumer sets no active region", "POST", policies + "/activeRegion", `{"activeRegion":"standalone"}`, token(key, "reader", time.Time{}), 403},
		{"namespace admin removes the active region", "DELETE", policies + "/activeRegion", "", basic("alice", "alice-pw"), 204},
		{"namespace admin reads automatic failover", "GET", policies + "/autoFailover", "", basic("alice", "alice-pw"), 204},
		{"automatic failover is a superuser's to set", "POST", policies + "/autoFailover", `{"delaySeconds":30}`, basic("alice", "alice-pw"), 403},
		{"automatic failover is a superuser's to remove", "DELETE", policies + "/autoFailover", "", basic("alice", "alice-pw"), 403},
		{"consumer looks up", "GET", "/lookup/v2/topic/persistent/public/default/auth-t", "", token(key, "reader", time.Time{}), 200},
		{"consumer reads no stats", "GET", "/admin/v2/persistent/public/default/auth-t/stats", "", token(key, "reader", time.Time{}), 403},
		{"a tenant admin lists no tenants", "GET", "/admin/v2/tenants", "", basic("alice", "alice-pw"), 403},
		{"a cluster record is a superuser's", "GET", "/admin/v2/clusters/standalone", "", basic("alice", "alice-pw"), 403},
		{"a cluster record with credentials too", "GET", "/admin/v2/clusters/" + secured, "", basic("alice", "alice-pw"), 403},
		{"a superuser reads it", "GET", "/admin/v2/clusters/" + secured, "", token(key, "root", time.Now().Add(time.Hour)), 200},
		{"a cluster migration is a superuser's", "POST", "/admin/v2/clusters/" + secured + "/migrate?migrated=false",
			`{"brokerServiceUrl":"pulsar://w1:6650"}`, basic("alice", "alice-pw"), 403},
		{"and so is reading it", "GET", "/admin/v2/clusters/" + secured + "/migrate", "", basic("alice", "alice-pw"), 403},
		{"a superuser records one", "POST", "/admin/v2/clusters/" + secured + "/migrate?migrated=false",
			`{"brokerServiceUrl":"pulsar://w1:6650"}`, token(key, "root", time.Now().Add(time.Hour)), 200},
	} {
		if got := do(tc.method, tc.path, tc.body, tc.authz); got != tc.status {
			t.Errorf("%s: %s %s: status %d, want %d", tc.name, tc.method, tc.path, got, tc.status)
		}
	}
	if err := removeTTL(t); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, []string{policies}); after != before {
		t.Errorf("refused writes changed the namespace:\nbefore %s\nafter  %s", before, after)
	}

	// pulsar-client-go with an http:// service URL and basic
	// authentication (its tests' setup): lookups go through this handler.
	basicAuth, err := pulsar.NewAuthenticationBasic("alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: srv.URL, Authentication: basicAuth,
		OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := produce(t, c, "persistent://public/default/auth-basic", "b", 1)
	if len(ids) != 1 {
		t.Fatal("no message id")
	}
	names, err := c.TopicPartitions("persistent://public/default/auth-basic")
	if err != nil || !slices.Equal(names, []string{"persistent://public/default/auth-basic"}) {
		t.Fatalf("partitions %v, %v", names, err)
	}
}

// removeTTL undoes the tenant admin's write, through the open API.
func removeTTL(t *testing.T) error {
	t.Helper()
	if status, body := call(t, "DELETE", "/admin/v2/namespaces/public/default/messageTTL", ""); status != http.StatusNoContent {
		return errors.New(body)
	}
	return nil
}

// TestBrokerAuthorizer checks the adapter of the broker's authorizer: a
// namespace grant lets a role look up and consume, not administer.
func TestBrokerAuthorizer(t *testing.T) {
	if admin.BrokerAuthorizer(nil) != nil {
		t.Fatal("BrokerAuthorizer(nil) is not nil")
	}
	z := admin.BrokerAuthorizer(auth.NewAuthorizer([]string{"root"}, region.Service().Policies()))
	ctx := context.Background()
	topic, _ := topology.ParseTopicName("persistent://public/default/authz")
	if !z.IsSuperUser("root") || z.IsSuperUser("dave") {
		t.Fatal("superusers")
	}
	if err := z.CanLookup(ctx, "dave", topic); err == nil {
		t.Fatal("dave may look up without a grant")
	}
	if status, body := call(t, "POST", "/admin/v2/namespaces/public/default/permissions/dave", `["consume"]`); status != http.StatusNoContent {
		t.Fatalf("grant: %d %s", status, body)
	}
	defer call(t, "DELETE", "/admin/v2/namespaces/public/default/permissions/dave", "")
	if err := z.CanLookup(ctx, "dave", topic); err != nil {
		t.Fatal(err)
	}
	if err := z.CanConsume(ctx, "dave", topic); err != nil {
		t.Fatal(err)
	}
	if z.CanProduce(ctx, "dave", topic) == nil || z.CanAdminTenant(ctx, "dave", "public") == nil {
		t.Fatal("a consume grant allowed producing or administering")
	}
}
