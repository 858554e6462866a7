package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/node"
)

// errorRecorder is a slog handler that keeps the records keep selects
// (newErrorRecorder: every record at ERROR), as their message and
// attributes, and passes all records on to next.
type errorRecorder struct {
	next slog.Handler
	keep func(slog.Record) bool
	mu   *sync.Mutex
	errs *[]string
}

func newErrorRecorder(next slog.Handler) *errorRecorder {
	return newRecorder(next, func(r slog.Record) bool { return r.Level >= slog.LevelError })
}

func newRecorder(next slog.Handler, keep func(slog.Record) bool) *errorRecorder {
	return &errorRecorder{next: next, keep: keep, mu: new(sync.Mutex), errs: new([]string)}
}

func (h *errorRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *errorRecorder) Handle(ctx context.Context, r slog.Record) error {
	if h.keep(r) {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		h.mu.Lock()
		*h.errs = append(*h.errs, b.String())
		h.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *errorRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &errorRecorder{next: h.next.WithAttrs(as), keep: h.keep, mu: h.mu, errs: h.errs}
}

func (h *errorRecorder) WithGroup(name string) slog.Handler {
	return &errorRecorder{next: h.next.WithGroup(name), keep: h.keep, mu: h.mu, errs: h.errs}
}

func (h *errorRecorder) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), *h.errs...)
}

// freePorts moves every broker of cfg onto 127.0.0.1 and free ports.
func freePorts(cfg *node.Config) {
	for _, r := range cfg.Regions {
		if b := r.Broker; b != nil {
			b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
		}
	}
}

