package broker

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/telemetry"
)

// The broker's spans (DESIGN §6). An entry whose batch-level metadata
// carries a traceparent is traced: its publish span (a child of that
// context, or, for an entry that came by replication, of the replicate
// span the replicator wrote next to it) covers the SEND to its receipt,
// with the bookie add as a child, and every delivery of the entry to a
// consumer is a deliver span, a child of that publish.
//
// The publish span's id is telemetry.PublishSpanID of what the stored
// entry says, so the dispatcher, the replicator and a broker that takes
// the topic over name it as a parent without the entry being rewritten.
//
// Cost: with tracing off (no Tracing) nothing here runs. With it on, an
// entry without a traceparent costs one bytes.Contains over its metadata,
// and one whose traceparent is not sampled (under a parent-based sampler)
// a walk of its encoded properties: neither allocates. Only a sampled
// entry's metadata is decoded.

// traceHooks makes the broker's spans; nil when the broker does not trace.
type traceHooks struct {
	tracing *telemetry.Tracing
	tracer  trace.Tracer
	region  string
	log     *slog.Logger
}

func newTraceHooks(t *telemetry.Tracing, region string, log *slog.Logger) *traceHooks {
	if t == nil {
		return nil
	}
	return &traceHooks{tracing: t, tracer: t.Tracer("broker"), region: region, log: log}
}

// parent is the sampled trace context an entry continues, read from its
// encoded metadata without decoding it; ok is false for an entry that is
// not traced, or whose trace the sampler is known to drop (an unsampled
// traceparent under a parent-based sampler: what most messages of a
// producer sampling at 1% carry). Neither case allocates.
func (h *traceHooks) parent(metadata []byte) (trace.SpanContext, bool) {
	if !bytes.Contains(metadata, traceParentKey) {
		return trace.SpanContext{}, false
	}
	value := wire.TraceParentInMetadata(metadata)
	if h.tracing.FollowsParent() && !telemetry.TraceParentSampled(value) {
		return trace.SpanContext{}, false
	}
	parent, ok := telemetry.ParseTraceParent(value)
	return parent, ok && !h.tracing.Drops(parent)
}

var traceParentKey = []byte(telemetry.PropTraceParent)

// publishTrace is the spans of one traced SEND, ended by finish.
type publishTrace struct {
	hooks   *traceHooks
	ctx     context.Context // holds the publish span
	topic   string
	publish trace.Span
	add     trace.Span
}

// startPublishTrace starts the publish and bookie-add spans of the SEND
// in f when its metadata carries a traceparent; nil otherwise.
func (t *Topic) startPublishTrace(f *wire.Frame) *publishTrace {
	h := t.svc.traces
	if h == nil {
		return nil
	}
	parent, ok := h.parent(f.Metadata)
	if !ok {
		return nil
	}
	md, err := f.DecodeMetadata()
	if err != nil {
		return nil
	}
	topic := t.Name()
	id := telemetry.PublishSpanID(parent, topic, md.GetProducerName(), md.GetSequenceId(), md.GetChunkId())
	ctx := telemetry.WithSpanID(trace.ContextWithRemoteSpanContext(context.Background(), parent), id)
	attrs := []attribute.KeyValue{
		telemetry.AttrSystem.String("pulsar"), telemetry.AttrOperation.String("publish"),
		telemetry.AttrDestination.String(topic), telemetry.AttrRegion.String(h.region),
		telemetry.AttrBatchCount.Int(int(max(md.GetNumMessagesInBatch(), 1))),
	}
	if from := md.GetReplicatedFrom(); from != "" {
		attrs = append(attrs, telemetry.AttrReplicatedFrom.String(from))
	}
	ctx, publish := h.tracer.Start(ctx, telemetry.SpanPublish, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if !publish.IsRecording() {
		return nil // sampled out: nothing to end
	}
	// The add's id is random: nothing names it as a parent.
	_, add := h.tracer.Start(context.WithoutCancel(ctx), telemetry.SpanBookieAdd, trace.WithSpanKind(trace.SpanKindClient))
	return &publishTrace{hooks: h, ctx: ctx, topic: topic, publish: publish, add: add}
}

// finish ends the spans of a SEND stored at pos, or failed with err. It
// does nothing on a nil publishTrace (an untraced SEND).
func (p *publishTrace) finish(pos mledger.Position, err error) {
	if p == nil {
		return
	}
	if err != nil {
		p.add.RecordError(err)
		p.add.SetStatus(codes.Error, "append failed")
		p.publish.SetStatus(codes.Error, err.Error())
		p.hooks.log.WarnContext(p.ctx, "traced message not stored", telemetry.KeyTopic, p.topic, "err", err)
	} else {
		p.publish.SetAttributes(telemetry.AttrMessageID.String(strconv.FormatInt(pos.Ledger, 10) + ":" + strconv.FormatInt(pos.Entry, 10)))
	}
	p.add.End()
	p.publish.End()
}

// traceDeliver records the delivery of d to its consumer as a deliver
// span, a child of the entry's publish span in this region, when the
// entry is traced.
func (s *subscription) traceDeliver(d delivery) {
	h := s.topic.svc.traces
	if h == nil {
		return
	}
	parent, ok := telemetry.ParseTraceParent(wire.TraceParentOf(d.e.md))
	if !ok || h.tracing.Drops(parent) {
		return
	}
	topic := s.topic.Name()
	md := d.e.md
	publish := telemetry.ChildOf(parent, telemetry.PublishSpanID(parent, topic, md.GetProducerName(), md.GetSequenceId(), md.GetChunkId()))
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), publish)
	_, span := h.tracer.Start(ctx, telemetry.SpanDeliver, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		telemetry.AttrSystem.String("pulsar"), telemetry.AttrOperation.String("deliver"),
		telemetry.AttrDestination.String(topic), telemetry.AttrRegion.String(h.region),
		telemetry.AttrSubscription.String(s.name),
		telemetry.AttrMessageID.String(d.e.pos.String()),
		attribute.Int64("messaging.pulsar.consumer_id", int64(d.c.id)),
		attribute.Int64("messaging.pulsar.redelivery_count", int64(d.redelivered)),
	))
	span.End()
}
