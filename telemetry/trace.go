package telemetry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// PropTraceParent is the message property that carries a W3C trace context
// (https://www.w3.org/TR/trace-context/#traceparent-header), as
// OpenTelemetry's Pulsar instrumentations write it. pulsar-client-go copies
// the first message's properties to a batch's metadata, so a batch is
// traced through its first message.
const PropTraceParent = "traceparent"

// The names of the spans that follow a message, one chain per trace:
// publish (with its bookie add as a child) in the region the message was
// published in, replicate by that region's replicator, publish again
// in each destination region (a child of replicate), and deliver to each
// consumer in every region (a child of that region's publish).
const (
	SpanPublish   = "publish"
	SpanBookieAdd = "bookie add"
	SpanReplicate = "replicate"
	SpanDeliver   = "deliver"
)

// Attribute keys of Meridian's spans, beside OpenTelemetry's messaging
// conventions (messaging.system, messaging.destination.name, ...).
const (
	AttrRegion         = attribute.Key("meridian.region")
	AttrRemoteRegion   = attribute.Key("meridian.remote_region")
	AttrSubscription   = attribute.Key("messaging.destination.subscription.name")
	AttrDestination    = attribute.Key("messaging.destination.name")
	AttrSystem         = attribute.Key("messaging.system")
	AttrOperation      = attribute.Key("messaging.operation.type")
	AttrMessageID      = attribute.Key("messaging.message.id")
	AttrBatchCount     = attribute.Key("messaging.batch.message_count")
	AttrReplicatedFrom = attribute.Key("meridian.replicated_from")
)

// Tracing is a process's OpenTelemetry tracer provider. It is made once, by
// the assembly, and handed to the broker and the replicator: nothing below
// the assembly touches otel's global provider.
//
// Its provider always derives the span id of a span started on a context
// from WithSpanID, so that a later hop, in another process, can name a
// span it never saw as its parent: see PublishSpanID.
type Tracing struct {
	provider *sdktrace.TracerProvider
	// followsParent is set when the sampler is known to be parent-based:
	// then a message whose traceparent is not sampled is known to make no
	// span, and the broker skips it before doing any work (Drops).
	followsParent bool
}

// NewTracing returns a Tracing over an SDK provider with opts (an exporter
// or span processor, a sampler, a resource; tests pass tracetest's
// in-memory exporter through sdktrace.WithSyncer). Without a sampler
// option the sampler is the one OTEL_TRACES_SAMPLER names, by default
// parent-based always-on, so a message's own traceparent decides.
func NewTracing(opts ...sdktrace.TracerProviderOption) *Tracing {
	opts = append(opts, sdktrace.WithIDGenerator(derivedIDs{}))
	return &Tracing{provider: sdktrace.NewTracerProvider(opts...)}
}

// NewParentBasedTracing is NewTracing with the sampler
// sdktrace.ParentBased(root): a message's own sampling decision (its
// traceparent's flag) is followed, root samples the rest.
func NewParentBasedTracing(root sdktrace.Sampler, opts ...sdktrace.TracerProviderOption) *Tracing {
	t := NewTracing(append(opts, sdktrace.WithSampler(sdktrace.ParentBased(root)))...)
	t.followsParent = true
	return t
}

// Drops reports whether a span whose remote parent is parent is known to
// be dropped by the sampler: parent is not sampled and the sampler follows
// the parent. A caller may then skip the span, and the work of describing
// it, altogether.
func (t *Tracing) Drops(parent trace.SpanContext) bool {
	return t.followsParent && !parent.IsSampled()
}

// FollowsParent reports whether the sampler is known to follow a remote
// parent's decision (see Drops).
func (t *Tracing) FollowsParent() bool { return t.followsParent }

// TraceParentSampled reads only the sampled flag of a traceparent value,
// without validating the rest: the cheap first look of a caller that skips
// unsampled messages (FollowsParent) before parsing the few that are.
func TraceParentSampled[T string | []byte](v T) bool {
	const flags = 53 // 00-<32 hex>-<16 hex>-<flags>
	if len(v) < flags+2 {
		return false
	}
	lo, ok := nibble(v[flags+1])
	return ok && lo&byte(trace.FlagsSampled) != 0
}

// Tracer returns the tracer of one component (broker, replicator).
func (t *Tracing) Tracer(component string) trace.Tracer {
	return t.provider.Tracer("github.com/meridian-mq/meridian/" + component)
}

// Shutdown flushes the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// The OpenTelemetry environment variables TracingFromEnv reads itself; the
// OTLP exporters read their own (OTEL_EXPORTER_OTLP_*), the SDK its
// sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and batching
// (OTEL_BSP_*), and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
const (
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesSampler  = "OTEL_TRACES_SAMPLER"
)

// DefaultServiceName names the process in its resource unless
// OTEL_SERVICE_NAME says otherwise.
const DefaultServiceName = "meridian"

