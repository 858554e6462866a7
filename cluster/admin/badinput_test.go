package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBadInputChangesNothing sends requests that must be refused with a 4xx
// and a reason, and checks that what they aimed at reads the same after.
func TestBadInputChangesNothing(t *testing.T) {
	id := uniq()
	outside, part := "bad-input-outside-"+id, "/admin/v2/persistent/public/default/bad-input-part-"+id
	adm := newAdmin(t, web.URL)
	if status, body := call(t, "PUT", "/admin/v2/clusters/"+outside, `{"serviceUrl":"http://outside:8080"}`); status != http.StatusNoContent {
		t.Fatalf("create cluster: %d %s", status, body)
	}
	if status, body := call(t, "PUT", part+"/partitions", `2`); status != http.StatusNoContent {
		t.Fatalf("create partitioned topic: %d %s", status, body)
	}
	const ns = "/admin/v2/namespaces/public/default"
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		unchanged                []string // paths whose GET must not change
	}{
		{"malformed namespace policies", "PUT", "/admin/v2/namespaces/public/bad-input", `{"bundles":`, 400,
			[]string{"/admin/v2/namespaces/public"}},
		{"malformed retention", "POST", ns + "/retention", `{"retentionTimeInMinutes": "x"}`, 400, []string{ns}},
		{"trailing garbage", "POST", ns + "/messageTTL", `10 20`, 400, []string{ns}},
		{"missing body", "POST", ns + "/replication", ``, 400, []string{ns}},
		{"unknown tenant", "PUT", "/admin/v2/namespaces/no-such-tenant/ns", ``, 404,
			[]string{"/admin/v2/tenants"}},
		{"unknown namespace", "POST", "/admin/v2/namespaces/public/no-such-ns/messageTTL", `10`, 404,
			[]string{"/admin/v2/namespaces/public"}},
		{"cluster outside the tenant's allowed clusters", "POST", ns + "/replication", `["standalone","` + outside + `"]`, 403,
			[]string{ns}},
		{"cluster that does not exist", "PUT", "/admin/v2/namespaces/public/bad-input-2",
			`{"replication_clusters":["nowhere"]}`, 403, []string{"/admin/v2/namespaces/public"}},
		{"negative TTL", "POST", ns + "/messageTTL", `-5`, 412, []string{ns}},
		{"invalid retention", "POST", ns + "/retention", `{"retentionTimeInMinutes":-1,"retentionSizeInMB":0}`, 412, []string{ns}},
		{"invalid backlog quota policy", "POST", ns + "/backlogQuota", `{"limitSize":10,"limitTime":-1,"policy":"drop_everything"}`, 412,
			[]string{ns}},
		{"invalid schema strategy", "PUT", ns + "/schemaCompatibilityStrategy", `"SOMETIMES"`, 412, []string{ns}},
		{"unknown auth action", "POST", ns + "/permissions/eve", `["produce","launch"]`, 412, []string{ns}},
		{"tenant with an unknown cluster", "PUT", "/admin/v2/tenants/bad-input", `{"allowedClusters":["nowhere"]}`, 412,
			[]string{"/admin/v2/tenants"}},
		{"malformed cluster data", "PUT", "/admin/v2/clusters/bad-input-2", `{"serviceUrl":"ftp://x"}`, 412,
			[]string{"/admin/v2/clusters"}},
		{"partition count not a number", "PUT", "/admin/v2/persistent/public/default/bad-input-3/partitions", `"many"`, 400,
			[]string{"/admin/v2/persistent/public/default/partitioned"}},
		{"shrinking partitions", "POST", part + "/partitions", `1`, 412,
			[]string{part + "/partitions"}},
		{"invalid topic name", "PUT", "/admin/v2/persistent/pub%20lic/default/x", ``, 412,
			[]string{"/admin/v2/tenants"}},
		{"a partition beyond the partitioned topic's count", "PUT", part + "-partition-7", ``, 412,
			[]string{part + "/partitions"}},
		{"topic name with a NUL", "PUT", "/admin/v2/persistent/public/default/a%00b", ``, 412,
			[]string{"/admin/v2/persistent/public/default"}},
		{"topic name of 600 bytes", "PUT", "/admin/v2/persistent/public/default/" + strings.Repeat("x", 600), ``, 412,
			[]string{"/admin/v2/persistent/public/default"}},
		{"tenant name of 300 bytes", "PUT", "/admin/v2/tenants/" + strings.Repeat("t", 300), `{"allowedClusters":["standalone"]}`, 412,
			[]string{"/admin/v2/tenants"}},
		{"skip with a bad count", "POST", part + "/subscription/s/skip/x", ``, 400, nil},
		{"cluster migration without a URL", "POST", "/admin/v2/clusters/" + outside + "/migrate?migrated=true", `{}`, 400,
			[]string{"/admin/v2/clusters/" + outside + "/migrate"}},
		{"cluster migration to a web URL alone", "POST", "/admin/v2/clusters/" + outside + "/migrate?migrated=true", `{"serviceUrl":"http://w1:8080"}`, 412,
			[]string{"/admin/v2/clusters/" + outside + "/migrate"}},
		{"cluster migration to a URL of the wrong scheme", "POST", "/admin/v2/clusters/" + outside + "/migrate?migrated=true",
			`{"brokerServiceUrl":"http://w1:6650"}`, 412, []string{"/admin/v2/clusters/" + outside + "/migrate"}},
		{"cluster migration to a host list with a hole", "POST", "/admin/v2/clusters/" + outside + "/migrate?migrated=true",
			`{"brokerServiceUrl":"pulsar://w1:6650,,w2:6650"}`, 412, []string{"/admin/v2/clusters/" + outside + "/migrate"}},
		{"cluster migration neither true nor false", "POST", "/admin/v2/clusters/" + outside + "/migrate?migrated=maybe",
			`{"brokerServiceUrl":"pulsar://w1:6650"}`, 400, []string{"/admin/v2/clusters/" + outside + "/migrate"}},
		{"migration of a cluster that does not exist", "POST", "/admin/v2/clusters/nowhere/migrate?migrated=true",
			`{"brokerServiceUrl":"pulsar://w1:6650"}`, 404, []string{"/admin/v2/clusters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, tc.unchanged)
			status, body := call(t, tc.method, tc.path, tc.body)
			var r struct {
				Reason string `json:"reason"`
			}
			if status != tc.status || json.Unmarshal([]byte(body), &r) != nil || r.Reason == "" {
				t.Fatalf("%s %s: status %d body %s; want %d with a reason", tc.method, tc.path, status, body, tc.status)
			}
			if after := snapshot(t, tc.unchanged); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	if err := adm.Topics().Delete(topicName(t, "persistent://public/default/bad-input-part-"+id), true, false); err != nil {
		t.Fatal(err)
	}
	if err := adm.Clusters().Delete(outside); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, paths []string) string {
	t.Helper()
	var out string
	for _, p := range paths {
		status, body := call(t, "GET", p, "")
		out += p + " " + http.StatusText(status) + " " + body + "\n"
	}
	return out
}
