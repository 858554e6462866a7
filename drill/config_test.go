package drill

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeAdmin is a cluster of three regions for MakePlan; it records every
// write, which a refused drill must not make.
type fakeAdmin struct {
	namespaces map[string]NamespaceRecord
	writes     []string
}

func newFakeAdmin() *fakeAdmin {
	return &fakeAdmin{namespaces: map[string]NamespaceRecord{
		"public/default": {ReplicationClusters: []string{"us-east", "eu-west", "ap-south"}},
		"public/local":   {ReplicationClusters: []string{"us-east"}},
		"public/auto": {ReplicationClusters: []string{"us-east", "eu-west", "ap-south"}, AutoFailover: true,
			Active: ActiveRegion{ActiveRegion: "us-east", FallbackRegions: []string{"ap-south", "eu-west"}}},
	}}
}

func (f *fakeAdmin) write(what string) error { f.writes = append(f.writes, what); return nil }

func (f *fakeAdmin) Clusters(context.Context) ([]string, error) {
	return []string{"ap-south", "eu-west", "us-east"}, nil
}
func (f *fakeAdmin) Cluster(_ context.Context, name string) (ClusterRecord, error) {
	return ClusterRecord{ServiceURL: "http://" + name + ":8080", BrokerServiceURL: "pulsar://" + name + ":6650"}, nil
}
func (f *fakeAdmin) Namespace(_ context.Context, ns string) (NamespaceRecord, error) {
	r, ok := f.namespaces[ns]
	if !ok {
		return r, &StatusError{Status: 404, Reason: "Namespace does not exist"}
	}
	return r, nil
}
func (f *fakeAdmin) CreateTopic(_ context.Context, region, topic string) error {
	return f.write("create " + topic)
}
func (f *fakeAdmin) DeleteTopic(_ context.Context, region, topic string) error {
	return f.write("delete " + topic)
}
func (f *fakeAdmin) Topics(context.Context, string, string) ([]string, error) { return nil, nil }
func (f *fakeAdmin) SetTopicActiveRegion(_ context.Context, topic, region string) error {
	return f.write("active " + topic)
}
func (f *fakeAdmin) RemoveTopicActiveRegion(_ context.Context, topic string) error {
	return f.write("inactive " + topic)
}
func (f *fakeAdmin) Replication(context.Context, string, string, string) (ReplicationState, error) {
	return ReplicationState{Connected: true}, nil
}
func (f *fakeAdmin) SetNamespaceActiveRegion(_ context.Context, ns string, _ ActiveRegion) error {
	return f.write("active " + ns)
}
func (f *fakeAdmin) CreateFence(_ context.Context, ns, name string, _ Fence) error {
	return f.write("fence " + name)
}
func (f *fakeAdmin) RenewFence(context.Context, string, string) error { return nil }
func (f *fakeAdmin) DeleteFence(_ context.Context, ns, name string) error {
	return f.write("unfence " + name)
}
func (f *fakeAdmin) Fences(context.Context, string) ([]Fence, error) { return nil, nil }

func TestMakePlanRefusesBadInput(t *testing.T) {
	base := DefaultConfig()
	base.Namespace, base.Lose = "public/default", "us-east"
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"unknown region", func(c *Config) { c.Lose = "mars" }, "unknown region mars"},
		{"unknown --to", func(c *Config) { c.To = "venus" }, "unknown region venus"},
		{"--to is --lose", func(c *Config) { c.To = "us-east" }, "is the region lost"},
		{"no namespace", func(c *Config) { c.Namespace = "public/none" }, "namespace public/none does not exist"},
		{"a malformed namespace", func(c *Config) { c.Namespace = "public" }, "want tenant/namespace"},
		{"not replicating to the lost region", func(c *Config) { c.Namespace, c.Lose = "public/local", "eu-west" }, "does not replicate to eu-west"},
		{"replicating to one region only", func(c *Config) { c.Namespace = "public/local" }, "does not replicate to both"},
		{"--cut command without commands", func(c *Config) { c.Cut = CutCommand }, "needs both --cut-command and --restore-command"},
		{"--cut command without a restore", func(c *Config) { c.Cut, c.CutCommand = CutCommand, "true" }, "needs both"},
		{"commands without --cut command", func(c *Config) { c.CutCommand, c.RestoreCommand = "true", "true" }, "go with --cut command"},
		{"an unknown cut", func(c *Config) { c.Cut = "unplug" }, "--cut \"unplug\""},
		{"an unknown mode", func(c *Config) { c.Mode = "surprise" }, "--mode"},
		{"an unknown subscription type", func(c *Config) { c.SubscriptionType = "Broadcast" }, "--subscription-type"},
		{"no rate", func(c *Config) { c.Rate = 0 }, "--rate"},
		{"a fence TTL too short", func(c *Config) { c.FenceTTL = time.Second }, "--fence-ttl"},
		{"automatic failover on a region not active", func(c *Config) {
			c.Namespace, c.Lose, c.Cut, c.CutCommand, c.RestoreCommand = "public/auto", "eu-west", CutCommand, "true", "true"
		}, "lose the active region"},
	} {
		admin := newFakeAdmin()
		cfg := base
		tc.mutate(&cfg)
		_, err := MakePlan(t.Context(), cfg, admin)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig saying %q", tc.name, err, tc.want)
		}
		if len(admin.writes) > 0 {
			t.Errorf("%s: wrote %v before refusing", tc.name, admin.writes)
		}
	}
}

