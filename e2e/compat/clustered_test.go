package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestRewriteHosts: the suites' host:port pairs become the region's, and a
// pair the runner does not know is an error rather than a test that
// dials docker's DNS names.
func TestRewriteHosts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(clusteredMode.files[0], `const broker1URL = "pulsar://broker-1:6650"; const broker2LookupURL = "broker-2:8080"`)
	write(clusteredMode.files[1], `URL: "pulsar://broker-1:6600,broker-1:6650"`)
	write(clusteredMode.files[2], `adminURL: "http://broker-1:8080"`)
	if err := rewriteHosts(dir, clusteredMode); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		clusteredMode.files[0]: `const broker1URL = "pulsar://localhost:6650"; const broker2LookupURL = "localhost:8082"`,
		clusteredMode.files[1]: `URL: "pulsar://localhost:6600,localhost:6650"`,
		clusteredMode.files[2]: `adminURL: "http://localhost:8080"`,
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s: %s, want %s", name, b, want)
		}
	}
	write(clusteredMode.files[2], `adminURL: "http://broker-2:9090"`)
	if err := rewriteHosts(dir, clusteredMode); err == nil || !strings.Contains(err.Error(), "broker-2:9090") {
		t.Errorf("an unknown host:port: %v, want an error naming it", err)
	}
}

func TestClusteredRunExpr(t *testing.T) {
	c := suiteTest{test: "TestSuite", sub: []string{"TestTopicUnload", "direct.Connection"}}
	if got, want := c.runExpr(), `^TestSuite$/^TestTopicUnload$/^direct\.Connection$`; got != want {
		t.Errorf("runExpr = %s, want %s", got, want)
	}
	if got := (suiteTest{test: "TestA"}).runExpr(); got != "^TestA$" {
		t.Errorf("runExpr = %s", got)
	}
	if got := c.name(); got != "TestSuite/TestTopicUnload/direct.Connection" {
		t.Errorf("name = %s", got)
	}
}

// TestWatchMoves: a passing unload test whose bundle never changed broker
// is turned into a failure; one whose bundle moved keeps its pass.
func TestWatchMoves(t *testing.T) {
	ctx := t.Context()
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key := meta.RegionKey(clusteredRegion, "owners", "public", "default", "0x00000000_0x40000000")
	owner := func(id string) []byte {
		v, err := meta.EncodeJSON(1, map[string]string{"brokerId": id})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rev, err := store.Create(ctx, key, owner("localhost:6650"), meta.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	stays := watchOwners(ctx, store, clusteredRegion, func() result { return result{Result: "pass"} })
	if stays.Result != "fail" || !strings.Contains(stays.Reason, "moved no bundle") {
		t.Errorf("no move: %+v, want a failure", stays)
	}
	moves := watchOwners(ctx, store, clusteredRegion, func() result {
		if _, err := store.Update(ctx, key, owner("localhost:6652"), rev); err != nil {
			t.Error(err)
		}
		return result{Result: "pass"}
	})
	if moves.Result != "pass" {
		t.Errorf("a move: %+v, want the pass kept", moves)
	}
	failed := watchOwners(ctx, store, clusteredRegion, func() result { return result{Result: "fail", Reason: "its own"} })
	if failed.Reason != "its own" {
		t.Errorf("a failed test: %+v, want its own reason kept", failed)
	}
}

// TestBlueGreenHosts: the blue-green suite's names become the two
// regions' brokers, green-proxy green's broker-1 and proxy blue's, never
// a mix of the two (proxy:8080 is within green-proxy:8080).
func TestBlueGreenHosts(t *testing.T) {
	m, err := blueGreenMode()
	if err != nil {
		t.Fatal(err)
	}
	blue, green := m.regions[0].brokers, m.regions[1].brokers
	dir := t.TempDir()
	src := `blueAdminURL: "http://proxy:8080", blueClientUrl: "pulsar://proxy:6650", greenAdminURL: "http://green-proxy:8080",
"brokerServiceUrl": "pulsar://green-proxy:6650", "brokerServiceUrlTls": "pulsar+ssl://green-proxy:6651",
blueBroker2URL = "pulsar://broker-2:6650", greenBroker2URL = "pulsar://green-broker-2:6650", greenBroker2LookupURL = "green-broker-2:8080"`
	if err := os.WriteFile(filepath.Join(dir, m.files[0]), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rewriteHosts(dir, m); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, m.files[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := `blueAdminURL: "http://` + blue[0].web + `", blueClientUrl: "pulsar://` + blue[0].addr + `", greenAdminURL: "http://` + green[0].web + `",
"brokerServiceUrl": "pulsar://` + green[0].addr + `", "brokerServiceUrlTls": "pulsar+ssl://` + m.refused[0] + `",
blueBroker2URL = "pulsar://` + blue[1].addr + `", greenBroker2URL = "pulsar://` + green[1].addr + `", greenBroker2LookupURL = "` + green[1].web + `"`
	if string(b) != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", b, want)
	}
}

// TestWatchMigrated: a passing blue-green run keeps its pass only if blue's
// brokers counted a producer and a consumer sent away while it ran.
func TestWatchMigrated(t *testing.T) {
	var producers, consumers atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE meridian_broker_clients_migrated_total counter\n"+
			"meridian_broker_clients_migrated_total{kind=\"consumer\"} %d\n"+
			"meridian_broker_clients_migrated_total{kind=\"producer\"} %d\n", consumers.Load(), producers.Load())
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	regions := []startedRegion{{regionSpec: regionSpec{name: blueRegion, brokers: []brokerSpec{{"b1", addr, addr}, {"b2", addr, addr}}}}}
	pass := func() result { return result{Result: "pass"} }
	if got := watchMigrated(t.Context(), regions, pass); got.Result != "fail" || !strings.Contains(got.Reason, "moved 0 producers and 0 consumers") {
		t.Errorf("nobody moved: %+v, want a failure", got)
	}
	producers.Add(1)
	if got := watchMigrated(t.Context(), regions, func() result { producers.Add(1); return pass() }); got.Result != "fail" {
		t.Errorf("only a producer moved: %+v, want a failure", got)
	}
	if got := watchMigrated(t.Context(), regions, func() result { producers.Add(1); consumers.Add(1); return pass() }); got.Result != "pass" {
		t.Errorf("both moved: %+v, want the pass kept", got)
	}
}
