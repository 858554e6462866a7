package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A registry from NewRegistry serves the runtime and process series and
// whatever a component registers into it.
func TestMetricsHandler(t *testing.T) {
	reg := NewRegistry()
	adds := prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_test_adds_total", Help: "Adds."})
	reg.MustRegister(adds)
	adds.Add(3)

	srv := httptest.NewServer(MetricsHandler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d:\n%s", resp.StatusCode, body)
	}
	wantLines := []string{"meridian_test_adds_total 3", "go_goroutines ", "go_memstats_heap_inuse_bytes ", "go_gc_heap_live_bytes ",
		"process_start_time_seconds "}
	for _, want := range wantLines {
		if !strings.Contains(string(body), "\n"+want) {
			t.Errorf("no line starting %q in the scrape", want)
		}
	}
}

// Two registries are independent: a region's series never show on another's
// endpoint, and the same metric may be registered in each.
func TestNewRegistryPerRegion(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	for _, reg := range []*prometheus.Registry{a, b} {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_test_region_total", Help: "Per region."})
		reg.MustRegister(c)
		if reg == a {
			c.Inc()
		}
	}
	for reg, want := range map[*prometheus.Registry]float64{a: 1, b: 0} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() == "meridian_test_region_total" {
				found = true
				if got := mf.GetMetric()[0].GetCounter().GetValue(); got != want {
					t.Errorf("counter = %v, want %v", got, want)
				}
			}
		}
		if !found {
			t.Errorf("registry lacks its own counter")
		}
	}
}
