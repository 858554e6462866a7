package telemetry

import (
	"net/http"
	"regexp"

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
//
// Besides the default Go series it serves go_gc_heap_live_bytes, the heap
// the last GC found live (runtime/metrics' /gc/heap/live:bytes): what the
// process holds, without the free slots of the spans in use that
// go_memstats_heap_inuse_bytes counts, which after a burst stay in use
// for a while though nothing holds them.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
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
