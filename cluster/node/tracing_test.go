package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/testkit"
)

// spanRegion is the region a span was recorded in.
func spanRegion(s tracetest.SpanStub) string {
	for _, a := range s.Attributes {
		if a.Key == telemetry.AttrRegion {
			return a.Value.AsString()
		}
	}
	return ""
}

// TestTraceAcrossRegions is the tracing test of issue 15: one message
// published in us-east with a traceparent, consumed in eu-west (and in
// us-east), makes one trace whose parent chain is publish → replicate →
// remote publish → deliver, with a bookie add under each publish and a
// deliver under the publish of each region.
func TestTraceAcrossRegions(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tracing := telemetry.NewTracing(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { tracing.Shutdown(context.Background()) })

	cfg := node.Dev(t.TempDir(), []string{"us-east", "eu-west"}, 0, 0)
	freePorts(&cfg)
	for i := range cfg.Regions {
		cfg.Regions[i].Replicator.ScanInterval = 50 * time.Millisecond
		cfg.Regions[i].Replicator.CursorPersistInterval = 10 * time.Millisecond
	}
	cfg.Logger = testLogger()
	cfg.Tracing = tracing
	n := startNode(t, cfg)
	urls := map[string]string{}
	for _, r := range n.Regions() {
		urls[r.Name()] = r.Broker().ServiceURL()
	}

	topic := "persistent://public/default/traced"
	consumers := subscribeIn(t, urls, topic)
	prod, err := newClient(t, pulsar.ClientOptions{URL: urls["us-east"]}).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	// A span of the producer's own, as an instrumented client sends it.
	const traceID, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("traced"),
		Properties: map[string]string{telemetry.PropTraceParent: "00-" + traceID + "-" + producerSpan + "-01"}}); err != nil {
		t.Fatal(err)
	}
	for region, cons := range consumers {
		if m := receiveOne(t, cons); string(m.Payload()) != "traced" {
			t.Fatalf("%s received %q", region, m.Payload())
		}
	}

	// Spans end after the deliveries are queued: wait for all of them.
	find := func(spans tracetest.SpanStubs, name, region string) (tracetest.SpanStub, bool) {
		for _, s := range spans {
			if s.Name == name && spanRegion(s) == region {
				return s, true
			}
		}
		return tracetest.SpanStub{}, false
	}
	want := []struct{ name, region string }{
		{telemetry.SpanPublish, "us-east"}, {telemetry.SpanBookieAdd, ""}, {telemetry.SpanReplicate, "us-east"},
		{telemetry.SpanPublish, "eu-west"}, {telemetry.SpanDeliver, "us-east"}, {telemetry.SpanDeliver, "eu-west"},
	}
	var spans tracetest.SpanStubs
	testkit.WaitFor(t, "the spans of publish, replicate and deliver in both regions", func() bool {
		spans = exporter.GetSpans()
		for _, w := range want {
			if _, ok := find(spans, w.name, w.region); !ok {
				return false
			}
		}
		return true
	})

	ids := map[trace.SpanID]string{}
	for _, s := range spans {
		if other, ok := ids[s.SpanContext.SpanID()]; ok {
			t.Errorf("spans %q and %q share the id %s", other, s.Name, s.SpanContext.SpanID())
		}
		ids[s.SpanContext.SpanID()] = s.Name
		if got := s.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("span %q of region %q is in trace %s, want %s", s.Name, spanRegion(s), got, traceID)
		}
	}
	get := func(name, region string) tracetest.SpanStub {
		s, _ := find(spans, name, region)
		return s
	}
	pubA, repl := get(telemetry.SpanPublish, "us-east"), get(telemetry.SpanReplicate, "us-east")
	pubB := get(telemetry.SpanPublish, "eu-west")
	delA, delB := get(telemetry.SpanDeliver, "us-east"), get(telemetry.SpanDeliver, "eu-west")
	chain := []struct {
		what          string
		child, parent trace.SpanContext
	}{
		{"publish in us-east ← the producer's span", pubA.Parent, parentOf(traceID, producerSpan)},
		{"replicate ← publish in us-east", repl.Parent, pubA.SpanContext},
		{"publish in eu-west ← replicate", pubB.Parent, repl.SpanContext},
		{"deliver in eu-west ← publish in eu-west", delB.Parent, pubB.SpanContext},
		{"deliver in us-east ← publish in us-east", delA.Parent, pubA.SpanContext},
	}
	for _, c := range chain {
		if c.child.SpanID() != c.parent.SpanID() {
			t.Errorf("%s: parent span %s, want %s", c.what, c.child.SpanID(), c.parent.SpanID())
		}
	}
	adds := 0
	for _, s := range spans {
		if s.Name != telemetry.SpanBookieAdd {
			continue
		}
		adds++
		if p := s.Parent.SpanID(); p != pubA.SpanContext.SpanID() && p != pubB.SpanContext.SpanID() {
			t.Errorf("bookie add under span %s, not under a publish", p)
		}
	}
	if adds != 2 {
		t.Errorf("%d bookie adds, want one under each region's publish", adds)
	}
	if t.Failed() {
		t.Logf("spans:\n%s", describe(spans))
	}
}

func parentOf(traceID, spanID string) trace.SpanContext {
	sc, ok := telemetry.ParseTraceParent("00-" + traceID + "-" + spanID + "-01")
	if !ok {
		panic("bad traceparent in the test")
	}
	return sc
}

func describe(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %q region=%q parent=%s attrs=%v\n", s.SpanContext.SpanID(), s.Name, spanRegion(s),
			s.Parent.SpanID(), s.Attributes)
	}
	return b.String()
}
