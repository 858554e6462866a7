package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/testkit"
)

// answer GETs url and returns its status code and body; 0 when nothing
// answers.
func answer(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHealthEndpoints: a broker's web port serves Pulsar's /status.html and
// /health; a process of bookies and a replicator serves /ready and
// BookKeeper's is_ready and state beside /metrics. When the region's etcd
// goes away for longer than their leases, the bookie and the replicator
// turn unready and say why, while /health still answers: readiness is not
// liveness.
func TestHealthEndpoints(t *testing.T) {
	etcd := startStandalone(t, func(*node.BrokerConfig) {})
	web := etcd.Broker().WebURL()
	for _, path := range []string{"/status.html", "/health"} {
		if code, body := answer(web + path); code != http.StatusOK || body != "OK" {
			t.Errorf("broker GET %s: %d %q, want 200 OK", path, code, body)
		}
	}

	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir, bk.LeaseTTL = "bookie-h", "127.0.0.1:0", t.TempDir(), 2*time.Second
	rep := replicator.DefaultConfig("")
	rep.LeaseTTL = 2 * time.Second
	n := startNode(t, node.Config{Etcd: etcd.EtcdEndpoints(), Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "h", Bookies: []bookie.Config{bk}, Replicator: &rep, MetricsAddr: "127.0.0.1:0"}}})
	base := strings.TrimSuffix(n.Regions()[0].MetricsURL(), "/metrics")

	testkit.WaitFor(t, "the bookie and replicator process ready", func() bool {
		code, _ := answer(base + "/ready")
		return code == http.StatusOK
	})
	if code, body := answer(base + "/api/v1/bookie/is_ready"); code != http.StatusOK || body != "OK" {
		t.Errorf("is_ready: %d %q, want 200 OK", code, body)
	}
	var state node.BookieState
	_, body := answer(base + "/api/v1/bookie/state")
	if err := json.Unmarshal([]byte(body), &state); err != nil {
		t.Fatalf("state %q: %v", body, err)
	}
	if want := (node.BookieState{Running: true, AvailableForHighPriorityWrites: true}); state != want {
		t.Errorf("state %+v, want %+v", state, want)
	}
	if code, body := answer(base + "/metrics"); code != http.StatusOK || !strings.Contains(body, "meridian_bookie_") {
		t.Errorf("/metrics: %d, without the bookie's series", code)
	}

	etcd.Close() // the region's etcd (the standalone's embedded one) is gone
	testkit.WaitFor(t, "the bookie and the replicator unready without etcd", func() bool {
		code, body := answer(base + "/ready")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "bookie") && strings.Contains(body, "replicator")
	})
	if code, body := answer(base + "/api/v1/bookie/is_ready"); code != http.StatusServiceUnavailable {
		t.Errorf("is_ready without etcd: %d %q, want 503", code, body)
	}
	if code, _ := answer(base + "/health"); code != http.StatusOK {
		t.Errorf("/health without etcd: %d, want 200: liveness never depends on etcd", code)
	}
}

// TestPprofOnlyWhenEnabled: with EnablePprof (--enable-pprof) the
// broker's web port and a bookie process's metrics port serve Go's
// profiles under /debug/pprof/; without it, neither does.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		cfg := node.Standalone(t.TempDir())
		b := cfg.Regions[0].Broker
		b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
		cfg.Regions[0].MetricsAddr = "127.0.0.1:0" // the standalone's bookie on a port of its own
		cfg.Logger, cfg.EnablePprof = testLogger(), enabled
		n := startNode(t, cfg)
		for _, base := range []string{n.Broker().WebURL(), strings.TrimSuffix(n.Regions()[0].MetricsURL(), "/metrics")} {
			code, body := answer(base + "/debug/pprof/heap?debug=1")
			switch {
			case enabled && (code != http.StatusOK || !strings.Contains(body, "heap profile")):
				t.Errorf("EnablePprof: GET %s/debug/pprof/heap: %d, want 200 and a heap profile", base, code)
			case !enabled && code != http.StatusNotFound:
				t.Errorf("without EnablePprof: GET %s/debug/pprof/heap: %d, want 404", base, code)
			}
		}
		n.Close()
	}
}
