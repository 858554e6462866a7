// Package telemetry is where a Meridian process sets up what it reports about
// itself: the Prometheus registry a region's /metrics endpoint serves, the
// handler that serves it, the slog logger and the stable keys log records
// carry. Later it also holds the OpenTelemetry trace and meter setup and the
// propagation of trace context through message properties.
//
// Telemetry is built once, by the assembly of a process (one registry per
// region), and handed down: every other package declares its own metrics and
// takes a prometheus.Registerer and a *slog.Logger, so that no package below
// the assembly builds a registry, serves metrics or configures logging. The
// package imports nothing of Meridian's (DESIGN §2), so every layer may use
// its names.
package telemetry
