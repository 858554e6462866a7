package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID  = "00f067aa0ba902b7"
)

func TestParseTraceParent(t *testing.T) {
	good := "00-" + testTraceID + "-" + testSpanID + "-01"
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{in: good, ok: true, sampled: true},
		{in: "00-" + testTraceID + "-" + testSpanID + "-00", ok: true},
		{in: "00-" + testTraceID + "-" + testSpanID + "-03", ok: true, sampled: true}, // unknown flags dropped
		{in: "01-" + testTraceID + "-" + testSpanID + "-01-future", ok: true, sampled: true},
		{in: "00-" + testTraceID + "-" + testSpanID + "-01-future"}, // version 00 has exactly four fields
		{in: "01-" + testTraceID + "-" + testSpanID + "-01x"},
		{in: "ff-" + testTraceID + "-" + testSpanID + "-01"},
		{in: "00-" + strings.ToUpper(testTraceID) + "-" + testSpanID + "-01"},
		{in: "00-00000000000000000000000000000000-" + testSpanID + "-01"},
		{in: "00-" + testTraceID + "-0000000000000000-01"},
		{in: "00-" + testTraceID + "_" + testSpanID + "-01"},
		{in: good[:54]},
		{in: ""},
	} {
		sc, ok := ParseTraceParent(tc.in)
		if ok != tc.ok {
			t.Errorf("ParseTraceParent(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if sc.TraceID().String() != testTraceID || sc.SpanID().String() != testSpanID || sc.IsSampled() != tc.sampled || !sc.IsRemote() {
			t.Errorf("ParseTraceParent(%q) = %v", tc.in, sc)
		}
	}
	sc, _ := ParseTraceParent(good)
	if got := FormatTraceParent(sc); got != good {
		t.Errorf("FormatTraceParent = %q, want %q", got, good)
	}
	if n := testing.AllocsPerRun(100, func() { ParseTraceParent(good) }); n != 0 {
		t.Errorf("ParseTraceParent allocates %v times", n)
	}
}

// A span id derived from the same inputs is the same; any input changed
// changes it.
func TestPublishSpanID(t *testing.T) {
	parent, _ := ParseTraceParent("00-" + testTraceID + "-" + testSpanID + "-01")
	other, _ := ParseTraceParent("00-" + testTraceID + "-" + "00f067aa0ba902b8" + "-01")
	base := PublishSpanID(parent, "persistent://public/default/t", "p", 7, 0)
	if !base.IsValid() || base != PublishSpanID(parent, "persistent://public/default/t", "p", 7, 0) {
		t.Fatalf("PublishSpanID is not a valid function of its inputs: %v", base)
	}
	for name, id := range map[string]trace.SpanID{
		"parent":   PublishSpanID(other, "persistent://public/default/t", "p", 7, 0),
		"topic":    PublishSpanID(parent, "persistent://public/default/u", "p", 7, 0),
		"producer": PublishSpanID(parent, "persistent://public/default/t", "q", 7, 0),
		"sequence": PublishSpanID(parent, "persistent://public/default/t", "p", 8, 0),
		"chunk":    PublishSpanID(parent, "persistent://public/default/t", "p", 7, 1),
		// The separator keeps "ab"+"c" apart from "a"+"bc".
		"split": PublishSpanID(parent, "persistent://public/default/t"+"p", "", 7, 0),
	} {
		if id == base {
			t.Errorf("changing the %s leaves the span id %v", name, id)
		}
	}
	if n := testing.AllocsPerRun(100, func() { PublishSpanID(parent, "persistent://public/default/t", "p", 7, 0) }); n != 0 {
		t.Errorf("PublishSpanID allocates %v times", n)
	}
}

// A span started on a context of WithSpanID has that id; the next one a
// random id; a root span a random trace.
func TestTracingDerivedSpanIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewTracing(sdktrace.WithSyncer(exp))
	defer tr.Shutdown(context.Background())
	parent, _ := ParseTraceParent("00-" + testTraceID + "-" + testSpanID + "-01")
	want := PublishSpanID(parent, "t", "p", 1, 0)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	ctx, span := tr.Tracer("test").Start(WithSpanID(ctx, want), SpanPublish)
	_, child := tr.Tracer("test").Start(ctx, SpanBookieAdd)
	child.End()
	span.End()
	_, root := tr.Tracer("test").Start(context.Background(), "root")
	root.End()
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	add, pub, r := spans[0], spans[1], spans[2]
	if pub.SpanContext.SpanID() != want || pub.Parent.SpanID() != parent.SpanID() || pub.SpanContext.TraceID() != parent.TraceID() {
		t.Errorf("publish span %v (parent %v), want id %v under %v", pub.SpanContext, pub.Parent, want, parent)
	}
	if add.SpanContext.SpanID() == want || add.Parent.SpanID() != want {
		t.Errorf("child span %v under %v, want a fresh id under %v", add.SpanContext.SpanID(), add.Parent.SpanID(), want)
	}
	if !r.SpanContext.IsValid() || r.SpanContext.TraceID() == parent.TraceID() {
		t.Errorf("root span %v", r.SpanContext)
	}
}

func TestTracingFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		tracing bool
		err     error
	}{
		{name: "nothing set: no exporter", env: nil},
		{name: "none", env: map[string]string{envTracesExporter: "none", envEndpoint: "http://127.0.0.1:4318"}},
		{name: "endpoint alone", env: map[string]string{envEndpoint: "http://127.0.0.1:4318"}, tracing: true},
		{name: "traces endpoint alone", env: map[string]string{envTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, tracing: true},
		{name: "otlp", env: map[string]string{envTracesExporter: "otlp"}, tracing: true},
		{name: "otlp over grpc", env: map[string]string{envTracesExporter: "otlp", envProtocol: "grpc"}, tracing: true},
		{name: "traces protocol wins", env: map[string]string{envTracesExporter: "otlp", envProtocol: "thrift", envTracesProtocol: "grpc"}, tracing: true},
		{name: "zipkin", env: map[string]string{envTracesExporter: "zipkin"}, err: ErrUnsupportedExporter},
		{name: "unknown protocol", env: map[string]string{envTracesExporter: "otlp", envProtocol: "thrift"}, err: ErrUnsupportedExporter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := TracingFromEnv(context.Background(), func(k string) string { return tc.env[k] })
			if tr != nil && !tr.followsParent {
				t.Errorf("the default sampler, parentbased_always_on, is not known to follow the parent")
			}
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if (tr != nil) != tc.tracing {
				t.Fatalf("tracing = %v, want %v", tr != nil, tc.tracing)
			}
			if tr != nil {
				// Nothing listens: the shutdown's flush has nothing to send.
				if err := tr.Shutdown(context.Background()); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}
		})
	}
}

// The resource names the service meridian, unless OTEL_SERVICE_NAME says
// otherwise, and carries OTEL_RESOURCE_ATTRIBUTES.
func TestTracingResource(t *testing.T) {
	res, err := tracingResource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Set().Value("service.name"); v.AsString() != DefaultServiceName {
		t.Errorf("service.name = %q, want %q", v.AsString(), DefaultServiceName)
	}
	t.Setenv("OTEL_SERVICE_NAME", "meridian-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	if res, err = tracingResource(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[attribute.Key]string{"service.name": "meridian-eu", "deployment.environment": "test"} {
		if v, _ := res.Set().Value(k); v.AsString() != want {
			t.Errorf("%s = %q, want %q", k, v.AsString(), want)
		}
	}
}

// A record logged on the context of a span carries its trace and span ids;
// one without a span carries neither.
func TestLoggerCarriesTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, LogJSON, slog.LevelInfo).With(KeyTopic, "t")
	sc, _ := ParseTraceParent("00-" + testTraceID + "-" + testSpanID + "-01")
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.Info("untraced")
	WithTraceIDs(slog.New(slog.NewJSONHandler(&buf, nil))).InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "wrapped")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, want := range []bool{true, false, true} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil {
			t.Fatal(err)
		}
		_, has := rec[KeyTraceID]
		if has != want || (want && (rec[KeyTraceID] != testTraceID || rec[KeySpanID] != testSpanID)) {
			t.Errorf("line %d: %s", i, lines[i])
		}
	}
	if KeyTraceID != "trace_id" || KeySpanID != "span_id" {
		t.Errorf("the keys are a contract with log pipelines: %q, %q", KeyTraceID, KeySpanID)
	}
}

// Drops is true only for an unsampled parent under a sampler known to
// follow it: parentbased_* (or unset) from the environment, or
// NewParentBasedTracing; never for NewTracing, whose sampler is unknown.
func TestTracingDrops(t *testing.T) {
	sampled, _ := ParseTraceParent("00-" + testTraceID + "-" + testSpanID + "-01")
	unsampled, _ := ParseTraceParent("00-" + testTraceID + "-" + testSpanID + "-00")
	env := func(sampler string) *Tracing {
		tr, err := TracingFromEnv(context.Background(), func(k string) string {
			return map[string]string{envTracesExporter: "otlp", envTracesSampler: sampler}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Shutdown(context.Background()) })
		return tr
	}
	plain := NewTracing()
	parentBased := NewParentBasedTracing(sdktrace.TraceIDRatioBased(0.01))
	for _, tc := range []struct {
		name string
		tr   *Tracing
		want bool
	}{
		{"env default", env(""), true},
		{"env parentbased_traceidratio", env("parentbased_traceidratio"), true},
		{"env always_on", env("always_on"), false},
		{"env traceidratio", env("traceidratio"), false},
		{"NewTracing", plain, false},
		{"NewParentBasedTracing", parentBased, true},
	} {
		if got := tc.tr.Drops(unsampled); got != tc.want {
			t.Errorf("%s: Drops(unsampled) = %v, want %v", tc.name, got, tc.want)
		}
		if tc.tr.Drops(sampled) {
			t.Errorf("%s: drops a sampled parent", tc.name)
		}
	}
}

func TestTraceParentSampled(t *testing.T) {
	for v, want := range map[string]bool{
		"00-" + testTraceID + "-" + testSpanID + "-01": true,
		"00-" + testTraceID + "-" + testSpanID + "-03": true,
		"00-" + testTraceID + "-" + testSpanID + "-00": false,
		"00-" + testTraceID + "-" + testSpanID + "-02": false,
		"00-" + testTraceID + "-" + testSpanID + "-0":  false,
		"00-" + testTraceID + "-" + testSpanID + "-0x": false,
		"": false,
	} {
		if got := TraceParentSampled(v); got != want {
			t.Errorf("TraceParentSampled(%q) = %v, want %v", v, got, want)
		}
		if got := TraceParentSampled([]byte(v)); got != want {
			t.Errorf("TraceParentSampled(bytes %q) = %v, want %v", v, got, want)
		}
	}
}
