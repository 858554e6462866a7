package main

import (
	"strings"
	"testing"
)

func init() {
	// What the walk of the routes (admin_routes_test.go) gives the verbs
	// of this file that need flags.
	walkFlags["namespaces set-delayed-delivery"] = [][]string{{"-e"}}
	walkFlags["namespaces set-offload-policies"] = [][]string{{"-d", "aws-s3"}}
	walkFlags["namespaces set-compaction-threshold"] = [][]string{{"-t", "1G"}}
	// The policies the server refuses (cluster/admin/unbuilt.go): no verb
	// sets what nothing would act on.
	for _, route := range []string{
		"/admin/v2/namespaces/{tenant}/{namespace}/inactiveTopicPolicies",
		"/admin/v2/namespaces/{tenant}/{namespace}/encryptionRequired",
		"/admin/v2/persistent/{tenant}/{namespace}/{topic}/inactiveTopicPolicies",
		"/admin/v2/non-persistent/{tenant}/{namespace}/{topic}/inactiveTopicPolicies",
	} {
		for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
			routesWithoutVerb[method+" "+route] = "refused by the server (405): Meridian has no such feature"
		}
	}
}

// TestNamespacePolicyVerbs checks the requests and bodies of the set-,
// get- and remove- verbs of admin_nspolicies.go, with pulsar-admin's flags.
func TestNamespacePolicyVerbs(t *testing.T) {
	const ns = "/admin/v2/namespaces/acme/app/"
	cases := []struct {
		args         []string
		method, path string
		body         string // "" is not checked
	}{
		{[]string{"set-publish-rate", "acme/app", "-m", "100", "--byte-publish-rate", "2048"}, "POST", ns + "publishRate",
			`{"publishThrottlingRateInMsg":100,"publishThrottlingRateInByte":2048}`},
		{[]string{"set-dispatch-rate", "acme/app", "--msg-dispatch-rate", "10", "--dispatch-rate-period", "2"}, "POST", ns + "dispatchRate",
			`{"dispatchThrottlingRateInMsg":10,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":2,"relativeToPublishRate":false}`},
		{[]string{"set-subscription-dispatch-rate", "acme/app", "--byte-dispatch-rate", "1000"}, "POST", ns + "subscriptionDispatchRate",
			`{"dispatchThrottlingRateInMsg":-1,"dispatchThrottlingRateInByte":1000,"ratePeriodInSecond":1,"relativeToPublishRate":false}`},
		{[]string{"set-subscribe-rate", "acme/app", "--subscribe-rate", "5"}, "POST", ns + "subscribeRate",
			`{"subscribeThrottlingRatePerConsumer":5,"ratePeriodInSecond":30}`},
		{[]string{"set-delayed-delivery", "acme/app", "-e", "-t", "2s"}, "POST", ns + "delayedDelivery",
			`{"active":true,"tickTime":2000,"maxDelayInMillis":0}`},
		{[]string{"set-persistence", "acme/app", "-e", "2", "-w", "2", "-a", "1"}, "POST", ns + "persistence",
			`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":0}`},
		{[]string{"set-offload-policies", "acme/app", "-d", "aws-s3", "-b", "bkt"}, "POST", ns + "offloadPolicies",
			`{"managedLedgerOffloadDriver":"aws-s3","s3ManagedLedgerOffloadBucket":"bkt","s3ManagedLedgerOffloadRegion":"","s3ManagedLedgerOffloadServiceEndpoint":""}`},
		{[]string{"set-compaction-threshold", "acme/app", "-t", "10M"}, "POST", ns + "compactionThreshold", `10485760`},
		{[]string{"get-publish-rate", "acme/app"}, "GET", ns + "publishRate", ""},
		{[]string{"remove-persistence", "acme/app"}, "DELETE", ns + "persistence", ""},
		{[]string{"remove-offload-policies", "acme/app"}, "DELETE", ns + "removeOffloadPolicies", ""},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFakeAdmin(t, map[string]cannedResponse{"GET " + tc.path: {200, `{"publishThrottlingRateInMsg":100}`}})
			if _, err := runAdmin(t, f.URL, append([]string{"namespaces"}, tc.args...)...); err != nil {
				t.Fatal(err)
			}
			got := f.requests()
			if len(got) != 1 || got[0].Method != tc.method || got[0].Path != tc.path {
				t.Fatalf("requests %+v, want one %s %s", got, tc.method, tc.path)
			}
			if tc.body != "" && !jsonEqual(t, got[0].Body, tc.body) {
				t.Errorf("body %s, want %s", got[0].Body, tc.body)
			}
		})
	}

	// A get of an unset policy prints null; a bad flag value sends nothing.
	f := newFakeAdmin(t, map[string]cannedResponse{"GET " + ns + "persistence": {204, ""}})
	if out, err := runAdmin(t, f.URL, "namespaces", "get-persistence", "acme/app"); err != nil || out != "null\n" {
		t.Errorf("unset persistence: %q, %v; want null", out, err)
	}
	if _, err := runAdmin(t, f.URL, "namespaces", "set-persistence", "acme/app", "-e", "1", "-w", "2", "-a", "1"); err == nil {
		t.Error("E < Qw was sent")
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want only the get", n)
	}
}
