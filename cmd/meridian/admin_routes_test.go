package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
)

// routesWithoutVerb are the admin routes that `meridian admin` has no
// verb for, each with the reason. A route the server gains fails
// TestEveryRouteHasAVerb until a verb reaches it or it is listed here.
var routesWithoutVerb = map[string]string{
	"GET /admin/v2/brokers/ready": "a readiness probe for load balancers and orchestrators; " +
		"brokers healthcheck is the operator's check",
	"GET /admin/v2/clusters/{cluster}/peers": "what a client's geo-replication lookup reads; " +
		"clusters get shows the cluster's record",
	"POST /admin/v2/schemas/{tenant}/{namespace}/{topic}/version": "a client's call (the version of a schema it " +
		"holds); pulsar-admin has no verb for it",
	"GET /lookup/v2/destination/persistent/{tenant}/{namespace}/{topic}": "the old-style lookup path of old clients; " +
		"topics lookup uses /lookup/v2/topic",
	"GET /lookup/v2/destination/persistent/{tenant}/{namespace}/{topic}/bundle": "the old-style path of " +
		"topics bundle-range's request",
}

func init() {
	// Fences are held by meridian drill --cut isolate for the length of
	// its outage, under a TTL it renews (drill.go); nobody holds one by hand.
	for _, p := range []string{"GET /fences", "POST /fences/{name}", "POST /fences/{name}/renew", "DELETE /fences/{name}"} {
		method, path, _ := strings.Cut(p, " ")
		routesWithoutVerb[method+" /admin/v2/namespaces/{tenant}/{namespace}"+path] = "a drill's fence: meridian drill holds it"
	}
}

// walkFlags are the flags each verb needs to send its requests, by its
// path below `meridian admin`: one command line each, run in turn (a verb
// whose flags choose between routes runs once per route). A verb not
// listed runs once with no flags. Its arguments come from its usage line.
var walkFlags = map[string][][]string{
	"bookies set-bookie-rack":                              {{"-b", "h:3181", "-r", "r1", "-g", "g1", "-hn", "h"}},
	"bookies get-bookie-rack":                              {{"-b", "h:3181"}},
	"bookies delete-bookie-rack":                           {{"-b", "h:3181"}},
	"brokers list":                                         {{}, {"standalone"}},
	"brokers update-dynamic-config":                        {{"-c", "loadBalancerEnabled", "-v", "true"}},
	"brokers delete-dynamic-config":                        {{"-c", "loadBalancerEnabled"}},
	"clusters create":                                      {{"--url", "http://h:8080"}},
	"clusters update":                                      {{"--url", "http://h:8080"}},
	"clusters update-cluster-migration":                    {{"--broker-url", "pulsar://h:6650"}},
	"tenants update":                                       {{"-r", "r"}},
	"namespaces grant-permission":                          {{"--role", "r", "--actions", "produce"}},
	"namespaces revoke-permission":                         {{"--role", "r"}},
	"namespaces grant-subscription-permission":             {{"--subscription", "s", "--roles", "r"}},
	"namespaces revoke-subscription-permission":            {{"--subscription", "s", "--role", "r"}},
	"namespaces set-offload-threshold":                     {{"-s", "1G", "-t", "1h"}},
	"namespaces set-offload-deletion-lag":                  {{"-l", "1h"}},
	"namespaces set-bookie-affinity-group":                 {{"-pg", "group-a"}},
	"namespaces set-max-topics-per-namespace":              {{"-t", "10"}},
	"namespaces set-max-producers-per-topic":               {{"-p", "10"}},
	"namespaces set-max-consumers-per-topic":               {{"-c", "10"}},
	"namespaces set-max-consumers-per-subscription":        {{"-c", "10"}},
	"namespaces set-subscription-expiration-time":          {{"-t", "60"}},
	"namespaces set-auto-subscription-creation":            {{"-e"}},
	"namespaces set-properties":                            {{"-p", "a=1"}},
	"namespaces set-retention":                             {{"--size", "1G", "--time", "1h"}},
	"namespaces set-message-ttl":                           {{"-ttl", "60"}},
	"namespaces set-deduplication":                         {{"--enable"}},
	"namespaces set-clusters":                              {{"--clusters", "standalone"}},
	"namespaces set-backlog-quota":                         {{"--limit", "1G", "--policy", "producer_exception"}},
	"namespaces set-schema-compatibility-strategy":         {{"-c", "FULL"}},
	"namespaces split-bundle":                              {{"--bundle", "0x00000000_0xffffffff"}},
	"namespaces unload":                                    {{}, {"-b", "0x00000000_0xffffffff"}},
	"schemas get":                                          {{}, {"-v", "0"}, {"-a"}},
	"schemas upload":                                       {{"-f", "SCHEMA_FILE"}},
	"schemas test-compatibility":                           {{"-f", "SCHEMA_FILE"}},
	"topics create-partitioned-topic":                      {{"-p", "2"}},
	"topics update-partitioned-topic":                      {{"-p", "3"}},
	"topics create-subscription":                           {{"-s", "s"}},
	"topics unsubscribe":                                   {{"-s", "s"}},
	"topics skip":                                          {{"-s", "s", "-n", "1"}},
	"topics clear-backlog":                                 {{"-s", "s"}},
	"topics reset-cursor":                                  {{"-s", "s", "-t", "1h"}, {"-s", "s", "-m", "1:0"}},
	"topics expire-messages":                               {{"-s", "s", "-t", "1h"}, {"--all-subscriptions", "-t", "1h"}},
	"topics peek-messages":                                 {{"-s", "s"}},
	"topics set-replicated-subscription-status":            {{"-s", "s", "--enable"}},
	"topics get-replicated-subscription-status":            {{"-s", "s"}},
	"topics set-replication-clusters":                      {{"--clusters", "standalone"}},
	"topics grant-permission":                              {{"--role", "r", "--actions", "consume"}},
	"topics revoke-permission":                             {{"--role", "r"}},
	"topics get-message-by-id":                             {{"-l", "1", "-e", "0"}},
	"topics get-message-id":                                {{"-d", "2026-12-05T22:00:00Z"}},
	"topics update-properties":                             {{"-p", "a=1"}},
	"topics remove-properties":                             {{"-k", "a"}},
	"topics set-schema-compatibility-strategy":             {{"-s", "FULL"}},
	"topics set-retention":                                 {{"-s", "1G", "-t", "1h"}},
	"topics set-message-ttl":                               {{"-t", "60"}},
	"topics set-deduplication":                             {{"-e"}},
	"topics set-backlog-quota":                             {{"-l", "1G", "-p", "producer_exception"}},
	"topics set-max-producers":                             {{"-p", "1"}},
	"topics set-max-consumers":                             {{"-c", "1"}},
	"topics set-max-consumers-per-subscription":            {{"-c", "1"}},
	"topics set-max-subscriptions":                         {{"-m", "1"}},
	"topics set-max-unacked-messages-per-consumer":         {{"-m", "1"}},
	"topics set-compaction-threshold":                      {{"-t", "1M"}},
	"namespaces set-max-unacked-messages-per-consumer":     {{"-c", "1"}},
	"namespaces set-max-unacked-messages-per-subscription": {{"-c", "1"}},
	"namespaces set-schema-validation-enforce":             {{"-e"}},
	"topics set-max-unacked-messages-per-subscription":     {{"-m", "1"}},
	"topics set-max-message-size":                          {{"-m", "1024"}},
	"topics set-deduplication-snapshot-interval":           {{"-i", "60"}},
	"topics set-persistence":                               {{"-e", "2", "-w", "2", "-a", "1"}},
	"topics set-delayed-delivery":                          {{"-e"}},
	"topics set-offload-policies":                          {{"-d", "aws-s3"}},
	"topics set-schema-validation-enforced":                {{"-e"}},
	"topics set-auto-subscription-creation":                {{"-e"}},
}

