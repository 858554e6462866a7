package loadmgr

import (
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestUsageCollector: the latest load report's resources are served as
// Pulsar's pulsar_lb_*_usage, in percent of their limits and 0 where the
// limit is unknown, labelled with the region and the broker; nothing is
// served before the first report.
func TestUsageCollector(t *testing.T) {
	var report *LoadReport
	c := &usageCollector{region: "east", broker: "b1", report: func() (LoadReport, bool) {
		if report == nil {
			return LoadReport{}, false
		}
		return *report, true
	}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if got := usageValues(t, reg); len(got) != 0 {
		t.Fatalf("before the first report: %v, want nothing", got)
	}
	report = &LoadReport{
		CPU:         ResourceUsage{Usage: 50, Limit: 200},
		Memory:      ResourceUsage{Usage: 300},
		BandwidthIn: ResourceUsage{Usage: 1000},
	}
	want := map[string]float64{
		"pulsar_lb_cpu_usage": 25, "pulsar_lb_memory_usage": 0, "pulsar_lb_bandwidth_in_usage": 0, "pulsar_lb_bandwidth_out_usage": 0,
	}
	if got := usageValues(t, reg); !maps.Equal(got, want) {
		t.Errorf("usage %v, want %v", got, want)
	}
	report.Memory.Limit = 1200
	want["pulsar_lb_memory_usage"] = 25
	if got := usageValues(t, reg); !maps.Equal(got, want) {
		t.Errorf("with a memory limit: usage %v, want %v", got, want)
	}
}

// usageValues gathers reg's series by name, failing for any whose labels
// are not Pulsar's (cluster east, broker b1, metric loadBalancing).
func usageValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if want := map[string]string{"cluster": "east", "broker": "b1", "metric": "loadBalancing"}; !maps.Equal(labels, want) {
				t.Errorf("%s: labels %v, want %v", f.GetName(), labels, want)
			}
			out[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	return out
}
