package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/topology"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// traceFixture is a topic and subscription with just what the trace hooks
// read, on a broker tracing into an in-memory exporter.
func traceFixture(t testing.TB) (*Topic, *subscription, *tracetest.InMemoryExporter) {
	t.Helper()
	return traceFixtureLogging(t, slog.New(slog.DiscardHandler))
}

func traceFixtureLogging(t testing.TB, log *slog.Logger) (*Topic, *subscription, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tracing := telemetry.NewTracing(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tracing.Shutdown(context.Background()) })
	name, err := topology.ParseTopicName("persistent://public/default/traced")
	if err != nil {
		t.Fatal(err)
	}
	tp := &Topic{svc: &Service{traces: newTraceHooks(tracing, "us-east", log)}, name: name}
	return tp, &subscription{topic: tp, name: "s"}, exp
}

// sendOf is a SEND's frame and its stored dispatch entry, with metadata
// carrying props.
func sendOf(t testing.TB, props map[string]string) (*wire.Frame, delivery) {
	t.Helper()
	md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(7), PublishTime: proto.Uint64(1)}.Build()
	for k, v := range props {
		md.SetProperties(append(md.GetProperties(), pb.KeyValue_builder{Key: proto.String(k), Value: proto.String(v)}.Build()))
	}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	e := &dispatchEntry{pos: mledger.Position{Ledger: 3, Entry: 4}, md: md, size: 1}
	return &wire.Frame{Metadata: b}, delivery{c: &consumer{id: 1}, e: e}
}

// An entry without a traceparent, on a broker that traces, costs no
// allocation in the publish and dispatch hooks, and records nothing.
func TestUntracedEntriesDoNotAllocate(t *testing.T) {
	tp, sub, exp := traceFixture(t)
	for name, props := range map[string]map[string]string{
		"no properties":           nil,
		"other properties":        {"app": "orders", "region": "us-east"},
		"a malformed traceparent": {telemetry.PropTraceParent: "not-a-traceparent"},
	} {
		f, d := sendOf(t, props)
		allocs := testing.AllocsPerRun(200, func() {
			tp.startPublishTrace(f).finish(mledger.Position{}, nil)
			sub.traceDeliver(d)
		})
		// The malformed value is found, so its metadata is decoded: that
		// is the only case that allocates, and it makes no span.
		if name != "a malformed traceparent" && allocs != 0 {
			t.Errorf("%s: the trace hooks allocate %v times per entry", name, allocs)
		}
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("untraced entries made %d spans", len(spans))
	}
}

// A traced SEND makes a publish span, a child of its traceparent, with the
// bookie add under it; its delivery is a deliver span under that publish,
// found from the stored entry alone.
func TestTracedEntrySpans(t *testing.T) {
	tp, sub, exp := traceFixture(t)
	f, d := sendOf(t, map[string]string{telemetry.PropTraceParent: testTraceParent})
	tp.startPublishTrace(f).finish(mledger.Position{Ledger: 3, Entry: 4}, nil)
	sub.traceDeliver(d)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want bookie add, publish and deliver", len(spans))
	}
	add, pub, del := spans[0], spans[1], spans[2]
	parent, _ := telemetry.ParseTraceParent(testTraceParent)
	wantID := telemetry.PublishSpanID(parent, "persistent://public/default/traced", "p", 7, 0)
	switch {
	case pub.Name != telemetry.SpanPublish || pub.SpanContext.SpanID() != wantID || pub.Parent.SpanID() != parent.SpanID():
		t.Errorf("publish span %q %v under %v, want id %v under %v", pub.Name, pub.SpanContext.SpanID(), pub.Parent.SpanID(), wantID, parent.SpanID())
	case add.Name != telemetry.SpanBookieAdd || add.Parent.SpanID() != wantID || add.SpanContext.SpanID() == wantID:
		t.Errorf("bookie add %q %v under %v", add.Name, add.SpanContext.SpanID(), add.Parent.SpanID())
	case del.Name != telemetry.SpanDeliver || del.Parent.SpanID() != wantID:
		t.Errorf("deliver %q under %v, want under %v", del.Name, del.Parent.SpanID(), wantID)
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != parent.TraceID() {
			t.Errorf("span %q in trace %v", s.Name, s.SpanContext.TraceID())
		}
	}
}

