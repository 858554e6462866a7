package meta

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// An instrumented store answers as the store it wraps, times every
// operation, and counts as errors only real failures: a missing key, an
// existing one and a CAS conflict are answers.
func TestInstrument(t *testing.T) {
	mem, err := NewMemory(DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewStoreMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	s := Instrument(mem, m, "region")
	ctx := context.Background()
	if _, err := s.Get(ctx, "/k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing key: %v", err)
	}
	rev, err := s.Create(ctx, "/k", []byte("v"), NoLease)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/k", []byte("v"), NoLease); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.Update(ctx, "/k", []byte("w"), rev+100); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if kv, err := s.Get(ctx, "/k"); err != nil || string(kv.Value) != "v" {
		t.Fatalf("get: %q, %v", kv.Value, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s.List(cancelled, "/")
	mem.Close()
	if _, _, err := s.List(ctx, "/"); err == nil {
		t.Fatal("list on a closed store succeeded")
	}

	for op, want := range map[string]int{"get": 2, "create": 2, "update": 1, "list": 2} {
		h, _ := m.latency.GetMetricWithLabelValues(op, "region")
		if got := histogramCount(t, h.(prometheus.Metric)); got != want {
			t.Errorf("%s: %d timed, want %d", op, got, want)
		}
	}
	if got := testutil.ToFloat64(m.errors.WithLabelValues("list", "region")); got != 1 {
		t.Errorf("list errors %v, want 1 (the closed store; the cancelled call is not an error)", got)
	}
	for _, op := range []string{"get", "create", "update"} {
		if got := testutil.ToFloat64(m.errors.WithLabelValues(op, "region")); got != 0 {
			t.Errorf("%s errors %v, want 0: missing, existing and conflicting keys are answers", op, got)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func histogramCount(t *testing.T, m prometheus.Metric) int {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return int(out.GetHistogram().GetSampleCount())
}
