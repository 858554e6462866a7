package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/telemetry"
)

// BenchmarkPublish publishes 1 KiB messages through pulsar-client-go with
// batching (1 ms) to a broker in the same process, on in-memory bookies:
// the profile of the broker's publish path without storage. The end-to-end
// figures users compare come from pulsar-client-go's perf tool against
// `meridian standalone` (docs/BENCHMARKS.md).
func BenchmarkPublish(b *testing.B) {
	publishBench(b, startBroker(b, nil))
}

// BenchmarkPublishTracing is BenchmarkPublish on a broker that traces
// (into an exporter that drops the spans), with messages that carry no
// traceparent: what tracing turned on costs the untraced publish path,
// allocations included (compare allocs/op with BenchmarkPublish's).
func BenchmarkPublishTracing(b *testing.B) {
	tracing := telemetry.NewTracing(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { tracing.Shutdown(context.Background()) })
	publishBench(b, startBroker(b, nil, func(c *brokertest.Config) { c.Service.Tracing = tracing }))
}

func publishBench(b *testing.B, r *brokertest.Broker) {
	c := newClient(b, r.ServiceURL())
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "bench-publish", BatchingMaxPublishDelay: time.Millisecond,
		MaxPendingMessages: 10000})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	payload := make([]byte, 1024)
	ctx := context.Background()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		b.Fatal(err)
	}
}
