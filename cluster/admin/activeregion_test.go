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
	id := uniq()
	east, west, south := "ar-east-"+id, "ar-west-"+id, "ar-south-"+id
	tenant := "ar-" + id
	ns := "/admin/v2/namespaces/" + tenant + "/ns"
	path := ns + "/activeRegion"
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