func TestMakePlanChoosesTheNextRegion(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Namespace, cfg.Lose = "public/default", "us-east"
	p, err := MakePlan(t.Context(), cfg, newFakeAdmin())
	if err != nil {
		t.Fatal(err)
	}
	if p.To != "eu-west" || p.Auto {
		t.Errorf("to %s auto %v, want eu-west (after us-east in the replication clusters), by hand", p.To, p.Auto)
	}
	if got := p.serviceURL(); got != "pulsar://us-east:6650,eu-west:6650,ap-south:6650" {
		t.Errorf("service URL %s, want the lost region's brokers first", got)
	}
	cfg.Namespace, cfg.Cut, cfg.CutCommand, cfg.RestoreCommand = "public/auto", CutCommand, "true", "true"
	if p, err = MakePlan(t.Context(), cfg, newFakeAdmin()); err != nil || !p.Auto || p.To != "ap-south" {
		t.Errorf("auto %v to %s (%v), want automatic failover to the first fallback, ap-south", p.Auto, p.To, err)
	}
	cfg.ServiceURLs = map[string]string{"eu-west": "pulsar://tunnel:7000"}
	cfg.Namespace, cfg.Cut, cfg.CutCommand, cfg.RestoreCommand = "public/default", CutIsolate, "", ""
	if p, err = MakePlan(t.Context(), cfg, newFakeAdmin()); err != nil || p.ServiceURLs["eu-west"] != "pulsar://tunnel:7000" ||
		p.Addresses.region("tunnel:7000") != "eu-west" {
		t.Errorf("override: %v %v", p.ServiceURLs, err)
	}
}

func TestLastBrokerAddress(t *testing.T) {
	for in, want := range map[string]string{
		"&{pulsar://localhost:6650 pulsar://10.0.0.7:6650}": "10.0.0.7:6650",
		"&{pulsar+ssl://a:6651 pulsar+ssl://b:6651}":        "b:6651",
		"nothing here": "",
	} {
		if got := lastBrokerAddress(in); got != want {
			t.Errorf("lastBrokerAddress(%q) = %q, want %q", in, got, want)
		}
	}
	w := newWhere(addresses{"127.0.0.1:6650": "us-east", "localhost:6750": "eu-west"})
	logger{w: w}.WithFields(map[string]any{"cnx": "127.0.0.1:5000 -> 127.0.0.1:6650"}).Info("Connected producer")
	if w.Region() != "us-east" {
		t.Fatalf("producer region %q, want us-east", w.Region())
	}
	c := logger{w: w}.SubLogger(map[string]any{"topic": "t"})
	c.Debug("Lookup result: ", "&{pulsar://localhost:6750 pulsar://localhost:6750}")
	c.Info("Connected consumer")
	if w.Region() != "eu-west" {
		t.Fatalf("consumer region %q, want eu-west", w.Region())
	}
}

func TestReportHasThePlotAndTheTable(t *testing.T) {
	s, tl := unplannedDrill()
	tl.Phases = []Phase{{"warm-up", s.at(0), s.at(1000)}, {"outage", s.at(1000), s.at(5000)}, {"fail back", s.at(6000), s.at(7500)}}
	f := Analyze(s.h, tl, Unplanned, "east", "Failover")
	r := Report{Namespace: "public/default", Lose: "east", To: "west", Cut: CutIsolate, Mode: Unplanned, Rate: 10, Topics: []string{"t"},
		SubscriptionType: "Failover", Thresholds: DefaultThresholds(), Timeline: tl, Figures: f,
		Verdict: Judge(f, DefaultThresholds(), "Failover"), Rates: rates(s.h, tl.Start, tl.End)}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{
		"<svg", `class="rate"`, `class="mark"`, ">cut<", ">fail back<", ">outage<", // the plot: rates, marks, phases
		`<table id="figures">`, "RPO", "2 messages", "lost for good", // the figures
		`<table id="verdict">`, "FAIL", // the verdict: the fail back's duplicates
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Self-contained: no address but the SVG namespace's name.
	if rest := strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""); strings.Contains(rest, "://") {
		t.Errorf("report.html refers to the network")
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Fatal(err)
	}
}
