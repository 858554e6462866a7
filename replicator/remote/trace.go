package remote

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/telemetry"
)

// traceParentOf is the traceparent of the span ctx holds, or "" when it
// holds none: the common case, which does not allocate.
func traceParentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return telemetry.FormatTraceParent(sc)
}
