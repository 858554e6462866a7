package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors, into which a region's components register their own metrics.
// It is the one place a registry is built: the assembly calls it once per
// region, so that `meridian dev`, which runs several regions in one process,
// serves each region's series on that region's own /metrics. (The process and
// Go series then describe the shared process in every region's registry.)
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// MetricsHandler serves reg in the Prometheus exposition format, for a
// /metrics endpoint. A collector that fails is reported in the response and
// the remaining series are still served, so that one broken metric does not
// blind the scraper to all others.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
	})
}
