package remote

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/telemetry"
)

// An entry sent under a span carries that span's traceparent in
// wire.PropReplicationTraceParent, beside the producer's own traceparent,
// which is kept; a property of that name the producer forged is replaced.
// Without a span the entry carries none.
func TestPrepareCarriesTheReplicateSpan(t *testing.T) {
	const replicate = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := telemetry.ParseTraceParent(replicate)
	if !ok {
		t.Fatal("bad test traceparent")
	}
	props := func(ctx context.Context, entry []byte) map[string]string {
		t.Helper()
		out, err := prepareTraced(entry, "us-east", testIncarnation, nil, traceParentOf(ctx))
		if err != nil {
			t.Fatal(err)
		}
		md, err := wire.DecodeMessageMetadata(out.message)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range md.GetProperties() {
			if _, dup := m[kv.GetKey()]; dup {
				t.Errorf("property %s twice", kv.GetKey())
			}
			m[kv.GetKey()] = kv.GetValue()
		}
		return m
	}
	entry, md, payload := batchEntry(t, 102)
	traced := props(trace.ContextWithSpanContext(context.Background(), sc), entry)
	if traced[wire.PropReplicationTraceParent] != replicate || traced[telemetry.PropTraceParent] != "00-abc-def-01" {
		t.Errorf("traced entry's properties: %v", traced)
	}
	if untraced := props(context.Background(), entry); untraced[wire.PropReplicationTraceParent] != "" {
		t.Errorf("untraced entry carries %q", untraced[wire.PropReplicationTraceParent])
	}
	md.SetProperties(append(md.GetProperties(), keyValue(wire.PropReplicationTraceParent, "forged")))
	forged := storedEntry(t, 102, 1_700_000_000_200, md, payload)
	if got := props(context.Background(), forged)[wire.PropReplicationTraceParent]; got != "" {
		t.Errorf("a forged %s is kept: %q", wire.PropReplicationTraceParent, got)
	}
	if got := props(trace.ContextWithSpanContext(context.Background(), sc), forged)[wire.PropReplicationTraceParent]; got != replicate {
		t.Errorf("a forged %s is not replaced: %q", wire.PropReplicationTraceParent, got)
	}
}
