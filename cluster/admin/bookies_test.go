package admin_test

import (
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger"
)

// TestBookiesAdmin serves the bookie administration with token
// authentication and the test authorizer: every endpoint is a superuser's
// (403 for a tenant admin), an unknown bookie is a 404 with its reason,
// and the pause switch round-trips.
func TestBookiesAdmin(t *testing.T) {
	key := auth.GenerateSecretKey()
	a, err := auth.New(auth.Config{Enabled: true, Providers: []string{"token"},
		Token: auth.TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(key)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := admin.DefaultConfig()
	cfg.Authenticator, cfg.Authorizer = a, roles{}
	srv := bookiesAdminServer(t, cfg)
	token := func(role string) string {
		tok, err := auth.CreateToken(key, "HS256", role, time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	root, alice := token("root"), token("alice")
	do := func(method, path, authz string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", authz)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/v2/bookies/list"}, {"GET", "/admin/v2/bookies/all"}, {"GET", "/admin/v2/bookies/racks-info"},
		{"GET", "/admin/v2/bookies/under-replicated"}, {"POST", "/admin/v2/bookies/b1/decommission"},
		{"POST", "/admin/v2/bookies/b1/lost"}, {"DELETE", "/admin/v2/bookies/b1/state"},
		{"POST", "/admin/v2/bookies/autorecovery/disable"},
	} {
		if code, body := do(c.method, c.path, alice); code != http.StatusForbidden {
			t.Errorf("%s %s as a tenant admin: %d %s, want 403", c.method, c.path, code, body)
		}
	}
	if code, body := do("GET", "/admin/v2/bookies/list", root); code != http.StatusOK || !strings.Contains(body, `"state":"writable"`) {
		t.Errorf("list: %d %s", code, body)
	}
	if code, body := do("GET", "/admin/v2/bookies/racks-info", root); code != http.StatusOK || !strings.HasPrefix(body, `{"default":{`) {
		t.Errorf("racks-info: %d %s", code, body)
	}
	for _, path := range []string{"/admin/v2/bookies/nobody/decommission", "/admin/v2/bookies/nobody/lost"} {
		if code, body := do("POST", path, root); code != http.StatusNotFound || !strings.Contains(body, `no bookie \"nobody\"`) {
			t.Errorf("POST %s: %d %s, want 404 naming the bookie", path, code, body)
		}
	}
	if code, body := do("POST", "/admin/v2/bookies/autorecovery/disable", root); code != http.StatusNoContent {
		t.Fatalf("disable: %d %s", code, body)
	}
	if code, body := do("GET", "/admin/v2/bookies/autorecovery", root); code != http.StatusOK || body != `{"enabled":false}` {
		t.Errorf("status after disable: %d %s", code, body)
	}
	if code, body := do("POST", "/admin/v2/bookies/autorecovery/enable", root); code != http.StatusNoContent {
		t.Fatalf("enable: %d %s", code, body)
	}
	if code, body := do("GET", "/admin/v2/bookies/autorecovery", root); code != http.StatusOK || body != `{"enabled":true}` {
		t.Errorf("status after enable: %d %s", code, body)
	}
}

// bookiesAdminServer serves the admin API with cfg and the shared region's
// bookie administration, until the test ends.
func bookiesAdminServer(t *testing.T, cfg admin.Config) *httptest.Server {
	t.Helper()
	lc, err := ledger.New(ledger.DefaultConfig(brokertest.Region, brokertest.RegionNumber), storage.Store, storage.Bookies.Client("bookies-admin-test"),
		testLogger(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	cfg.Bookies = autorecovery.NewAdmin(storage.Store, brokertest.Region, lc)
	h, err := admin.New(cfg, region.Service(), testLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
