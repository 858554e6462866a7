package admin_test

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
)

// openRoutes are the admin routes any authenticated role may call, each
// with the reason it is open. A route added without a check fails
// TestEveryRouteAuthorized until it is listed here or checked.
var openRoutes = map[string]string{
	"GET /admin/v2/clusters": "the names of the clusters, no record: Pulsar's GET /clusters answers any " +
		"authenticated role, and pulsar-admin and replicators list them before they know a tenant",
	"GET /admin/v2/clusters/{cluster}/peers": "the names of a cluster's peer clusters, no record or " +
		"credentials: what a client's geo-replication lookup needs, answered by Pulsar without a superuser",
	"GET /admin/v2/brokers/ready": "a readiness probe with no data (Pulsar's /admin/v2/brokers/ready " +
		"is open too): load balancers and orchestrators call it without credentials of a tenant",
}

// pathValues fill a pattern's wildcards with values that name things the
// shared region has (or well-formed names), so that a request reaches the
// route's check rather than stopping at a malformed path.
var pathValues = map[string]string{
	"tenant": "public", "namespace": "default", "topic": "walk-t", "cluster": "standalone",
	"bundle": "0x00000000_0xffffffff", "sub": "s", "subscription": "s", "role": "r", "name": "allowAutoTopicCreation",
	"value": "true", "bookie": "127.0.0.1:3181", "seconds": "1", "timestamp": "1", "version": "1", "ledger": "1", "entry": "1", "n": "1",
}

var wildcard = regexp.MustCompile(`\{([a-zA-Z]+)(\.\.\.)?\}`)

// fillPath fills a route pattern's path wildcards from values, failing
// the test for a wildcard it has no value for.
func fillPath(t testing.TB, path string, values map[string]string) string {
	t.Helper()
	return wildcard.ReplaceAllStringFunc(path, func(w string) string {
		name := wildcard.FindStringSubmatch(w)[1]
		v, ok := values[name]
		if !ok {
			t.Fatalf("%s: no value for {%s} in pathValues", path, name)
		}
		return v
	})
}

// TestEveryRouteAuthorized walks every route of the admin API with a role
// that holds no grant and expects each to be refused with 403 before it
// does anything, but for the routes listed in openRoutes with their
// reasons; and a request without credentials is refused with 401 on every
// route, open ones included.
func TestEveryRouteAuthorized(t *testing.T) {
	key := auth.GenerateSecretKey()
	h, srv := guardedAdmin(t, auth.Config{Enabled: true, Providers: []string{"token"},
		Token: auth.TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(key)}})
	tok, err := auth.CreateToken(key, "HS256", "eve", time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, authz string) int { return statusOf(t, srv, method, path, "{}", authz) }

	routes := admin.Routes(h)
	if len(routes) < 200 {
		t.Fatalf("%d routes, want the whole API", len(routes))
	}
	var open []string
	for pattern, op := range routes {
		method, path, _ := strings.Cut(pattern, " ")
		path = fillPath(t, path, pathValues)
		if got := do(method, path, ""); got != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d, want 401", pattern, got)
		}
		if op == "none" {
			open = append(open, pattern)
			continue
		}
		if got := do(method, path, "Bearer "+tok); got != http.StatusForbidden {
			t.Errorf("%s (%s) as a role without grants: %d, want 403", pattern, op, got)
		}
	}
	slices.Sort(open)
	var listed []string
	for p := range openRoutes {
		listed = append(listed, p)
	}
	slices.Sort(listed)
	if !slices.Equal(open, listed) {
		t.Errorf("open routes %q, want those listed with a reason: %q", open, listed)
	}
	t.Logf("%d routes walked, %d open by design", len(routes), len(open))
}
