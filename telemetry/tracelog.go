package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The keys under which a log record about a traced message names its trace
// and span, so that a log pipeline joins the record to the trace. A record
// gets them from its context (Logger.InfoContext and the like, on a
// context that holds the message's span): every logger of NewLogger adds
// them.
const (
	KeyTraceID = "trace_id"
	KeySpanID  = "span_id"
)

// traceHandler adds KeyTraceID and KeySpanID to every record whose context
// holds a valid span context. It looks at the context only for a record
// that is written, so a disabled level costs nothing.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String(KeyTraceID, sc.TraceID().String()), slog.String(KeySpanID, sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}

// WithTraceIDs returns a logger writing through log's handler that adds the
// trace and span ids of each record's context (NewLogger's loggers already
// do; this is for a logger made elsewhere, such as a test's).
func WithTraceIDs(log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(traceHandler); ok {
		return log
	}
	return slog.New(traceHandler{log.Handler()})
}