func startNode(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startRecorded starts cfg on free ports with its logs recorded, for a
// test that stops it with stopCleanly.
func startRecorded(t *testing.T, cfg node.Config) (*node.Node, *errorRecorder) {
	t.Helper()
	rec := newErrorRecorder(testLogger().Handler())
	freePorts(&cfg)
	cfg.Logger = slog.New(rec)
	return startNode(t, cfg), rec
}

// stopCleanly closes n and fails the test if that logged anything at
// ERROR (rec records n's logs).
func stopCleanly(t *testing.T, n *node.Node, rec *errorRecorder) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if errs := rec.errors(); len(errs) > 0 {
		t.Errorf("a clean stop logged %d record(s) at ERROR:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// get GETs url, failing the test unless it answers 200 OK; the caller
// closes the body.
func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return resp
}

// scrape reads the metric families served at url.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp := get(t, url)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// total is the sum over a counter's or a histogram's series (a
// histogram's sample count).
func total(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// TestStandaloneMetricsAndCleanStop: every part of a standalone region
// registers into the one registry its web port serves, so after traffic the
// ledger client's and the bookie's series are there and counted; and a clean
// stop logs nothing at ERROR.
func TestStandaloneMetricsAndCleanStop(t *testing.T) {
	n, rec := startRecorded(t, node.Standalone(t.TempDir()))
	b := n.Broker()
	c := newClient(t, pulsar.ClientOptions{URL: b.ServiceURL()})
	roundTrip(t, c, "persistent://public/default/metrics", 10)

	families := scrape(t, b.WebURL()+"/metrics")
	for _, name := range []string{"meridian_ledger_add_seconds", "meridian_bookie_adds_total", "meridian_ledger_adds_total"} {
		f := families[name]
		if f == nil {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		if total(f) <= 0 {
			t.Errorf("%s = %v after 10 messages, want > 0", name, total(f))
		}
	}
	if families["go_goroutines"] == nil || families["process_cpu_seconds_total"] == nil {
		t.Error("/metrics lacks the Go runtime and process collectors")
	}
	c.Close()
	stopCleanly(t, n, rec)
}

// TestDevRegionsHaveTheirOwnRegistries: in dev each region serves its own
// series: traffic in one region counts on its endpoint only. A clean stop
// logs nothing at ERROR.
func TestDevRegionsHaveTheirOwnRegistries(t *testing.T) {
	n, rec := startRecorded(t, node.Dev(t.TempDir(), []string{"east", "west"}, 0, 0))
	regions := n.Regions()
	if len(regions) != 2 || regions[0].Name() != "east" || regions[1].Name() != "west" {
		t.Fatalf("regions %v", regions)
	}
	c := newClient(t, pulsar.ClientOptions{URL: regions[0].Broker().ServiceURL()})
	roundTrip(t, c, "persistent://public/default/east-only", 5)
	adds := func(r *node.Region) float64 {
		return total(scrape(t, r.Broker().WebURL()+"/metrics")["meridian_bookie_adds_total"])
	}
	if east, west := adds(regions[0]), adds(regions[1]); east <= 0 || west != 0 {
		t.Errorf("bookie adds: east %v, west %v; want east > 0 and west 0 (one registry per region)", east, west)
	}
	c.Close()
	stopCleanly(t, n, rec)
}

// TestBookieOnlyNode: `meridian bookie` is a node whose one region has only
// a bookie, on an etcd that runs elsewhere; the region's /metrics has a
// listener of its own. A broker node on the same etcd stores on it.
func TestBookieOnlyNode(t *testing.T) {
	etcd := startStandalone(t, func(*node.BrokerConfig) {}) // its embedded etcd, as the region's store
	endpoints := etcd.EtcdEndpoints()
	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-far", "127.0.0.1:0", t.TempDir()
	bookies := startNode(t, node.Config{Etcd: endpoints, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "far", Bookies: []bookie.Config{bk}, MetricsAddr: "127.0.0.1:0"}}})
	r := bookies.Regions()[0]
	if r.Broker() != nil || len(r.Bookies()) != 1 || r.MetricsURL() == "" {
		t.Fatalf("bookie node: broker %v, %d bookies, metrics %q", r.Broker(), len(r.Bookies()), r.MetricsURL())
	}

	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	brokers := startNode(t, node.Config{Etcd: endpoints, Logger: testLogger(), Bootstrap: true,
		Regions: []node.RegionConfig{{Name: "far", Broker: &b}}})
	c := newClient(t, pulsar.ClientOptions{URL: brokers.Broker().ServiceURL()})
	roundTrip(t, c, "persistent://public/default/far", 5)
	if got := total(scrape(t, r.MetricsURL())["meridian_bookie_adds_total"]); got <= 0 {
		t.Errorf("the bookie node's /metrics counts %v adds, want > 0", got)
	}
}

func TestConfigValidate(t *testing.T) {
	b := node.DefaultBrokerConfig("h")
	for _, tc := range []struct {
		cfg  node.Config
		want string
	}{
		{node.Config{Etcd: []string{"x"}, Regions: []node.RegionConfig{{Name: "a", Broker: &b}}}, "Logger is required"},
		{node.Config{Etcd: []string{"x"}, Logger: testLogger()}, "at least one region"},
		{node.Config{Logger: testLogger(), Regions: []node.RegionConfig{{Name: "a", Broker: &b}}}, "Config.Etcd is required"},
		{node.Config{EmbedEtcd: true, Logger: testLogger(), Regions: []node.RegionConfig{{Name: "a", Broker: &b}}}, "DataDir is required"},
		{node.Config{Etcd: []string{"x"}, Logger: testLogger(), Regions: []node.RegionConfig{{Name: "a", Broker: &b}, {Name: "a", Broker: &b}}}, "distinct"},
		{node.Config{Etcd: []string{"x"}, Logger: testLogger(), Regions: []node.RegionConfig{{Name: "a"}}}, "runs nothing"},
		{node.Config{Etcd: []string{"x"}, Logger: testLogger(), Regions: []node.RegionConfig{{Name: "a", Bookies: []bookie.Config{{}}}}}, "default under Config.DataDir"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want an error containing %q", err, tc.want)
		}
	}
}
