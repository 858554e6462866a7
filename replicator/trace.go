package replicator

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/telemetry"
)

// The replicator's span (DESIGN §6): an entry whose batch-level metadata
// carries a traceparent is replicated under a replicate span, a child of
// the entry's publish span in this region (telemetry.PublishSpanID names
// it from the stored entry alone), from the send to the remote broker's
// receipt. The remote producer writes the span's context into the entry it
// sends (wire.PropReplicationTraceParent), and the destination broker's
// publish continues from it. Untraced entries cost a scan of the already
// decoded properties and no allocation.

// replicateTrace is the span of one traced entry in flight; nil when the
// entry is not traced.
type replicateTrace struct {
	ctx  context.Context // holds the span, for Send and for log records
	span trace.Span
	log  *slog.Logger
}

// startReplicateTrace starts the replicate span of the entry at pos with
// metadata md when it is traced and the worker traces; it returns the
// context to send the entry with (ctx itself when untraced).
func (t *task) startReplicateTrace(ctx context.Context, pos mledger.Position, md *pb.MessageMetadata) (context.Context, *replicateTrace) {
	tracing := t.w.cfg.Tracing
	if tracing == nil {
		return ctx, nil
	}
	var value string
	for _, kv := range md.GetProperties() {
		if kv.GetKey() == telemetry.PropTraceParent {
			value = kv.GetValue()
			break
		}
	}
	if value == "" {
		return ctx, nil
	}
	parent, ok := telemetry.ParseTraceParent(value)
	if !ok || tracing.Drops(parent) {
		return ctx, nil
	}
	publish := telemetry.ChildOf(parent, telemetry.PublishSpanID(parent, t.id.Topic, md.GetProducerName(), md.GetSequenceId(), md.GetChunkId()))
	sctx, span := tracing.Tracer("replicator").Start(trace.ContextWithRemoteSpanContext(ctx, publish), telemetry.SpanReplicate,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			telemetry.AttrSystem.String("pulsar"), telemetry.AttrOperation.String("send"),
			telemetry.AttrDestination.String(t.id.Topic), telemetry.AttrRegion.String(t.w.cfg.Region),
			telemetry.AttrRemoteRegion.String(t.id.Remote), telemetry.AttrMessageID.String(pos.String()),
		))
	return sctx, &replicateTrace{ctx: sctx, span: span, log: t.log}
}

// finish ends the span once the remote broker answered (err nil) or the
// entry failed to go; nothing on a nil replicateTrace.
func (r *replicateTrace) finish(err error) {
	if r == nil {
		return
	}
	if err != nil {
		r.span.RecordError(err)
		r.span.SetStatus(codes.Error, "not replicated")
		r.log.WarnContext(r.ctx, "traced entry not replicated; the task retries it", "err", err)
	}
	r.span.End()
}
