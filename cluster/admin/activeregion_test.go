package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestActiveRegion sets, reads and removes a namespace's active region and
// fallback list, and checks that each bad request is refused with Pulsar's
// status and a reason, and changes nothing.
func TestActiveRegion(t *testing.T) {
	east, west, south, tenant, ns := regionsFixture(t, "ar")
	path := ns + "/activeRegion"

	if status, body := call(t, "GET", path, ""); status != http.StatusNoContent {
		t.Fatalf("unset active region: %d %s, want 204", status, body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"active region outside the replication set", "POST", path, `{"activeRegion":"` + south + `"}`, 412},
		{"active region that does not exist", "POST", path, `{"activeRegion":"nowhere"}`, 412},
		{"fallback naming the active region", "POST", path, `{"activeRegion":"` + east + `","fallbackRegions":["` + west + `","` + east + `"]}`, 412},
		{"fallback naming an unknown region", "POST", path, `{"activeRegion":"` + east + `","fallbackRegions":["` + west + `","nowhere"]}`, 412},
		{"fallback outside the replication set", "POST", path, `{"activeRegion":"` + east + `","fallbackRegions":["` + south + `"]}`, 412},
		{"fallback naming a region twice", "POST", path, `{"activeRegion":"` + east + `","fallbackRegions":["` + west + `","` + west + `"]}`, 412},
		{"no active region", "POST", path, `{"fallbackRegions":["` + west + `"]}`, 400},
		{"malformed body", "POST", path, `{"activeRegion":`, 400},
		{"no body", "POST", path, ``, 400},
		{"unknown namespace", "POST", "/admin/v2/namespaces/" + tenant + "/no-such-ns/activeRegion", `{"activeRegion":"` + east + `"}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, []string{ns})
			status, body := call(t, tc.method, tc.path, tc.body)
			var r struct {
				Reason string `json:"reason"`
			}
			if status != tc.status || json.Unmarshal([]byte(body), &r) != nil || r.Reason == "" {
				t.Fatalf("%s %s: status %d body %s; want %d with a reason", tc.method, tc.path, status, body, tc.status)
			}
			if after := snapshot(t, []string{ns}); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	set := `{"activeRegion":"` + east + `","fallbackRegions":["` + west + `","standalone"]}`
	if status, body := call(t, "POST", path, set); status != http.StatusNoContent {
		t.Fatalf("set: %d %s", status, body)
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusOK || body != set+"\n" && body != set {
		t.Fatalf("get after set: %d %q, want %s", status, body, set)
	}
	var policies struct {
		ActiveRegion string `json:"active_region"`
	}
	if _, body := call(t, "GET", ns, ""); json.Unmarshal([]byte(body), &policies) != nil || policies.ActiveRegion != east {
		t.Fatalf("namespace policies after set: %s", body)
	}
	// A fallback region cannot leave the replication set under it.
	before := snapshot(t, []string{ns})
	if status, body := call(t, "POST", ns+"/replication", `["standalone","`+east+`"]`); status < 400 || status >= 500 {
		t.Fatalf("dropping a fallback region from the replication set: %d %s, want a refusal", status, body)
	}
	if after := snapshot(t, []string{ns}); after != before {
		t.Fatalf("a refused replication change changed the namespace:\nbefore %s\nafter  %s", before, after)
	}

	if status, body := call(t, "DELETE", path, ""); status != http.StatusNoContent {
		t.Fatalf("remove: %d %s", status, body)
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusNoContent {
		t.Fatalf("get after remove: %d %s, want 204", status, body)
	}
	policies.ActiveRegion = ""
	if _, body := call(t, "GET", ns, ""); json.Unmarshal([]byte(body), &policies) != nil || policies.ActiveRegion != "" {
		t.Fatalf("namespace policies after remove: %s", body)
	}
}

// TestTopicActiveRegion sets, reads and removes a topic's own active
// region over its namespace's, and checks that each bad request is refused
// with a reason and changes nothing.
func TestTopicActiveRegion(t *testing.T) {
	east, west, south, tenant, ns := regionsFixture(t, "tar")
	topic := "/admin/v2/persistent/" + tenant + "/ns/drill"
	path := topic + "/activeRegion"
	if status, body := call(t, "POST", ns+"/activeRegion", `{"activeRegion":"`+east+`"}`); status != http.StatusNoContent {
		t.Fatalf("namespace active region: %d %s", status, body)
	}
	if status, body := call(t, "PUT", topic+"/partitions", `2`); status != http.StatusNoContent {
		t.Fatalf("create topic: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, "DELETE", topic+"/partitions?force=true", "") })

	get := func(query string) (int, string) { return call(t, "GET", path+query, "") }
	if status, body := get(""); status != http.StatusOK || body != "null" {
		t.Fatalf("unset topic active region: %d %s, want null", status, body)
	}
	if status, body := get("?applied=true"); status != http.StatusOK || body != `{"activeRegion":"`+east+`"}` {
		t.Fatalf("applied, unset: %d %s, want the namespace's %s", status, body, east)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"outside the replication set", path, `{"activeRegion":"` + south + `"}`, 412},
		{"a region that does not exist", path, `{"activeRegion":"nowhere"}`, 412},
		{"fallback regions", path, `{"activeRegion":"` + west + `","fallbackRegions":["` + east + `"]}`, 412},
		{"no active region", path, `{}`, 400},
		{"malformed body", path, `{"activeRegion":`, 400},
		{"unknown topic", "/admin/v2/persistent/" + tenant + "/ns/no-such-topic/activeRegion", `{"activeRegion":"` + west + `"}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, []string{path, path + "?applied=true"})
			status, body := call(t, "POST", tc.path, tc.body)
			var r struct {
				Reason string `json:"reason"`
			}
			if status != tc.status || json.Unmarshal([]byte(body), &r) != nil || r.Reason == "" {
				t.Fatalf("POST %s: status %d body %s; want %d with a reason", tc.path, status, body, tc.status)
			}
			if after := snapshot(t, []string{path, path + "?applied=true"}); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	if status, body := call(t, "POST", path, `{"activeRegion":"`+west+`"}`); status != http.StatusNoContent {
		t.Fatalf("set: %d %s", status, body)
	}
	for _, q := range []string{"", "?applied=true"} {
		if status, body := get(q); status != http.StatusOK || body != `{"activeRegion":"`+west+`"}` {
			t.Fatalf("get%s after set: %d %s, want %s", q, status, body, west)
		}
	}
	// The namespace's own is untouched.
	if status, body := call(t, "GET", ns+"/activeRegion", ""); status != http.StatusOK || body != `{"activeRegion":"`+east+`"}` {
		t.Fatalf("namespace active region after the topic's was set: %d %s", status, body)
	}
	// A topic whose own replication set leaves its region out has none in effect.
	if status, body := call(t, "POST", topic+"/replication", `["standalone","`+east+`"]`); status != http.StatusNoContent {
		t.Fatalf("topic replication: %d %s", status, body)
	}
	if status, body := get("?applied=true"); status != http.StatusOK || body != "null" {
		t.Fatalf("applied, with the region out of the topic's set: %d %s, want null", status, body)
	}
	call(t, "DELETE", topic+"/replication", "")

	if status, body := call(t, "DELETE", path, ""); status != http.StatusNoContent {
		t.Fatalf("remove: %d %s", status, body)
	}
	if status, body := get(""); status != http.StatusOK || body != "null" {
		t.Fatalf("get after remove: %d %s, want null", status, body)
	}
	if status, body := get("?applied=true"); status != http.StatusOK || body != `{"activeRegion":"`+east+`"}` {
		t.Fatalf("applied after remove: %d %s, want the namespace's %s", status, body, east)
	}
}

// regionsFixture registers three regions (names under prefix), and a
// tenant allowed in all of them with a namespace ns (its admin path)
// replicated to standalone, east and west; the test's cleanup removes
// them.
func regionsFixture(t *testing.T, prefix string) (east, west, south, tenant, ns string) {
	t.Helper()
	id := uniq()
	east, west, south = prefix+"-east-"+id, prefix+"-west-"+id, prefix+"-south-"+id
	tenant = prefix + "-" + id
	ns = "/admin/v2/namespaces/" + tenant + "/ns"
	for _, c := range []string{east, west, south} {
		if status, body := call(t, "PUT", "/admin/v2/clusters/"+c, `{"serviceUrl":"http://`+c+`:8080"}`); status != http.StatusNoContent {
			t.Fatalf("create cluster %s: %d %s", c, status, body)
		}
	}
	if status, body := call(t, "PUT", "/admin/v2/tenants/"+tenant,
		`{"allowedClusters":["standalone","`+east+`","`+west+`","`+south+`"]}`); status != http.StatusNoContent {
		t.Fatalf("create tenant: %d %s", status, body)
	}
	if status, body := call(t, "PUT", ns, `{"replication_clusters":["standalone","`+east+`","`+west+`"]}`); status != http.StatusNoContent {
		t.Fatalf("create namespace: %d %s", status, body)
	}
	t.Cleanup(func() {
		call(t, "DELETE", ns, "")
		call(t, "DELETE", "/admin/v2/tenants/"+tenant, "")
		for _, c := range []string{east, west, south} {
			call(t, "DELETE", "/admin/v2/clusters/"+c, "")
		}
	})
	return east, west, south, tenant, ns
}
