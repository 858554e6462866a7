// Package telemetry is where a Meridian process sets up what it reports about
// itself: the Prometheus registry a region's /metrics endpoint serves and the
// handler that serves it, the slog logger and the stable keys log records
// carry, and the OpenTelemetry tracer provider with the names of the spans
// that follow a message.
//
// Where things are:
//   - metrics.go: NewRegistry and MetricsHandler;
//   - pulsar.go: MetricsConfig (how a region records and exposes Pulsar's
//     series), the label names of those series, and StatsBuckets with
//     Pulsar's write-latency and entry-size buckets;
//   - log.go: NewLogger, the log formats and the stable log keys; tracelog.go
//     adds a traced message's trace and span ids to the records about it;
//   - trace.go: Tracing, built from the standard OTEL_* variables (OTLP
//     export only); the span names and attributes; and the W3C traceparent
//     that a message carries in its properties, which the broker and the
//     replicator continue;
//   - hops.go: the hop trail, where a message has been and when (DESIGN §6).
//
// There is no OpenTelemetry meter: metrics are Prometheus's alone.
//
// Telemetry is built once, by the assembly of a process (one registry per
// region, one Tracing per process), and handed down: every other package
// declares its own metrics and takes a prometheus.Registerer and a
// *slog.Logger, so that no package below the assembly builds a registry,
// serves metrics or configures logging. The package imports nothing of
// Meridian's (DESIGN §2), so every layer may use its names.
package telemetry
