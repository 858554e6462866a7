package admin_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
)

// TestFences creates, lists, renews and removes a fence, and checks that
// each request it cannot honour is refused with Pulsar's status and a
// reason, and stores nothing.
func TestFences(t *testing.T) {
	id := uniq()
	east := "fence-east-" + id
	tenant := "fence-" + id
	ns := "/admin/v2/namespaces/" + tenant + "/ns"
	fences := ns + "/fences"
	if status, body := call(t, "PUT", "/admin/v2/clusters/"+east, `{"serviceUrl":"http://`+east+`:8080"}`); status != http.StatusNoContent {
		t.Fatalf("create cluster: %d %s", status, body)
	}
	if status, body := call(t, "PUT", "/admin/v2/tenants/"+tenant, `{"allowedClusters":["standalone","`+east+`"]}`); status != http.StatusNoContent {
		t.Fatalf("create tenant: %d %s", status, body)
	}
	if status, body := call(t, "PUT", ns, `{"replication_clusters":["standalone"]}`); status != http.StatusNoContent {
		t.Fatalf("create namespace: %d %s", status, body)
	}
	t.Cleanup(func() {
		call(t, "DELETE", fences+"/f", "")
		call(t, "DELETE", ns, "")
		call(t, "DELETE", "/admin/v2/tenants/"+tenant, "")
		call(t, "DELETE", "/admin/v2/clusters/"+east, "")
	})
	refused := func(what, method, path, body string, want int) {
		t.Helper()
		before := snapshot(t, []string{fences})
		status, answer := call(t, method, path, body)
		var r struct {
			Reason string `json:"reason"`
		}
		if status != want || json.Unmarshal([]byte(answer), &r) != nil || r.Reason == "" {
			t.Fatalf("%s: status %d body %s; want %d with a reason", what, status, answer, want)
		}
		if after := snapshot(t, []string{fences}); after != before {
			t.Fatalf("%s changed the fences:\nbefore %s\nafter  %s", what, before, after)
		}
	}
	const good = `{"region":"standalone","topicPrefix":"drill-x-","ttlSeconds":5,"holder":"a test"}`
	refused("a namespace that does not exist", "POST", "/admin/v2/namespaces/"+tenant+"/nope/fences/f", good, 404)
	refused("an unknown region", "POST", fences+"/f", `{"region":"mars","topicPrefix":"drill-x-","ttlSeconds":5}`, 412)
	refused("a region the namespace does not replicate to", "POST", fences+"/f", `{"region":"`+east+`","topicPrefix":"drill-x-","ttlSeconds":5}`, 412)
	refused("no topic prefix (a whole namespace)", "POST", fences+"/f", `{"region":"standalone","topicPrefix":"","ttlSeconds":5}`, 412)
	refused("a TTL below the minimum", "POST", fences+"/f", `{"region":"standalone","topicPrefix":"drill-x-","ttlSeconds":1}`, 412)
	refused("a malformed body", "POST", fences+"/f", `{"region":`, 400)
	refused("no body", "POST", fences+"/f", ``, 400)
	refused("renewing a fence that is not there", "POST", fences+"/f/renew", "", 404)
	refused("removing a fence that is not there", "DELETE", fences+"/f", "", 404)

	if status, body := call(t, "POST", fences+"/f", good); status != http.StatusOK {
		t.Fatalf("create: %d %s", status, body)
	}
	refused("a second fence of the name", "POST", fences+"/f", good, 409)
	status, body := call(t, "GET", fences, "")
	var list []struct {
		Name, Region, TopicPrefix, Holder string
		TTLSeconds                        int
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 ||
		list[0].Name != "f" || list[0].Region != "standalone" || list[0].TopicPrefix != "drill-x-" || list[0].TTLSeconds != 5 || list[0].Holder != "a test" {
		t.Fatalf("list: %d %s", status, body)
	}
	if status, body := call(t, "POST", fences+"/f/renew", ""); status != http.StatusOK {
		t.Fatalf("renew: %d %s", status, body)
	}
	if status, body := call(t, "DELETE", fences+"/f", ""); status != http.StatusNoContent {
		t.Fatalf("remove: %d %s", status, body)
	}
	if status, body := call(t, "GET", fences, ""); status != http.StatusOK || body != "[]" {
		t.Fatalf("list after the removal: %d %s", status, body)
	}
}

// TestFencesAreASuperusers: a fence takes a region's service away from
// clients, so even the tenant's own admin may not set, renew, remove or
// list one; a superuser may.
func TestFencesAreASuperusers(t *testing.T) {
	key := auth.GenerateSecretKey()
	_, srv := guardedAdmin(t, auth.Config{Enabled: true, Providers: []string{"token"},
		Token: auth.TokenConfig{SecretKey: "data:;base64," + base64.StdEncoding.EncodeToString(key)}})
	token := func(role string) string {
		tok, err := auth.CreateToken(key, "HS256", role, time.Now().Add(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	const fences = "/admin/v2/namespaces/public/default/fences"
	name := "su-" + uniq()
	body := `{"region":"standalone","topicPrefix":"drill-su-","ttlSeconds":5}`
	for _, tc := range []struct{ method, path, body string }{
		{"GET", fences, ""},
		{"POST", fences + "/" + name, body},
		{"POST", fences + "/" + name + "/renew", ""},
		{"DELETE", fences + "/" + name, ""},
	} {
		if got := statusOf(t, srv, tc.method, tc.path, tc.body, token("alice")); got != http.StatusForbidden {
			t.Errorf("%s %s as public's tenant admin: %d, want 403", tc.method, tc.path, got)
		}
	}
	if got := statusOf(t, srv, "POST", fences+"/"+name, body, token("root")); got != http.StatusOK {
		t.Fatalf("create as a superuser: %d", got)
	}
	if got := statusOf(t, srv, "DELETE", fences+"/"+name, "", token("root")); got != http.StatusNoContent {
		t.Fatalf("remove as a superuser: %d", got)
	}
}
