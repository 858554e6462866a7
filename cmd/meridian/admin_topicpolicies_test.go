package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMultiLetterShorthands: pulsar-admin's short flags of more than one
// letter work, wherever they stand, as their long flags do.
func TestMultiLetterShorthands(t *testing.T) {
	f := newFakeAdmin(t, nil)
	if _, err := runAdmin(t, f.URL, "namespaces", "set-message-ttl", "public/default", "-ttl", "120"); err != nil {
		t.Fatal(err)
	}
	if _, err := runAdmin(t, f.URL, "topics", "set-backlog-quota", "-lt", "3600", "t", "-p", "producer_exception", "-t", "message_age"); err != nil {
		t.Fatal(err)
	}
	got := f.requests()
	if len(got) != 2 {
		t.Fatalf("requests %+v, want 2", got)
	}
	if got[0].Path != "/admin/v2/namespaces/public/default/messageTTL" || got[0].Body != "120" {
		t.Errorf("-ttl 120 sent %s %s", got[0].Path, got[0].Body)
	}
	if got[1].Path != "/admin/v2/persistent/public/default/t/backlogQuota" || got[1].Query != "backlogQuotaType=message_age" ||
		!jsonEqual(t, got[1].Body, `{"limitSize":-1,"limitTime":3600,"policy":"producer_exception"}`) {
		t.Errorf("-lt 3600 sent %s?%s %s", got[1].Path, got[1].Query, got[1].Body)
	}
}