// An entry that came by replication continues the replicate span's
// context, not the producer's.
func TestReplicatedEntryContinuesTheReplicateSpan(t *testing.T) {
	tp, _, exp := traceFixture(t)
	const replicate = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	f, _ := sendOf(t, map[string]string{telemetry.PropTraceParent: testTraceParent, wire.PropReplicationTraceParent: replicate})
	tp.startPublishTrace(f).finish(mledger.Position{}, nil)
	for _, s := range exp.GetSpans() {
		if s.Name == telemetry.SpanPublish && s.Parent.SpanID().String() != "1111111111111111" {
			t.Errorf("publish of a replicated entry under %v, want the replicate span", s.Parent.SpanID())
		}
	}
}

// BenchmarkTraceHooksUntraced is the cost of tracing on for an entry
// without a traceparent: the publish and dispatch hooks.
func BenchmarkTraceHooksUntraced(b *testing.B) {
	tp, sub, _ := traceFixture(b)
	f, d := sendOf(b, map[string]string{"app": "orders"})
	b.ReportAllocs()
	for b.Loop() {
		tp.startPublishTrace(f).finish(mledger.Position{}, nil)
		sub.traceDeliver(d)
	}
}

// BenchmarkTraceHooksTraced is the cost for a traced, sampled entry.
func BenchmarkTraceHooksTraced(b *testing.B) {
	tp, sub, _ := traceFixture(b)
	f, d := sendOf(b, map[string]string{telemetry.PropTraceParent: testTraceParent})
	b.ReportAllocs()
	for b.Loop() {
		tp.startPublishTrace(f).finish(mledger.Position{}, nil)
		sub.traceDeliver(d)
	}
}

// A traced message that is not stored is logged with its trace id.
func TestFailedTracedPublishIsLoggedWithItsTraceID(t *testing.T) {
	var buf bytes.Buffer
	tp, _, exp := traceFixtureLogging(t, telemetry.NewLogger(&buf, telemetry.LogJSON, slog.LevelInfo))
	f, _ := sendOf(t, map[string]string{telemetry.PropTraceParent: testTraceParent})
	tp.startPublishTrace(f).finish(mledger.Position{}, errors.New("bookies unreachable"))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log: %v\n%s", err, buf.String())
	}
	if rec[telemetry.KeyTraceID] != "4bf92f3577b34da6a3ce929d0e0e4736" || rec[telemetry.KeyTopic] != "persistent://public/default/traced" {
		t.Errorf("log record %v lacks the trace id or the topic", rec)
	}
	for _, s := range exp.GetSpans() {
		if s.Status.Code != codes.Error {
			t.Errorf("span %q of a failed publish has status %v", s.Name, s.Status)
		}
	}
}

// Under a parent-based sampler, an entry whose traceparent is not sampled
// (what most messages of a producer sampling at 1% carry) makes no span
// and costs no allocation in the publish and dispatch hooks.
func TestUnsampledEntriesDoNotAllocate(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracing := telemetry.NewParentBasedTracing(sdktrace.AlwaysSample(), sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tracing.Shutdown(context.Background()) })
	tp, sub, _ := traceFixture(t)
	tp.svc.traces = newTraceHooks(tracing, "us-east", slog.New(slog.DiscardHandler))
	f, d := sendOf(t, map[string]string{telemetry.PropTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"})
	if n := testing.AllocsPerRun(200, func() {
		tp.startPublishTrace(f).finish(mledger.Position{}, nil)
		sub.traceDeliver(d)
	}); n != 0 {
		t.Errorf("an unsampled entry costs %v allocations", n)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("an unsampled entry made %d spans", len(spans))
	}
	// The sampled flag is what decides: the same entry sampled is traced.
	f, d = sendOf(t, map[string]string{telemetry.PropTraceParent: testTraceParent})
	tp.startPublishTrace(f).finish(mledger.Position{}, nil)
	sub.traceDeliver(d)
	if spans := exp.GetSpans(); len(spans) != 3 {
		t.Errorf("a sampled entry made %d spans, want 3", len(spans))
	}
}
