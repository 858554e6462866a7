package telemetry

import "errors"

// ErrUnknownLogFormat is returned for a log format other than text or json.
var ErrUnknownLogFormat = errors.New("telemetry: unknown log format")

// ErrInvalidMetricsConfig is returned for a MetricsConfig out of its bounds.
var ErrInvalidMetricsConfig = errors.New("telemetry: invalid metrics config")
