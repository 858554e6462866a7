package admin_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/admin"
)

// FuzzJSONBodies sends arbitrary bodies to every admin route that takes
// one (each POST and PUT the handler registers, admin.Routes), on a
// tenant, namespace, topic and cluster of the fuzzer's own. Whatever the
// body, the answer is a success or a 4xx with a reason: never a 5xx, never
// a hang, and the server keeps serving. The bookie routes are left out:
// they act on the shared region's storage, not on the fuzzer's names.
//
//	go test -run '^$' -fuzz FuzzJSONBodies -fuzztime 2m ./cluster/admin/
func FuzzJSONBodies(f *testing.F) {
	// A tenant, namespace and cluster of the fuzzer's own, so that what it
	// manages to set touches no other test.
	id := uniq()
	values := maps.Clone(pathValues)
	values["tenant"], values["namespace"], values["topic"], values["cluster"] = "fuzz-"+id, "ns", "t", "fuzz-"+id
	tenant, cluster := "/admin/v2/tenants/fuzz-"+id, "/admin/v2/clusters/fuzz-"+id
	ns := "/admin/v2/namespaces/fuzz-" + id + "/ns"
	for _, req := range []struct{ path, body string }{{tenant, `{"allowedClusters":["standalone"]}`}, {ns, ""}} {
		if status, text := call(f, "PUT", req.path, req.body); status != http.StatusNoContent {
			f.Fatalf("PUT %s: %d %s", req.path, status, text)
		}
	}
	f.Cleanup(func() {
		call(f, "DELETE", "/admin/v2/persistent/fuzz-"+id+"/ns/t/partitions?force=true", "")
		call(f, "DELETE", "/admin/v2/persistent/fuzz-"+id+"/ns/t?force=true", "")
		for _, path := range []string{ns + "?force=true", tenant + "?force=true", cluster} {
			call(f, "DELETE", path, "")
		}
	})
	h, err := admin.New(admin.DefaultConfig(), region.Service(), testLogger())
	if err != nil {
		f.Fatal(err)
	}
	type target struct{ method, path string }
	var targets []target
	for pattern := range admin.Routes(h) {
		method, path, _ := strings.Cut(pattern, " ")
		if (method != "POST" && method != "PUT") || strings.HasPrefix(path, "/admin/v2/bookies/") {
			continue
		}
		targets = append(targets, target{method, fillPath(f, path, values)})
	}
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	for _, seed := range []string{
		`{}`, `null`, `[]`, `""`, `0`, `-1`, `3`, `1e309`, `{"retentionTimeInMinutes":10,"retentionSizeInMB":-1}`,
		`{"limitSize":10,"limitTime":-1,"policy":"producer_request_hold"}`, `["standalone"]`, `["produce","consume"]`,
		`{"allowedClusters":["standalone"],"adminRoles":["a"]}`, `{"serviceUrl":"http://x:8080"}`,
		`{"dispatchThrottlingRateInMsg":-5}`, `{"bundles":{"numBundles":0}}`, "\x00", `{"a":` + "\"\xff\"}",
		`{"partitions": 4, "properties": {"a": "b"}}`, `{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":2}`,
		`{"type":"STRING","schema":"","properties":{}}`, `{"ledgerId":1,"entryId":-1}`, `{"activeRegion":"standalone"}`,
	} {
		// Each seed on a few routes, spread over the table: every seed on
		// every route would make the baseline longer than a fuzzing run.
		for k := range 4 {
			f.Add(uint16(k*len(targets)/4+len(seed)), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, route uint16, body []byte) {
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