// TracingFromEnv builds the process's Tracing from the standard OTEL_*
// variables, read through getenv (os.Getenv in a process):
//
//   - OTEL_TRACES_EXPORTER "otlp" exports over OTLP; "none" does not trace;
//     any other exporter is an error (ErrUnsupportedExporter).
//   - With OTEL_TRACES_EXPORTER unset or empty, spans are exported over
//     OTLP only when an endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); otherwise nothing is traced.
//     This differs on purpose from contrib's autoexport, which exports to
//     localhost when nothing is set: a broker no one asked to trace pays
//     nothing for tracing.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
//     is "http/protobuf" (the default, as the specification has it) or
//     "grpc".
//
// It returns nil, and no error, when nothing is to be traced; a nil
// *Tracing is what the broker and the replicator take for "off".
func TracingFromEnv(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	switch exp := strings.TrimSpace(getenv(envTracesExporter)); exp {
	case "none":
		return nil, nil
	case "":
		if getenv(envEndpoint) == "" && getenv(envTracesEndpoint) == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("%w: %s=%q, want otlp or none", ErrUnsupportedExporter, envTracesExporter, exp)
	}
	protocol := getenv(envTracesProtocol)
	if protocol == "" {
		protocol = getenv(envProtocol)
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q, want http/protobuf or grpc", ErrUnsupportedExporter, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := tracingResource(ctx)
	if err != nil {
		return nil, err
	}
	t := NewTracing(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	// The SDK reads the sampler from OTEL_TRACES_SAMPLER too, through the
	// process's environment; unset, it is parentbased_always_on.
	sampler := getenv(envTracesSampler)
	t.followsParent = sampler == "" || strings.HasPrefix(sampler, "parentbased_")
	return t, nil
}

// tracingResource is DefaultServiceName and the SDK's attributes, under
// what OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES set (they win).
func tracingResource(ctx context.Context) (*resource.Resource, error) {
	fromEnv, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	base := resource.NewSchemaless(attribute.String("service.name", DefaultServiceName))
	res, err := resource.Merge(base, fromEnv)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// spanIDKey keys the span id WithSpanID puts in a context.
type spanIDKey struct{}

// pendingSpanID is a span id waiting for the first span started on its
// context to take it; the spans started after (that span's children, on
// the context it returns) get random ids.
type pendingSpanID struct{ id atomic.Pointer[trace.SpanID] }

// WithSpanID returns ctx asking the Tracing's provider to give the first
// span started on it (or on a context derived from it) the id id.
func WithSpanID(ctx context.Context, id trace.SpanID) context.Context {
	p := &pendingSpanID{}
	p.id.Store(&id)
	return context.WithValue(ctx, spanIDKey{}, p)
}

// derivedIDs is the provider's id generator: the first span started on a
// context of WithSpanID gets that id, any other a random one (math/rand/v2's
// generator, safe for concurrent use and randomly seeded, as the SDK's own
// is random).
type derivedIDs struct{}

func (derivedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for tid == (trace.TraceID{}) {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	return tid, derivedIDs{}.NewSpanID(ctx, tid)
}

func (derivedIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if p, ok := ctx.Value(spanIDKey{}).(*pendingSpanID); ok {
		if id := p.id.Swap(nil); id != nil && id.IsValid() {
			return *id
		}
	}
	var sid trace.SpanID
	for sid == (trace.SpanID{}) {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// PublishSpanID is the span id of a message's publish span in one region,
// derived from what every later hop reads in the stored entry: the span
// context the broker continued (the message's traceparent, or the
// replicate span's in a destination region), the topic, and the message's
// producer name, sequence id and chunk id (0 for a message in one piece).
//
// The publish span's id is derived, not random, because its children run
// elsewhere: the replicator reads the entry from the bookies and the
// dispatcher reads it from storage, maybe after a restart or on another
// broker, and neither can learn a random id without the broker rewriting
// the entry it stores. Two publishes of one traced message (a resend the
// deduplication drops) get the same id, and only the first has a span.
func PublishSpanID(parent trace.SpanContext, topic, producer string, sequenceID uint64, chunk int32) trace.SpanID {
	// FNV-1a, 64 bits, inline: hash/fnv's Hash64 escapes to the heap, and
	// this runs for every traced message (TestPublishSpanID: no allocation).
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	tid, sid := parent.TraceID(), parent.SpanID()
	for _, b := range tid {
		h = (h ^ uint64(b)) * prime
	}
	for _, b := range sid {
		h = (h ^ uint64(b)) * prime
	}
	for _, s := range [...]string{topic, producer} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime // separates the strings
	}
	for i := range 8 {
		h = (h ^ (sequenceID >> (8 * i) & 0xff)) * prime
	}
	for i := range 4 {
		h = (h ^ uint64(uint32(chunk)>>(8*i)&0xff)) * prime
	}
	if h == 0 {
		h = 1 // the zero id is invalid
	}
	var id trace.SpanID
	putUint64(id[:], h)
	return id
}

// ParseTraceParent reads a W3C traceparent value into a remote span
// context. ok is false for anything malformed: the wrong length or
// separators, a character that is not lowercase hex, the version ff, or an
// all-zero trace or parent id. A version above 00 may carry more fields
// after a dash, which are ignored (the specification's rule). It does not
// allocate.
//
// It takes the value as a string or as the bytes of a message's metadata,
// so that a broker reads it without copying.
func ParseTraceParent[T string | []byte](v T) (sc trace.SpanContext, ok bool) {
	const size = 55 // 00-<32 hex>-<16 hex>-<2 hex>
	if len(v) < size || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return trace.SpanContext{}, false
	}
	var version, flags [1]byte
	var tid trace.TraceID
	var sid trace.SpanID
	if !unhex(version[:], v[:2]) || version[0] == 0xff ||
		(version[0] == 0 && len(v) != size) || (len(v) > size && v[size] != '-') ||
		!unhex(tid[:], v[3:35]) || !unhex(sid[:], v[36:52]) || !unhex(flags[:], v[53:55]) {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true,
	})
	return sc, sc.IsValid()
}

// unhex decodes lowercase hex s into dst, which is len(s)/2 bytes.
func unhex[T string | []byte](dst []byte, s T) bool {
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatTraceParent writes sc as a version 00 traceparent value.
func FormatTraceParent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// ChildOf is the span context of the span with id spanID in sc's trace,
// with sc's flags: how a later hop names a span it did not start (see
// PublishSpanID) as the parent of its own.
func ChildOf(sc trace.SpanContext, spanID trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: sc.TraceID(), SpanID: spanID, TraceFlags: sc.TraceFlags(), Remote: true,
	})
}
