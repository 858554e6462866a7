package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recorded is one request the fake admin API received.
type recorded struct {
	Method, Path, Query, Body, Auth string
}

// fakeAdmin is an admin REST API that records every request and answers
// from canned responses ("METHOD /path" → status and body). A GET with no
// canned answer is a 404 with a Pulsar-style reason; anything else is a
// 204, which is what Pulsar answers to a successful write.
type fakeAdmin struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []recorded
	canned map[string]cannedResponse
}

type cannedResponse struct {
	status int
	body   string
}

func newFakeAdmin(t *testing.T, canned map[string]cannedResponse) *fakeAdmin {
	t.Helper()
	f := &fakeAdmin{canned: canned}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, string(body), r.Header.Get("Authorization")})
		f.mu.Unlock()
		c, ok := f.canned[r.Method+" "+r.URL.Path]
		switch {
		case ok:
		case r.Method == http.MethodGet:
			c = cannedResponse{404, `{"reason":"no canned answer for ` + r.URL.Path + `"}`}
		default:
			c = cannedResponse{204, ""}
		}
		if c.body != "" && c.body[0] != '{' && c.body[0] != '[' && c.body[0] != '"' {
			w.Header().Set("Content-Type", "text/plain")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(c.status)
		io.WriteString(w, c.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAdmin) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// runAdmin runs `meridian admin args...` against url, as main runs it,
// and returns stdout.
func runAdmin(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	out, _, err := runAdminStreams(t, url, args...)
	return out, err
}

// runAdminStreams is runAdmin, returning stderr too.
func runAdminStreams(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(expandMultiLetterShorthands(root, append([]string{"admin", "--admin-url", url}, args...)))
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("body %q is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q is not JSON: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestAdminRequests checks, verb by verb, the requests `meridian admin`
// sends (method, path, query and JSON body: what pulsar-admin sends for the
// same command) and what it prints.
func TestAdminRequests(t *testing.T) {
	type want struct {
		method, path, query, body string // body "" is not checked
	}
	cases := []struct {
		name   string
		args   []string
		canned map[string]cannedResponse
		want   []want // the requests, in order
		out    string // expected stdout; "" means empty
	}{
		{
			name:   "tenants list",
			args:   []string{"tenants", "list"},
			canned: map[string]cannedResponse{"GET /admin/v2/tenants": {200, `["public","acme"]`}},
			want:   []want{{"GET", "/admin/v2/tenants", "", ""}},
			out:    "acme\npublic\n",
		},
		{
			name:   "tenants list json",
			args:   []string{"tenants", "list", "--output", "json"},
			canned: map[string]cannedResponse{"GET /admin/v2/tenants": {200, `["public"]`}},
			want:   []want{{"GET", "/admin/v2/tenants", "", ""}},
			out:    "[\n  \"public\"\n]\n",
		},
		{
			name: "tenants get",
			args: []string{"tenants", "get", "acme"},
			canned: map[string]cannedResponse{"GET /admin/v2/tenants/acme": {200,
				`{"adminRoles":["alice","bob"],"allowedClusters":["us-east"]}`}},
			want: []want{{"GET", "/admin/v2/tenants/acme", "", ""}},
			out:  "ADMIN ROLES  ALLOWED CLUSTERS\nalice,bob    us-east\n",
		},
		{
			name: "tenants create with roles and clusters",
			args: []string{"tenants", "create", "acme", "-r", "alice,bob", "--allowed-clusters", "us-east"},
			want: []want{{"PUT", "/admin/v2/tenants/acme", "", `{"adminRoles":["alice","bob"],"allowedClusters":["us-east"]}`}},
		},
		{
			name:   "tenants create defaults to every cluster",
			args:   []string{"tenants", "create", "private"},
			canned: map[string]cannedResponse{"GET /admin/v2/clusters": {200, `["standalone","eu"]`}},
			want: []want{
				{"GET", "/admin/v2/clusters", "", ""},
				{"PUT", "/admin/v2/tenants/private", "", `{"adminRoles":[],"allowedClusters":["standalone","eu"]}`},
			},
		},
		{
			name: "tenants update keeps the field not given",
			args: []string{"tenants", "update", "public", "-r", "anonymous"},
			canned: map[string]cannedResponse{"GET /admin/v2/tenants/public": {200,
				`{"adminRoles":[],"allowedClusters":["standalone"]}`}},
			want: []want{
				{"GET", "/admin/v2/tenants/public", "", ""},
				{"POST", "/admin/v2/tenants/public", "", `{"adminRoles":["anonymous"],"allowedClusters":["standalone"]}`},
			},
		},
		{
			name: "tenants delete",
			args: []string{"tenants", "delete", "acme"},
			want: []want{{"DELETE", "/admin/v2/tenants/acme", "", ""}},
		},
		{
			name: "namespaces create with clusters",
			args: []string{"namespaces", "create", "private/auth", "-c", "standalone"},
			want: []want{
				{"PUT", "/admin/v2/namespaces/private/auth", "", ""},
				{"POST", "/admin/v2/namespaces/private/auth/replication", "", `["standalone"]`},
			},
		},
		{
			name: "namespaces grant-permission",
			args: []string{"namespaces", "grant-permission", "public/default", "--actions", "produce,consume", "--role", "anonymous"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/permissions/anonymous", "", `["produce","consume"]`}},
		},
		{
			name: "namespaces revoke-permission",
			args: []string{"namespaces", "revoke-permission", "public/default", "--role", "anonymous"},
			want: []want{{"DELETE", "/admin/v2/namespaces/public/default/permissions/anonymous", "", ""}},
		},
		{
			name: "namespaces permissions",
			args: []string{"namespaces", "permissions", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/permissions": {200,
				`{"zed":["consume"],"anonymous":["produce","consume"]}`}},
			want: []want{{"GET", "/admin/v2/namespaces/public/default/permissions", "", ""}},
			out:  "ROLE       ACTIONS\nanonymous  produce,consume\nzed        consume\n",
		},
		{
			name: "namespaces set-retention",
			args: []string{"namespaces", "set-retention", "public/default", "--size", "10G", "--time", "3h"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/retention", "",
				`{"retentionTimeInMinutes":180,"retentionSizeInMB":10240}`}},
		},
		{
			name: "namespaces set-retention unlimited",
			args: []string{"namespaces", "set-retention", "public/default", "-s", "-1", "-t", "-1"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/retention", "",
				`{"retentionTimeInMinutes":-1,"retentionSizeInMB":-1}`}},
		},
		{
			name: "namespaces get-retention",
			args: []string{"namespaces", "get-retention", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/retention": {200,
				`{"retentionTimeInMinutes":60,"retentionSizeInMB":100}`}},
			want: []want{{"GET", "/admin/v2/namespaces/public/default/retention", "", ""}},
			out:  "RETENTION TIME (MINUTES)  RETENTION SIZE (MB)\n60                        100\n",
		},
		{
			name: "namespaces set-message-ttl",
			args: []string{"namespaces", "set-message-ttl", "public/default", "--messageTTL", "1h"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/messageTTL", "", `3600`}},
		},
		{
			name:   "namespaces get-message-ttl",
			args:   []string{"namespaces", "get-message-ttl", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/messageTTL": {200, `120`}},
			want:   []want{{"GET", "/admin/v2/namespaces/public/default/messageTTL", "", ""}},
			out:    "120\n",
		},
		{
			name: "namespaces set-deduplication",
			args: []string{"namespaces", "set-deduplication", "public/default", "--enable"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/deduplication", "", `true`}},
		},
		{
			name:   "namespaces get-deduplication",
			args:   []string{"namespaces", "get-deduplication", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/deduplication": {200, `false`}},
			want:   []want{{"GET", "/admin/v2/namespaces/public/default/deduplication", "", ""}},
			out:    "false\n",
		},
		{
			name:   "namespaces get-deduplication unset",
			args:   []string{"namespaces", "get-deduplication", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/deduplication": {204, ``}},
			want:   []want{{"GET", "/admin/v2/namespaces/public/default/deduplication", "", ""}},
			out:    "unset (broker default)\n",
		},
		{
			name: "namespaces set-clusters",
			args: []string{"namespaces", "set-clusters", "public/default", "--clusters", "us-east,eu-west"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/replication", "", `["us-east","eu-west"]`}},
		},
		{
			name:   "namespaces get-clusters json",
			args:   []string{"-o", "json", "namespaces", "get-clusters", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/replication": {200, `["us-east"]`}},
			want:   []want{{"GET", "/admin/v2/namespaces/public/default/replication", "", ""}},
			out:    "[\n  \"us-east\"\n]\n",
		},
		{
			name: "namespaces set-backlog-quota",
			args: []string{"namespaces", "set-backlog-quota", "public/default", "--limit", "2G", "--policy", "producer_request_hold"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/backlogQuota", "backlogQuotaType=destination_storage",
				`{"limitSize":2147483648,"limitTime":-1,"policy":"producer_request_hold"}`}},
		},
		{
			name: "namespaces get-backlog-quota",
			args: []string{"namespaces", "get-backlog-quotas", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/backlogQuotaMap": {200,
				`{"destination_storage":{"limitSize":1024,"limitTime":-1,"policy":"producer_exception"}}`}},
			want: []want{{"GET", "/admin/v2/namespaces/public/default/backlogQuotaMap", "", ""}},
			out:  "TYPE                 LIMIT SIZE (BYTES)  LIMIT TIME (SECONDS)  POLICY\ndestination_storage  1024                -1                    producer_exception\n",
		},
		{
			name: "namespaces set-auto-topic-creation",
			args: []string{"namespaces", "set-auto-topic-creation", "public/default", "-e", "-t", "partitioned", "-n", "3"},
			want: []want{{"POST", "/admin/v2/namespaces/public/default/autoTopicCreation", "",
				`{"allowAutoTopicCreation":true,"topicType":"partitioned","defaultNumPartitions":3}`}},
		},
		{
			name: "namespaces get-auto-topic-creation",
			args: []string{"namespaces", "get-auto-topic-creation", "public/default"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/public/default/autoTopicCreation": {200,
				`{"allowAutoTopicCreation":false,"topicType":"non-partitioned"}`}},
			want: []want{{"GET", "/admin/v2/namespaces/public/default/autoTopicCreation", "", ""}},
			out:  "ALLOW  TYPE             PARTITIONS\nfalse  non-partitioned  -\n",
		},
		{
			name: "topics create-partitioned-topic",
			args: []string{"topics", "create-partitioned-topic", "persistent://acme/orders/new", "-p", "4"},
			want: []want{{"PUT", "/admin/v2/persistent/acme/orders/new/partitions", "", ""}},
		},
		{
			name: "topics create short name",
			args: []string{"topics", "create", "t1"},
			want: []want{{"PUT", "/admin/v2/persistent/public/default/t1", "", ""}},
		},
		{
			name: "topics update-partitioned-topic",
			args: []string{"topics", "update-partitioned-topic", "acme/orders/new", "-p", "8"},
			want: []want{{"POST", "/admin/v2/persistent/acme/orders/new/partitions", "", `8`}},
		},
		{
			name:   "topics delete finds a partitioned topic",
			args:   []string{"topics", "delete", "acme/orders/new", "-f"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/acme/orders/new/partitions": {200, `{"partitions":4}`}},
			want: []want{
				{"GET", "/admin/v2/persistent/acme/orders/new/partitions", "", ""},
				{"DELETE", "/admin/v2/persistent/acme/orders/new/partitions", "force=true", ""},
			},
		},
		{
			name:   "topics delete a plain topic",
			args:   []string{"topics", "delete", "t1"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/public/default/t1/partitions": {200, `{"partitions":0}`}},
			want: []want{
				{"GET", "/admin/v2/persistent/public/default/t1/partitions", "", ""},
				{"DELETE", "/admin/v2/persistent/public/default/t1", "force=false", ""},
			},
		},
		{
			name:   "topics subscriptions",
			args:   []string{"topics", "subscriptions", "t1"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/public/default/t1/subscriptions": {200, `["b","a"]`}},
			want:   []want{{"GET", "/admin/v2/persistent/public/default/t1/subscriptions", "", ""}},
			out:    "a\nb\n",
		},
		{
			name: "topics create-subscription earliest",
			args: []string{"topics", "create-subscription", "t1", "-s", "sub", "-m", "earliest"},
			want: []want{{"PUT", "/admin/v2/persistent/public/default/t1/subscription/sub", "",
				`{"ledgerId":-1,"entryId":-1,"partitionIndex":-1}`}},
		},
		{
			name: "topics unsubscribe force",
			args: []string{"topics", "unsubscribe", "t1", "-s", "sub", "-f"},
			want: []want{{"DELETE", "/admin/v2/persistent/public/default/t1/subscription/sub", "force=true", ""}},
		},
		{
			name: "topics skip",
			args: []string{"topics", "skip", "t1", "-s", "sub", "-n", "5"},
			want: []want{{"POST", "/admin/v2/persistent/public/default/t1/subscription/sub/skip/5", "", ""}},
		},
		{
			name: "topics clear-backlog",
			args: []string{"topics", "clear-backlog", "t1", "-s", "sub"},
			want: []want{{"POST", "/admin/v2/persistent/public/default/t1/subscription/sub/skip_all", "", ""}},
		},
		{
			name: "topics reset-cursor to a message",
			args: []string{"topics", "reset-cursor", "t1", "-s", "sub", "-m", "7:3"},
			want: []want{{"POST", "/admin/v2/persistent/public/default/t1/subscription/sub/resetcursor", "", ""}},
		},
		{
			name: "topics expire-messages",
			args: []string{"topics", "expire-messages", "t1", "-s", "sub", "-t", "2m"},
			want: []want{{"POST", "/admin/v2/persistent/public/default/t1/subscription/sub/expireMessages/120", "", ""}},
		},
		{
			name:   "topics stats",
			args:   []string{"topics", "stats", "t1"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/public/default/t1/stats": {200, `{"msgInCounter":42}`}},
			want:   []want{{"GET", "/admin/v2/persistent/public/default/t1/stats", "", ""}},
		},
		{
			name: "topics terminate",
			args: []string{"topics", "terminate", "t1"},
			canned: map[string]cannedResponse{"POST /admin/v2/persistent/public/default/t1/terminate": {200,
				`{"ledgerId":12,"entryId":4,"partitionIndex":-1}`}},
			want: []want{{"POST", "/admin/v2/persistent/public/default/t1/terminate", "", ""}},
			out:  "Topic successfully terminated at 12:4\n",
		},
		{
			name: "topics unload",
			args: []string{"topics", "unload", "t1"},
			want: []want{{"PUT", "/admin/v2/persistent/public/default/t1/unload", "", ""}},
		},
		{
			name: "topics bundle-range",
			args: []string{"topics", "bundle-range", "t1"},
			canned: map[string]cannedResponse{"GET /lookup/v2/topic/persistent/public/default/t1/bundle": {200,
				`0x40000000_0x80000000`}},
			want: []want{{"GET", "/lookup/v2/topic/persistent/public/default/t1/bundle", "", ""}},
			out:  "0x40000000_0x80000000\n",
		},
		{
			name: "namespaces unload",
			args: []string{"namespaces", "unload", "public/default"},
			want: []want{{"PUT", "/admin/v2/namespaces/public/default/unload", "", ""}},
		},
		{
			name: "namespaces unload one bundle",
			args: []string{"namespaces", "unload", "public/default", "-b", "0x00000000_0x40000000"},
			want: []want{{"PUT", "/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload", "", ""}},
		},
		{
			name: "namespaces unload to a broker",
			args: []string{"namespaces", "unload", "public/default", "--bundle", "0x00000000_0x40000000",
				"--destinationBroker", "broker-2:8080"},
			want: []want{{"PUT", "/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload",
				"destinationBroker=broker-2%3A8080", ""}},
		},
		{
			name: "topics lookup",
			args: []string{"topics", "lookup", "t1"},
			canned: map[string]cannedResponse{"GET /lookup/v2/topic/persistent/public/default/t1": {200,
				`{"brokerUrl":"pulsar://localhost:6650","httpUrl":"http://localhost:8080"}`}},
			want: []want{{"GET", "/lookup/v2/topic/persistent/public/default/t1", "", ""}},
			out:  "pulsar://localhost:6650\n",
		},
		{
			name: "topics last-message-id",
			args: []string{"topics", "last-message-id", "t1"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/public/default/t1/lastMessageId": {200,
				`{"ledgerId":3,"entryId":9,"partitionIndex":-1}`}},
			want: []want{{"GET", "/admin/v2/persistent/public/default/t1/lastMessageId", "", ""}},
			out:  "3:9\n",
		},
		{
			name: "clusters create",
			args: []string{"clusters", "create", "eu-west", "--url", "http://eu:8080", "--broker-url", "pulsar://eu:6650"},
			want: []want{{"PUT", "/admin/v2/clusters/eu-west", "", ""}},
		},
		{
			name: "clusters get",
			args: []string{"clusters", "get", "standalone"},
			canned: map[string]cannedResponse{"GET /admin/v2/clusters/standalone": {200,
				`{"serviceUrl":"http://localhost:8080","brokerServiceUrl":"pulsar://localhost:6650"}`}},
			want: []want{{"GET", "/admin/v2/clusters/standalone", "", ""}},
			out: "SERVICE URL            SERVICE URL TLS  BROKER SERVICE URL       BROKER SERVICE URL TLS  PEERS\n" +
				"http://localhost:8080  -                pulsar://localhost:6650  -                       -\n",
		},
		{
			name: "namespaces set-active-region with fallback",
			args: []string{"namespaces", "set-active-region", "acme/orders", "us-east", "--fallback", "eu-west,ap-south"},
			want: []want{{"POST", "/admin/v2/namespaces/acme/orders/activeRegion", "",
				`{"activeRegion":"us-east","fallbackRegions":["eu-west","ap-south"]}`}},
		},
		{
			name:   "namespaces get-active-region",
			args:   []string{"namespaces", "get-active-region", "acme/orders"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/acme/orders/activeRegion": {200, `{"activeRegion":"us-east","fallbackRegions":["eu-west"]}`}},
			want:   []want{{"GET", "/admin/v2/namespaces/acme/orders/activeRegion", "", ""}},
			out:    "us-east (fallback: eu-west)\n",
		},
		{
			name:   "namespaces get-active-region unset",
			args:   []string{"namespaces", "get-active-region", "acme/orders"},
			canned: map[string]cannedResponse{"GET /admin/v2/namespaces/acme/orders/activeRegion": {204, ``}},
			want:   []want{{"GET", "/admin/v2/namespaces/acme/orders/activeRegion", "", ""}},
			out:    "none: every region serves its own clients\n",
		},
		{
			name: "namespaces remove-active-region",
			args: []string{"namespaces", "remove-active-region", "acme/orders"},
			want: []want{{"DELETE", "/admin/v2/namespaces/acme/orders/activeRegion", "", ""}},
		},
		{
			name: "topics set-active-region",
			args: []string{"topics", "set-active-region", "persistent://acme/orders/drill", "eu-west"},
			want: []want{{"POST", "/admin/v2/persistent/acme/orders/drill/activeRegion", "", `{"activeRegion":"eu-west"}`}},
		},
		{
			name:   "topics get-active-region --applied",
			args:   []string{"topics", "get-active-region", "persistent://acme/orders/drill", "--applied"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/acme/orders/drill/activeRegion": {200, `{"activeRegion":"us-east"}`}},
			want:   []want{{"GET", "/admin/v2/persistent/acme/orders/drill/activeRegion", "applied=true", ""}},
			out:    "us-east\n",
		},
		{
			name:   "topics get-active-region unset",
			args:   []string{"topics", "get-active-region", "persistent://acme/orders/drill"},
			canned: map[string]cannedResponse{"GET /admin/v2/persistent/acme/orders/drill/activeRegion": {200, `null`}},
			want:   []want{{"GET", "/admin/v2/persistent/acme/orders/drill/activeRegion", "applied=false", ""}},
			out:    "none: the namespace's active region applies\n",
		},
		{
			name: "topics remove-active-region",
			args: []string{"topics", "remove-active-region", "persistent://acme/orders/drill"},
			want: []want{{"DELETE", "/admin/v2/persistent/acme/orders/drill/activeRegion", "", ""}},
		},
		{
			name: "clusters delete",
			args: []string{"clusters", "delete", "eu-west"},
			want: []want{{"DELETE", "/admin/v2/clusters/eu-west", "", ""}},
		},
		{
			name: "clusters update-cluster-migration",
			args: []string{"clusters", "update-cluster-migration", "us-east", "--migrated", "--broker-url", "pulsar://eu:6650",
				"--service-url", "http://eu:8080"},
			want: []want{{"POST", "/admin/v2/clusters/us-east/migrate", "migrated=true",
				`{"serviceUrl":"http://eu:8080","brokerServiceUrl":"pulsar://eu:6650"}`}},
		},
		{
			name: "clusters update-cluster-migration, recorded only",
			args: []string{"clusters", "update-cluster-migration", "us-east", "--broker-url", "pulsar://eu:6650"},
			want: []want{{"POST", "/admin/v2/clusters/us-east/migrate", "migrated=false", `{"brokerServiceUrl":"pulsar://eu:6650"}`}},
		},
		{
			name: "clusters get-cluster-migration",
			args: []string{"clusters", "get-cluster-migration", "us-east"},
			canned: map[string]cannedResponse{"GET /admin/v2/clusters/us-east/migrate": {200,
				`{"migrated":true,"migratedClusterUrl":{"brokerServiceUrl":"pulsar://eu:6650"}}`}},
			want: []want{{"GET", "/admin/v2/clusters/us-east/migrate", "", ""}},
			out:  "{\n  \"migrated\": true,\n  \"migratedClusterUrl\": {\n    \"brokerServiceUrl\": \"pulsar://eu:6650\"\n  }\n}\n",
		},
		{
			name:   "brokers list",
			args:   []string{"brokers", "list", "standalone"},
			canned: map[string]cannedResponse{"GET /admin/v2/brokers/standalone": {200, `["localhost:8080"]`}},
			want:   []want{{"GET", "/admin/v2/brokers/standalone", "", ""}},
			out:    "localhost:8080\n",
		},
		{
			name:   "brokers healthcheck",
			args:   []string{"brokers", "healthcheck"},
			canned: map[string]cannedResponse{"GET /admin/v2/brokers/health": {200, `ok`}},
			want:   []want{{"GET", "/admin/v2/brokers/health", "topicVersion=V1", ""}},
			out:    "ok\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAdmin(t, tc.canned)
			out, err := runAdmin(t, f.URL, tc.args...)
			if err != nil {
				t.Fatalf("meridian admin %s: %v", strings.Join(tc.args, " "), err)
			}
			got := f.requests()
			if len(got) != len(tc.want) {
				t.Fatalf("got %d requests %+v, want %d %+v", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Method != w.method || g.Path != w.path || (w.query != "" && g.Query != w.query) {
					t.Errorf("request %d: %s %s?%s, want %s %s?%s", i, g.Method, g.Path, g.Query, w.method, w.path, w.query)
				}
				if w.body != "" && !jsonEqual(t, g.Body, w.body) {
					t.Errorf("request %d body: %s, want %s", i, g.Body, w.body)
				}
			}
			if tc.out != "" && out != tc.out {
				t.Errorf("stdout:\n%q\nwant\n%q", out, tc.out)
			}
			if tc.out == "" && tc.want[len(tc.want)-1].method != "GET" && out != "" {
				t.Errorf("a write printed %q; want nothing, as pulsar-admin", out)
			}
		})
	}
}

// TestAdminStatsJSON checks that statistics print as JSON holding the
// server's values, in both output modes.
func TestAdminStatsJSON(t *testing.T) {
	f := newFakeAdmin(t, map[string]cannedResponse{"GET /admin/v2/persistent/public/default/t1/stats": {200,
		`{"msgInCounter":42,"subscriptions":{"s":{"msgBacklog":7}}}`}})
	for _, mode := range []string{"table", "json"} {
		out, err := runAdmin(t, f.URL, "-o", mode, "topics", "stats", "t1")
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			MsgInCounter  int64 `json:"msgInCounter"`
			Subscriptions map[string]struct {
				MsgBacklog int64 `json:"msgBacklog"`
			} `json:"subscriptions"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: output is not JSON: %v\n%s", mode, err, out)
		}
		if v.MsgInCounter != 42 || v.Subscriptions["s"].MsgBacklog != 7 {
			t.Errorf("%s: got %+v", mode, v)
		}
	}
}

// TestAdminStatsRaw checks that topic stats print every field the server
// sent, also those pulsaradmin's types do not have (the replication
// stats' lastError), and that partitioned stats pass perPartition.
func TestAdminStatsRaw(t *testing.T) {
	body := `{"replication":{"eu-west":{"connected":false,"lastError":"remote refused: not authorized"}}}`
	f := newFakeAdmin(t, map[string]cannedResponse{
		"GET /admin/v2/persistent/public/default/t1/stats":             {200, body},
		"GET /admin/v2/persistent/public/default/p1/partitioned-stats": {200, body},
	})
	for _, args := range [][]string{{"topics", "stats", "t1"}, {"topics", "partitioned-stats", "p1", "--per-partition"}} {
		out, err := runAdmin(t, f.URL, args...)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]map[string]map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: output is not JSON: %v\n%s", args, err, out)
		}
		if got := v["replication"]["eu-west"]["lastError"]; got != "remote refused: not authorized" {
			t.Errorf("%v: lastError = %v; output:\n%s", args, got, out)
		}
	}
	reqs := f.requests()
	if last := reqs[len(reqs)-1]; last.Query != "perPartition=true" {
		t.Errorf("partitioned-stats query = %q, want perPartition=true", last.Query)
	}
}

// TestAdminErrors checks that failures say what the server said, or that
// nothing answered, and that bad flags are refused before any request.
func TestAdminErrors(t *testing.T) {
	f := newFakeAdmin(t, map[string]cannedResponse{
		"GET /admin/v2/tenants/nope":                   {404, `{"reason":"Tenant does not exist"}`},
		"PUT /admin/v2/namespaces/public/default":      {409, `{"reason":"Namespace already exists"}`},
		"GET /admin/v2/namespaces/secret/ns/retention": {403, `{"reason":"Don't have permission to administrate resources on this tenant"}`},
		"GET /admin/v2/clusters":                       {500, `plain text failure`},
	})
	cases := []struct {
		args []string
		want []string // substrings of the error
	}{
		{[]string{"tenants", "get", "nope"}, []string{"Tenant does not exist", "HTTP 404"}},
		{[]string{"namespaces", "create", "public/default"}, []string{"Namespace already exists", "HTTP 409"}},
		{[]string{"namespaces", "get-retention", "secret/ns"}, []string{"permission", "HTTP 403", "lacks the permission"}},
		{[]string{"clusters", "list"}, []string{"plain text failure", "HTTP 500"}},
	}
	for _, tc := range cases {
		_, err := runAdmin(t, f.URL, tc.args...)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.args, err, w)
			}
		}
	}

	before := len(f.requests())
	refused := []struct {
		args []string
		want string
	}{
		{[]string{"-o", "yaml", "tenants", "list"}, "--output"},
		{[]string{"--token", "a", "--token-file", "b", "tenants", "list"}, "one way to authenticate"},
		{[]string{"--auth-plugin", "basic", "--auth-params", "x", "tenants", "list"}, "not supported"},
		{[]string{"--tls-cert-file", "c.pem", "tenants", "list"}, "go together"},
		{[]string{"namespaces", "grant-permission", "public/default", "--role", "r", "--actions", "fly"}, "--actions"},
		{[]string{"namespaces", "grant-permission", "public/default", "--actions", "produce"}, "--role"},
		{[]string{"namespaces", "set-retention", "public/default", "--size", "10X", "--time", "1h"}, "--size"},
		{[]string{"namespaces", "set-deduplication", "public/default"}, "--enable"},
		{[]string{"namespaces", "set-backlog-quota", "public/default", "--limit", "1G", "--policy", "drop"}, "--policy"},
		{[]string{"namespaces", "create", "justone"}, "tenant/namespace"},
		{[]string{"topics", "create-partitioned-topic", "t1"}, "--partitions"},
		{[]string{"topics", "create", "a/b"}, "topic"},
		{[]string{"topics", "reset-cursor", "t1", "-s", "s"}, "exactly one"},
		{[]string{"topics", "expire-messages", "t1", "-t", "1h"}, "--subscription"},
		{[]string{"tenants", "update", "public"}, "nothing to change"},
		{[]string{"clusters", "create", "c"}, "--url"},
		{[]string{"namespaces", "unload", "public/default", "-d", "broker-2:8080"}, "--bundle"},
	}
	for _, tc := range refused {
		_, err := runAdmin(t, f.URL, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
	if got := f.requests(); len(got) != before {
		t.Errorf("refused commands sent requests: %+v", got[before:])
	}

	// Nothing listening: say so, and name the URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, err = runAdmin(t, dead, "tenants", "list")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the admin API at "+dead) {
		t.Errorf("nothing listening: error %v", err)
	}
}

// TestAdminAuthentication checks that each way of giving credentials sends
// the same bearer token.
func TestAdminAuthentication(t *testing.T) {
	f := newFakeAdmin(t, map[string]cannedResponse{"GET /admin/v2/tenants": {200, `[]`}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{
		{"--token", "tok-123"},
		{"--token-file", tokenFile},
		{"--auth-plugin", "token", "--auth-params", "token:tok-123"},
		{"--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "file:" + tokenFile},
	} {
		n := len(f.requests())
		if _, err := runAdmin(t, f.URL, append(flags, "tenants", "list")...); err != nil {
			t.Fatalf("%v: %v", flags, err)
		}
		if got := f.requests()[n].Auth; got != "Bearer tok-123" {
			t.Errorf("%v: Authorization %q, want Bearer tok-123", flags, got)
		}
	}
}

// TestParseSizeAndSeconds covers the size and time arguments.
func TestParseSizeAndSeconds(t *testing.T) {
	sizes := map[string]int64{"-1": -1, "0": 0, "4096": 4096, "10k": 10 << 10, "10M": 10 << 20, "2g": 2 << 30, "1T": 1 << 40}
	for in, want := range sizes {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-2", "1.5G", "10X", "99999999999T"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): no error", bad)
		}
	}
	secs := map[string]int64{"-1": -1, "0": 0, "90": 90, "2m": 120, "3h": 3 * 3600, "2d": 2 * 86400, "1w": 7 * 86400}
	for in, want := range secs {
		if got, err := parseSeconds(in); err != nil || got != want {
			t.Errorf("parseSeconds(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "h", "-5", "1.5h"} {
		if _, err := parseSeconds(bad); err == nil {
			t.Errorf("parseSeconds(%q): no error", bad)
		}
	}
}

// TestAdminAgainstRegion runs the set-up steps of pulsar-client-go's
// scripts/pulsar-test-service-start.sh, and a topic's life, against a real
// standalone region serving the real admin API.
func TestAdminAgainstRegion(t *testing.T) {
	webURL, run := startAdminRegion(t)
	run("tenants", "update", "public", "-r", "anonymous")
	run("namespaces", "grant-permission", "public/default", "--actions", "produce,consume", "--role", "anonymous")
	run("tenants", "create", "private")
	run("namespaces", "create", "private/auth")
	run("namespaces", "grant-permission", "private/auth", "--actions", "produce,consume", "--role", "token-principal")

	if out := run("tenants", "get", "public"); !strings.Contains(out, "anonymous") {
		t.Errorf("tenants get public:\n%s", out)
	}
	if out := run("tenants", "list"); !strings.Contains(out, "private\n") || !strings.Contains(out, "public\n") {
		t.Errorf("tenants list:\n%s", out)
	}
	if out := run("namespaces", "list", "private"); out != "private/auth\n" {
		t.Errorf("namespaces list private: %q", out)
	}
	if out := run("namespaces", "permissions", "private/auth"); !strings.Contains(out, "token-principal") ||
		!strings.Contains(out, "produce") || !strings.Contains(out, "consume") {
		t.Errorf("namespaces permissions private/auth:\n%s", out)
	}
	run("namespaces", "set-retention", "private/auth", "--size", "10M", "--time", "1h")
	if out := run("-o", "json", "namespaces", "get-retention", "private/auth"); !jsonEqual(t, out,
		`{"retentionTimeInMinutes":60,"retentionSizeInMB":10}`) {
		t.Errorf("get-retention: %s", out)
	}
	run("namespaces", "set-message-ttl", "private/auth", "--messageTTL", "120")
	if out := run("namespaces", "get-message-ttl", "private/auth"); out != "120\n" {
		t.Errorf("get-message-ttl: %q", out)
	}

	topic := "persistent://private/auth/orders"
	run("topics", "create-partitioned-topic", topic, "-p", "2")
	if out := run("topics", "list", "private/auth"); !strings.Contains(out, topic+"\n") {
		t.Errorf("topics list:\n%s", out)
	}
	run("topics", "create-subscription", topic+"-partition-0", "-s", "audit")
	if out := run("topics", "subscriptions", topic+"-partition-0"); out != "audit\n" {
		t.Errorf("subscriptions: %q", out)
	}
	if out := run("topics", "lookup", topic+"-partition-0"); !strings.HasPrefix(out, "pulsar://") {
		t.Errorf("lookup: %q", out)
	}
	run("topics", "delete", topic, "-f")
	if out := run("topics", "list", "private/auth"); strings.Contains(out, topic) {
		t.Errorf("after delete, topics list:\n%s", out)
	}

	run("namespaces", "set-active-region", "private/auth", "standalone")
	if out := run("namespaces", "get-active-region", "private/auth"); out != "standalone\n" {
		t.Errorf("get-active-region: %q", out)
	}
	for _, bad := range [][]string{
		{"namespaces", "set-active-region", "private/auth", "no-such-region"},
		{"namespaces", "set-active-region", "private/auth", "standalone", "--fallback", "standalone"},
		{"namespaces", "set-active-region", "private/auth", "standalone", "--fallback", "no-such-region"},
	} {
		if _, err := runAdmin(t, webURL, bad...); err == nil || !strings.Contains(err.Error(), "HTTP 412") {
			t.Errorf("%v: %v, want a refusal with HTTP 412", bad, err)
		}
	}
	if out := run("-o", "json", "namespaces", "get-active-region", "private/auth"); !jsonEqual(t, out, `{"activeRegion":"standalone"}`) {
		t.Errorf("get-active-region after refused changes: %s", out)
	}
	run("namespaces", "remove-active-region", "private/auth")
	if out := run("namespaces", "get-active-region", "private/auth"); !strings.HasPrefix(out, "none") {
		t.Errorf("get-active-region after remove: %q", out)
	}

	// A refused write says why and changes nothing.
	_, err := runAdmin(t, webURL, "tenants", "create", "bad", "-c", "no-such-cluster")
	if err == nil || !strings.Contains(err.Error(), "HTTP 4") {
		t.Errorf("tenant with an unknown cluster: %v", err)
	}
	if out := run("tenants", "list"); strings.Contains(out, "bad") {
		t.Errorf("refused tenant was created:\n%s", out)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
