package main

import (
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/telemetry"
)

// traceProperties is the properties of one `perf produce` message with
// --traceparent-ratio ratio: a traceparent of a new trace, sampled with
// probability ratio; nil for a ratio below 0 (no traceparent, the default).
func traceProperties(ratio float64) map[string]string {
	if ratio < 0 {
		return nil
	}
	var cfg trace.SpanContextConfig
	binary.BigEndian.PutUint64(cfg.TraceID[:8], rand.Uint64())
	binary.BigEndian.PutUint64(cfg.TraceID[8:], rand.Uint64()|1) // never all zero
	binary.BigEndian.PutUint64(cfg.SpanID[:], rand.Uint64()|1)
	if rand.Float64() < ratio {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return map[string]string{telemetry.PropTraceParent: telemetry.FormatTraceParent(trace.NewSpanContext(cfg))}
}
