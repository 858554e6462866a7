package ledger_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/prometheus/client_golang/prometheus"
)

// metricValue returns the counter (or histogram sample count) of the series
// of name that carries labelValue ("" for an unlabelled metric).
func metricValue(t testing.TB, reg *prometheus.Registry, name, labelValue string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := labelValue == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == labelValue
			}
			if !match {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 19, "b1", "b2", "b3", "b4")
		reg := prometheus.NewRegistry()
		cfg := testConfig()
		cfg.Registerer = reg
		c := e.client("w", cfg)
		if _, err := ledger.New(cfg, e.store, e.bookies.Client("x"), testLogger(t), rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ledger.ErrInvalidConfig) {
			t.Fatalf("second client on one registry: %v", err)
		}
		w := create(t, c, 3, 3, 2)
		appendN(t, w, 0, 10)
		e.bookies.SetDown(mustMetadata(t, c, w.ID()).LastEnsemble()[0], true)
		appendN(t, w, 10, 10)
		if _, err := e.client("rec", testConfig()).OpenAndRecover(t.Context(), w.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(t.Context(), payload(20)); !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("add after recovery: %v", err)
		}
		for _, ch := range []struct {
			name, label string
			want        float64
		}{
			{"meridian_ledger_adds_total", "ok", 20},
			{"meridian_ledger_adds_total", "fenced", 1},
			{"meridian_ledger_ensemble_changes_total", "writer", 1},
			{"meridian_ledger_add_seconds", "", 20},
		} {
			if got := metricValue(t, reg, ch.name, ch.label); got != ch.want {
				t.Errorf("%s{%s} = %v, want %v", ch.name, ch.label, got, ch.want)
			}
		}
	})
}