// walkValues fill a usage line's arguments.
var walkValues = map[string]string{
	"TENANT": "public", "NAMESPACE": "public/default", "TOPIC": "persistent://public/default/t",
	"CLUSTER": "standalone", "REGION": "standalone", "BOOKIE": "127.0.0.1:3181",
}

// servedRoutes are the patterns of the admin API a region serves, read
// from a handler built as a broker builds it. The handler keeps them in
// its unexported routes field; cluster/admin's own walk
// (authz_walk_test.go) reads the same field through its test export.
func servedRoutes(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	region := startRegion(ctx, t)
	cfg := admin.DefaultConfig()
	// Only registers the bookie routes: the walk never calls the handler.
	cfg.Bookies = &autorecovery.Admin{}
	h, err := admin.New(cfg, region.Service(), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for p := range admin.Routes(h) {
		patterns = append(patterns, p)
	}
	slices.Sort(patterns)
	if len(patterns) < 200 {
		t.Fatalf("%d routes, want the whole API", len(patterns))
	}
	return patterns
}

// coveredBy returns the route whose verb also covers pattern, or "" when
// pattern needs a verb of its own. A non-persistent topic's route is its
// persistent twin's (every topic verb takes non-persistent:// names); a
// policy's PUT and POST on the same path set it alike (Pulsar takes
// either; pulsaradmin sends one), so each is the other's; the dynamic
// configuration's list with a trailing slash is the one without.
func coveredBy(pattern string, served map[string]bool) string {
	if twin := strings.Replace(pattern, "/non-persistent/", "/persistent/", 1); twin != pattern {
		return twin
	}
	if path, ok := strings.CutPrefix(pattern, "PUT "); ok && served["POST "+path] {
		return "POST " + path
	}
	if path, ok := strings.CutPrefix(pattern, "POST "); ok && served["PUT "+path] {
		return "PUT " + path
	}
	if trimmed := strings.TrimSuffix(pattern, "/"); trimmed != pattern {
		return trimmed
	}
	return ""
}

// TestEveryRouteHasAVerb walks every verb of `meridian admin` against a
// server that records which route each request reaches, and checks that
// every route the admin API serves is reached by a verb, or listed in
// routesWithoutVerb with a reason. Each verb runs with --output json and
// must print JSON (or nothing); the server answers every GET with null and
// every other request with 204.
func TestEveryRouteHasAVerb(t *testing.T) {
	patterns := servedRoutes(t)
	served := map[string]bool{}
	for _, p := range patterns {
		served[p] = true
	}
	var (
		mu      sync.Mutex
		reached = map[string]bool{}
		last    []string // the routes of the verb running
	)
	var mux overlappingMux
	for _, p := range patterns {
		mux.handleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reached[p] = true
			last = append(last, p)
			mu.Unlock()
			if r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte("null"))
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	srv := httptest.NewServer(&mux)
	t.Cleanup(srv.Close)

	var verbs [][]string
	walked := map[string]bool{}
	walk(newAdminCommand(), func(c *cobra.Command) {
		names := map[string]bool{}
		for _, sub := range c.Commands() {
			for _, name := range append([]string{sub.Name()}, sub.Aliases...) {
				if names[name] {
					t.Errorf("%s has two verbs named %s", c.CommandPath(), name)
				}
				names[name] = true
			}
		}
		if c.HasSubCommands() || !c.Runnable() {
			return
		}
		path := strings.TrimPrefix(c.CommandPath(), "admin ")
		walked[path] = true
		args := strings.Fields(path)
		for _, placeholder := range strings.Fields(c.Use)[1:] {
			if strings.HasPrefix(placeholder, "[") {
				continue // optional: walkFlags gives it where it sends another request
			}
			v, ok := walkValues[placeholder]
			if !ok {
				t.Fatalf("%s: no value in walkValues for %s", path, placeholder)
			}
			args = append(args, v)
		}
		flagSets, ok := walkFlags[path]
		if !ok {
			flagSets = [][]string{nil}
		}
		for _, flags := range flagSets {
			verbs = append(verbs, append(slices.Clone(args), flags...))
		}
	})
	for path := range walkFlags {
		if !walked[path] {
			t.Errorf("walkFlags has flags for %q, which is no verb of meridian admin", path)
		}
	}
	schemaFile := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"STRING","schema":"","properties":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range verbs {
		for i, arg := range args {
			if arg == "SCHEMA_FILE" {
				args[i] = schemaFile
			}
		}
	}
	for _, args := range verbs {
		mu.Lock()
		last = nil
		mu.Unlock()
		out, err := runAdmin(t, srv.URL, append([]string{"-o", "json"}, args...)...)
		mu.Lock()
		sent := len(last)
		mu.Unlock()
		if sent == 0 {
			t.Errorf("meridian admin %s reached no route (error: %v): add what it needs to walkFlags", strings.Join(args, " "), err)
		}
		if err == nil && strings.TrimSpace(out) != "" && !json.Valid(bytes.TrimSpace([]byte(out))) {
			t.Errorf("meridian admin -o json %s printed no JSON:\n%s", strings.Join(args, " "), out)
		}
	}

	// covered grows from the routes reached and those listed, through
	// coveredBy, until nothing changes.
	covered := map[string]bool{}
	var stale []string
	for _, p := range patterns {
		_, listed := routesWithoutVerb[p]
		if reached[p] && listed {
			stale = append(stale, p)
		}
		covered[p] = reached[p] || listed
	}
	for grew := true; grew; {
		grew = false
		for _, p := range patterns {
			if twin := coveredBy(p, served); !covered[p] && twin != "" && covered[twin] {
				covered[p], grew = true, true
			}
		}
	}
	var missing []string
	for _, p := range patterns {
		if !covered[p] {
			missing = append(missing, p)
		}
	}
	slices.Sort(missing)
	for _, p := range missing {
		t.Errorf("no verb of meridian admin reaches %s", p)
	}
	for _, p := range stale {
		t.Errorf("%s is listed in routesWithoutVerb but a verb reaches it: remove it from the list", p)
	}
	for p := range routesWithoutVerb {
		if !served[p] {
			t.Errorf("routesWithoutVerb lists %s, which the server does not serve", p)
		}
	}
	t.Logf("%d verbs walked, %d routes served, %d without a verb by design", len(verbs), len(patterns), len(routesWithoutVerb))
}

// overlappingMux serves patterns that one http.ServeMux refuses together
// (the admin API serves racks-info/{bookie} and {bookie}/decommission
// through one pattern, and records both): each goes in the first of its
// muxes that takes it, and a request goes to the first mux that matches.
type overlappingMux struct{ muxes []*http.ServeMux }

func (m *overlappingMux) handleFunc(pattern string, fn http.HandlerFunc) {
	for _, mux := range m.muxes {
		if tryHandle(mux, pattern, fn) {
			return
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pattern, fn)
	m.muxes = append(m.muxes, mux)
}

// tryHandle registers pattern on mux, reporting false where it conflicts
// with one mux holds (ServeMux panics then).
func tryHandle(mux *http.ServeMux, pattern string, fn http.HandlerFunc) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	mux.HandleFunc(pattern, fn)
	return true
}

func (m *overlappingMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, mux := range m.muxes {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
	}
	http.NotFound(w, r)
}
