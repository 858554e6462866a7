package telemetry

import "errors"

// ErrUnknownLogFormat is returned for a log format other than text or json.
var ErrUnknownLogFormat = errors.New("telemetry: unknown log format")

// ErrUnsupportedExporter is returned for an OTEL_TRACES_EXPORTER or OTLP
// protocol Meridian does not export with.
var ErrUnsupportedExporter = errors.New("telemetry: unsupported trace exporter")

// ErrInvalidMetricsConfig is returned for a MetricsConfig out of its bounds.
var ErrInvalidMetricsConfig = errors.New("telemetry: invalid metrics config")
