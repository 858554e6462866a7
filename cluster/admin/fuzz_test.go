package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzJSONBodies sends arbitrary bodies to the admin routes that decode
// JSON. Whatever the body, the answer is a success or a 4xx with a reason:
// never a 5xx, never a hang, and the server keeps serving.
//
//	go test -run '^$' -fuzz FuzzJSONBodies -fuzztime 2m ./cluster/admin/
func FuzzJSONBodies(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, `[]`, `""`, `0`, `-1`, `1e309`, `{"retentionTimeInMinutes":10,"retentionSizeInMB":-1}`,
		`{"limitSize":10,"limitTime":-1,"policy":"producer_request_hold"}`, `["standalone"]`, `["produce","consume"]`,
		`{"allowedClusters":["standalone"],"adminRoles":["a"]}`, `{"serviceUrl":"http://x:8080"}`,
		`{"dispatchThrottlingRateInMsg":-5}`, `{"bundles":{"numBundles":0}}`, "\x00", `{"a":` + "\"\xff\"}",
	} {
		for route := range 10 {
			f.Add(uint8(route), []byte(seed))
		}
	}
	// A tenant, namespace and cluster of the fuzzer's own, so that what it
	// manages to set touches no other test.
	id := uniq()
	tenant, cluster := "/admin/v2/tenants/fuzz-"+id, "/admin/v2/clusters/fuzz-"+id
	ns := "/admin/v2/namespaces/fuzz-" + id + "/ns"
	for _, req := range []struct{ path, body string }{{tenant, `{"allowedClusters":["standalone"]}`}, {ns, ""}} {
		if status, text := call(f, "PUT", req.path, req.body); status != http.StatusNoContent {
			f.Fatalf("PUT %s: %d %s", req.path, status, text)
		}
	}
	f.Cleanup(func() {
		for _, path := range []string{ns + "-created", ns, tenant, cluster} {
			call(f, "DELETE", path, "")
		}
	})
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		targets := []struct{ method, path string }{
			{"POST", ns + "/retention"},
			{"POST", ns + "/backlogQuota"},
			{"POST", ns + "/messageTTL"},
			{"POST", ns + "/replication"},
			{"POST", ns + "/permissions/fuzz-role"},
			{"POST", ns + "/dispatchRate"},
			{"PUT", ns + "/schemaCompatibilityStrategy"},
			{"PUT", ns + "-created"},
			{"POST", tenant},
			{"PUT", cluster},
		}
		target := targets[int(route)%len(targets)]
		status, text := call(t, target.method, target.path, string(body))
		if status >= 500 {
			t.Fatalf("%s %s with %q: %d %s", target.method, target.path, body, status, text)
		}
		if status >= 400 {
			var r struct {
				Reason string `json:"reason"`
			}
			if json.Unmarshal([]byte(text), &r) != nil || r.Reason == "" {
				t.Fatalf("%s %s with %q: %d without a reason: %s", target.method, target.path, body, status, text)
			}
		}
	})
}
