package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/global"
)

// TestActiveRegionMetric: meridian_namespace_active_region shows a
// namespace's active region while it has one, and no series once it is
// removed.
func TestActiveRegionMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := startBroker(t, nil, withRegistry(reg))
	name := strings.ToLower(t.Name())
	ns := createNamespace(t, r, name, global.Policies{ActiveRegion: "standalone"})
	series := func() float64 {
		return metricValue(t, reg, "meridian_namespace_active_region", "namespace", ns, "active_region", "standalone", "cluster", "standalone")
	}
	if got := series(); got != 1 {
		t.Fatalf("with an active region: %v, want 1", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, receipt, err := r.Service().Global().UpdateNamespace(ctx, "public", name, func(p *global.Policies) error {
		p.ActiveRegion = ""
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Service().Policies().Await(ctx, receipt); err != nil {
		t.Fatal(err)
	}
	if got := series(); got != 0 {
		t.Fatalf("after the active region was removed: %v, want no series", got)
	}
}
