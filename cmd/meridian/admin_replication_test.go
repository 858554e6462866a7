package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/node"
)

// TestAdminReplicationRequests checks the requests of the replication
// verbs: pulsar-admin's paths and bodies, with its flag defaults.
func TestAdminReplicationRequests(t *testing.T) {
	const (
		nsPath    = "/admin/v2/namespaces/acme/orders/replicatorDispatchRate"
		topicPath = "/admin/v2/persistent/acme/orders/t/replicatorDispatchRate"
		replPath  = "/admin/v2/persistent/acme/orders/t/replication"
	)
	for _, tc := range []struct {
		name         string
		args         []string
		method, path string
		body         string // "" is not checked
	}{
		{"namespace set", []string{"namespaces", "set-replicator-dispatch-rate", "acme/orders", "--msg-dispatch-rate", "50", "--dispatch-rate-period", "2"},
			"POST", nsPath, `{"dispatchThrottlingRateInMsg":50,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":2}`},
		{"namespace set bytes", []string{"namespaces", "set-replicator-dispatch-rate", "acme/orders", "--byte-dispatch-rate", "1048576"},
			"POST", nsPath, `{"dispatchThrottlingRateInMsg":-1,"dispatchThrottlingRateInByte":1048576,"ratePeriodInSecond":1}`},
		{"namespace remove", []string{"namespaces", "remove-replicator-dispatch-rate", "acme/orders"}, "DELETE", nsPath, ""},
		{"topic set", []string{"topics", "set-replicator-dispatch-rate", "persistent://acme/orders/t", "--msg-dispatch-rate", "10"},
			"POST", topicPath, `{"dispatchThrottlingRateInMsg":10,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1,"relativeToPublishRate":false}`},
		{"topic remove", []string{"topics", "remove-replicator-dispatch-rate", "persistent://acme/orders/t"}, "DELETE", topicPath, ""},
		{"topic set clusters", []string{"topics", "set-replication-clusters", "persistent://acme/orders/t", "--clusters", "us-east,eu-west"},
			"POST", replPath, `["us-east","eu-west"]`},
		{"topic remove clusters", []string{"topics", "remove-replication-clusters", "persistent://acme/orders/t"}, "DELETE", replPath, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAdmin(t, nil)
			if out, err := runAdmin(t, f.URL, tc.args...); err != nil || out != "" {
				t.Fatalf("meridian admin %s: %q, %v", strings.Join(tc.args, " "), out, err)
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
	for _, bad := range [][]string{
		{"namespaces", "set-replicator-dispatch-rate", "acme/orders", "--dispatch-rate-period", "0"},
		{"topics", "set-replication-clusters", "persistent://acme/orders/t"},
	} {
		f := newFakeAdmin(t, nil)
		if _, err := runAdmin(t, f.URL, bad...); err == nil || len(f.requests()) != 0 {
			t.Errorf("meridian admin %s: %v, %d requests; want an error before any request", strings.Join(bad, " "), err, len(f.requests()))
		}
	}
}

// TestAdminReplicationAgainstRegion sets, reads and removes the replicator
// dispatch rates and a topic's replication clusters on a real region.
func TestAdminReplicationAgainstRegion(t *testing.T) {
	webURL, run := startAdminRegion(t)

	if out := run("namespaces", "get-replicator-dispatch-rate", "public/default"); out != "null\n" {
		t.Errorf("unset namespace rate: %q, want null", out)
	}
	run("namespaces", "set-replicator-dispatch-rate", "public/default", "--msg-dispatch-rate", "50", "--byte-dispatch-rate", "4096", "--dispatch-rate-period", "3")
	if out := run("namespaces", "get-replicator-dispatch-rate", "public/default"); !jsonEqual(t, out,
		`{"dispatchThrottlingRateInMsg":50,"dispatchThrottlingRateInByte":4096,"ratePeriodInSecond":3}`) {
		t.Errorf("namespace rate: %s", out)
	}
	run("namespaces", "remove-replicator-dispatch-rate", "public/default")
	if out := run("namespaces", "get-replicator-dispatch-rate", "public/default"); out != "null\n" {
		t.Errorf("removed namespace rate: %q, want null", out)
	}

	topic := "persistent://public/default/rated"
	run("topics", "create", topic)
	run("topics", "set-replicator-dispatch-rate", topic, "--msg-dispatch-rate", "20")
	if out := run("topics", "get-replicator-dispatch-rate", topic); !jsonEqual(t, out,
		`{"dispatchThrottlingRateInMsg":20,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1,"relativeToPublishRate":false}`) {
		t.Errorf("topic rate: %s", out)
	}
	run("topics", "remove-replicator-dispatch-rate", topic)
	if out := run("topics", "get-replicator-dispatch-rate", topic); out != "null\n" {
		t.Errorf("removed topic rate: %q, want null", out)
	}

	cluster := strings.TrimSpace(run("clusters", "list"))
	if out := run("topics", "get-replication-clusters", topic); out != "" {
		t.Errorf("unset topic clusters: %q, want none", out)
	}
	run("topics", "set-replication-clusters", topic, "--clusters", cluster)
	if out := run("topics", "get-replication-clusters", topic); out != cluster+"\n" {
		t.Errorf("topic clusters: %q, want %s", out, cluster)
	}
	if _, err := runAdmin(t, webURL, "topics", "set-replication-clusters", topic, "--clusters", "no-such-cluster"); err == nil {
		t.Errorf("a topic replicating to an unknown cluster was accepted")
	}
	run("topics", "remove-replication-clusters", topic)
	if out := run("topics", "get-replication-clusters", topic); out != "" {
		t.Errorf("removed topic clusters: %q, want none", out)
	}
}

// startAdminRegion starts a standalone region serving the real admin API
// (skipped with -short) and returns its URL and a runner of `meridian
// admin` against it that fails the test on an error.
func startAdminRegion(t *testing.T) (string, func(args ...string) string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a region")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return serveAdmin(t, startRegion(ctx, t))
}

// serveAdmin serves region's admin API, and returns its URL and a runner
// of `meridian admin` against it that fails the test on an error.
func serveAdmin(t *testing.T, region *node.Broker) (string, func(args ...string) string) {
	t.Helper()
	h, err := admin.New(admin.DefaultConfig(), region.Service(), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(h)
	t.Cleanup(web.Close)
	return web.URL, func(args ...string) string {
		t.Helper()
		out, err := runAdmin(t, web.URL, args...)
		if err != nil {
			t.Fatalf("meridian admin %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
}