// TestAdminPrintsServerWarnings: every Warning header of an answer is
// printed to stderr, its text unquoted, and the command still succeeds.
func TestAdminPrintsServerWarnings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "offload is not built: the policy is stored, and no data is offloaded"`)
		w.Header().Add("Warning", `299 meridian "a \"quoted\" word" "Sat, 05 Dec 2026 22:00:00 GMT"`)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	out, stderr, err := runAdminStreams(t, srv.URL, "topics", "set-max-message-size", "t", "-m", "1024")
	if err != nil || out != "" {
		t.Fatalf("%q, %v", out, err)
	}
	want := "meridian: warning: offload is not built: the policy is stored, and no data is offloaded\n" +
		"meridian: warning: a \"quoted\" word\n"
	if stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for in, want := range map[string]string{
		`299 - "plain"`:   "plain",
		`no quotes`:       "no quotes",
		`299 - "unclosed`: `299 - "unclosed`,
	} {
		if got := warningText(in); got != want {
			t.Errorf("warningText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAdminPolicyRequests checks the requests of the new verbs: the paths,
// queries and bodies pulsar-admin sends for the same flags.
func TestAdminPolicyRequests(t *testing.T) {
	const tp = "/admin/v2/persistent/public/default/t/"
	for _, tc := range []struct {
		args                      []string
		method, path, query, body string // query and body "" are not checked
	}{
		{[]string{"topics", "set-retention", "t", "-s", "1G", "-t", "1d"}, "POST", tp + "retention", "",
			`{"retentionTimeInMinutes":1440,"retentionSizeInMB":1024}`},
		{[]string{"topics", "set-message-ttl", "t", "-t", "1h"}, "POST", tp + "messageTTL", "messageTTL=3600", ""},
		{[]string{"topics", "get-retention", "t", "-ap"}, "GET", tp + "retention", "applied=true", ""},
		{[]string{"topics", "set-deduplication", "t", "-d"}, "POST", tp + "deduplicationEnabled", "", `false`},
		{[]string{"topics", "remove-backlog-quota", "t", "-t", "message_age"}, "DELETE", tp + "backlogQuota", "backlogQuotaType=message_age", ""},
		{[]string{"topics", "set-persistence", "t", "-e", "3", "-w", "2", "-a", "2"}, "POST", tp + "persistence", "",
			`{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":0}`},
		{[]string{"topics", "set-subscription-dispatch-rate", "t", "-md", "10", "-bd", "2048", "-dt", "5", "-rp"}, "POST", tp + "subscriptionDispatchRate", "",
			`{"dispatchThrottlingRateInMsg":10,"dispatchThrottlingRateInByte":2048,"ratePeriodInSecond":5,"relativeToPublishRate":true}`},
		{[]string{"topics", "set-publish-rate", "t", "-m", "100"}, "POST", tp + "publishRate", "",
			`{"publishThrottlingRateInMsg":100,"publishThrottlingRateInByte":-1}`},
		{[]string{"topics", "set-subscribe-rate", "t", "-sr", "5", "-st", "10"}, "POST", tp + "subscribeRate", "",
			`{"subscribeThrottlingRatePerConsumer":5,"ratePeriodInSecond":10}`},
		{[]string{"topics", "set-delayed-delivery", "t", "-e", "-t", "10s"}, "POST", tp + "delayedDelivery", "",
			`{"tickTime":10000,"active":true}`},
		{[]string{"topics", "set-max-message-size", "t", "-m", "1024"}, "POST", tp + "maxMessageSize", "", `1024`},
		{[]string{"topics", "grant-permission", "t", "--role", "r", "--actions", "produce,consume"}, "POST", tp + "permissions/r", "",
			`["produce","consume"]`},
		{[]string{"topics", "get-message-id", "t", "-d", "2021-06-28T16:53:08Z"}, "GET", tp + "messageid/1624899188000", "", ""},
		{[]string{"topics", "get-message-by-id", "t", "-l", "7", "-e", "3"}, "GET", tp + "ledger/7/entry/3", "", ""},
		{[]string{"namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "backward"}, "PUT",
			"/admin/v2/namespaces/public/default/schemaCompatibilityStrategy", "", `"BACKWARD"`},
		{[]string{"namespaces", "remove-retention", "public/default"}, "DELETE", "/admin/v2/namespaces/public/default/retention", "", ""},
		{[]string{"namespaces", "set-max-topics-per-namespace", "public/default", "-t", "5"}, "POST",
			"/admin/v2/namespaces/public/default/maxTopicsPerNamespace", "", `5`},
		{[]string{"namespaces", "set-offload-deletion-lag", "public/default", "-l", "1h"}, "PUT",
			"/admin/v2/namespaces/public/default/offloadDeletionLagMs", "", `3600000`},
		{[]string{"namespaces", "set-bookie-affinity-group", "public/default", "-pg", "a", "-sg", "b"}, "POST",
			"/admin/v2/namespaces/public/default/persistence/bookieAffinity", "",
			`{"bookkeeperAffinityGroupPrimary":"a","bookkeeperAffinityGroupSecondary":"b"}`},
		{[]string{"topics", "set-compaction-threshold", "t", "-t", "10M"}, "POST", tp + "compactionThreshold", "", `10485760`},
		{[]string{"topics", "get-compaction-threshold", "t", "-ap"}, "GET", tp + "compactionThreshold", "applied=true", ""},
		{[]string{"topics", "remove-compaction-threshold", "t"}, "DELETE", tp + "compactionThreshold", "", ""},
		{[]string{"namespaces", "set-max-unacked-messages-per-consumer", "public/default", "-c", "7"}, "POST",
			"/admin/v2/namespaces/public/default/maxUnackedMessagesPerConsumer", "", `7`},
		{[]string{"namespaces", "set-max-unacked-messages-per-subscription", "public/default", "--max-unacked-messages-per-subscription", "70"}, "POST",
			"/admin/v2/namespaces/public/default/maxUnackedMessagesPerSubscription", "", `70`},
		{[]string{"namespaces", "remove-max-unacked-messages-per-consumer", "public/default"}, "DELETE",
			"/admin/v2/namespaces/public/default/maxUnackedMessagesPerConsumer", "", ""},
		{[]string{"namespaces", "set-schema-validation-enforce", "public/default", "-e"}, "POST",
			"/admin/v2/namespaces/public/default/schemaValidationEnforced", "", `true`},
		{[]string{"namespaces", "get-schema-validation-enforce", "public/default"}, "GET",
			"/admin/v2/namespaces/public/default/schemaValidationEnforced", "", ""},
		{[]string{"brokers", "update-dynamic-config", "-c", "allowAutoTopicCreation", "-v", "false"}, "POST",
			"/admin/v2/brokers/configuration/allowAutoTopicCreation/false", "", ""},
		{[]string{"schemas", "delete", "t", "-f"}, "DELETE", "/admin/v2/schemas/public/default/t/schema", "force=true", ""},
	} {
		f := newFakeAdmin(t, nil)
		runAdmin(t, f.URL, tc.args...) // a GET's 404 is no matter: only the request is checked
		got := f.requests()
		if len(got) != 1 {
			t.Errorf("%v: requests %+v, want one", tc.args, got)
			continue
		}
		g := got[0]
		if g.Method != tc.method || g.Path != tc.path || (tc.query != "" && g.Query != tc.query) {
			t.Errorf("%v: %s %s?%s, want %s %s?%s", tc.args, g.Method, g.Path, g.Query, tc.method, tc.path, tc.query)
		}
		if tc.body != "" && !jsonEqual(t, g.Body, tc.body) {
			t.Errorf("%v: body %s, want %s", tc.args, g.Body, tc.body)
		}
	}
	for _, bad := range [][]string{
		{"topics", "set-persistence", "t", "-e", "1", "-w", "2", "-a", "1"},
		{"topics", "set-deduplication", "t"},
		{"topics", "get-message-id", "t", "-d", "yesterday"},
		{"topics", "set-message-ttl", "t"},
		{"topics", "set-compaction-threshold", "t", "-t", "lots"},
		{"namespaces", "set-max-unacked-messages-per-consumer", "public/default"},
		{"namespaces", "set-schema-validation-enforce", "public/default"},
		{"namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "SOMETIMES"},
		{"brokers", "update-dynamic-config", "-c", "x"},
		{"schemas", "upload", "t"},
	} {
		f := newFakeAdmin(t, nil)
		if _, err := runAdmin(t, f.URL, bad...); err == nil || len(f.requests()) != 0 {
			t.Errorf("%v: %v, %d requests; want an error before any request", bad, err, len(f.requests()))
		}
	}
}
