package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
)

// deployDir is the repository's deploy/ folder.
const deployDir = "../../deploy"

// targetLabels are the labels Prometheus adds to every scraped series
// (instance, job, and the cluster label of deploy/prometheus's scrape
// configurations, the region), and le, the bucket label of a histogram's
// _bucket series.
var targetLabels = map[string]bool{"instance": true, "job": true, "cluster": true, "le": true}

// dashboardExprs are the PromQL expressions of the dashboard's panels.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "meridian.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("the dashboard has no title or no panels")
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	return exprs
}

// ruleExprs parses the alert rules with rulefmt, which validates them
// (each expression parses as PromQL, every alert is named), and returns
// their expressions by alert.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join(deployDir, "prometheus", "alerts.yml"), false, model.UTF8Validation, p, slog.Default())
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.Fatal("no rule groups")
	}
	out := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert: %q", g.Name, r.Record)
			}
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// uses is a metric and the labels an expression matches or groups it on.
type uses map[string]map[string]bool

// inspect collects what expr uses: every selector's metric and matcher
// labels, and the labels of the aggregations over it.
func inspect(t *testing.T, expr string, u uses) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%q: %v", expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		labels := u[vs.Name]
		if labels == nil {
			labels = map[string]bool{}
			u[vs.Name] = labels
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				labels[m.Name] = true
			}
		}
		for _, p := range path {
			if agg, ok := p.(*parser.AggregateExpr); ok && !agg.Without {
				for _, g := range agg.Grouping {
					labels[g] = true
				}
			}
		}
		return nil
	})
}

// servedLabels maps every series name a region serves (a histogram's
// _bucket, _sum and _count, and a summary's _sum and _count, included) to
// its label names.
func servedLabels(families map[string]*dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			add(name, m)
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m)
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name+"_sum", m)
				add(name+"_count", m)
			}
		}
	}
	return out
}

// runningRegion starts two dev regions replicating public/default, sends
// traffic in the first until it has replicated, and returns what the
// first region serves.
func runningRegion(t *testing.T) map[string]*dto.MetricFamily {
	cfg := node.Dev(t.TempDir(), []string{"us-east", "eu-west"}, 0, 0)
	cfg.Logger = slog.New(slog.DiscardHandler)
	for i := range cfg.Regions {
		b := cfg.Regions[i].Broker
		b.BrokerAddr, b.WebAddr, b.AdvertisedHost = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"
		cfg.Regions[i].Metrics = telemetry.MetricsConfig{StatsPeriod: 100 * time.Millisecond}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	east := n.Regions()[0]
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: east.Broker().ServiceURL(), OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := "persistent://public/default/deploy-check"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := east.Broker().WebURL() + "/metrics"
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		families := scrape(t, url)
		if f := families["meridian_replicator_read_to_receipt_seconds"]; f != nil && len(f.GetMetric()) > 0 && families["pulsar_replication_backlog"] != nil {
			return families
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the first message to replicate")
		}
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// TestDeployFilesMatchWhatARegionServes: the dashboard and the alert rules
// parse, every alert the issue lists is there, and every metric and label
// they use is served by a running region after traffic and replication.
func TestDeployFilesMatchWhatARegionServes(t *testing.T) {
	u := uses{}
	for _, e := range dashboardExprs(t) {
		inspect(t, e, u)
	}
	rules := ruleExprs(t)
	for _, want := range []string{"MeridianReplicationLagAboveSLO", "MeridianReplicationBacklogGrowing",
		"MeridianReplicationLinkDisconnected", "MeridianBookieFsyncSlow", "MeridianBookieReadOnly", "MeridianEtcdErrors"} {
		if rules[want] == "" {
			t.Errorf("no alert %s", want)
		}
	}
	for _, e := range rules {
		inspect(t, e, u)
	}
	if t.Failed() {
		return
	}
	served := servedLabels(runningRegion(t))
	for name, labels := range u {
		have, ok := served[name]
		if !ok {
			t.Errorf("%s: used by deploy/, not served by a region", name)
			continue
		}
		for l := range labels {
			if !have[l] && !targetLabels[l] {
				t.Errorf("%s: label %s used by deploy/, not on the served series (which have %v)", name, l, strings.Join(keys(have), ","))
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
