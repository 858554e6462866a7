package ledger

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are every metric the ledger client exports, declared in this one
// place and registered on the registry the caller passes in (never the
// global one).
type metrics struct {
	adds            *prometheus.CounterVec
	addLatency      prometheus.Histogram
	ensembleChanges *prometheus.CounterVec
	missingCopies   prometheus.Counter
	explicitLACs    prometheus.Counter
	recoveries      *prometheus.CounterVec
	checksumErrors  prometheus.Counter
	readRetries     prometheus.Counter
	repairsAdopted  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_ledger_adds_total",
			Help: "Adds completed by ledger writers, by result (ok, fenced, failed).",
		}, []string{"result"}),
		addLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_ledger_add_seconds",
			Help:    "Time from Add to confirmation (Qa acks and every lower entry confirmed).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16),
		}),
		ensembleChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_ledger_ensemble_changes_total",
			Help: "Ensemble changes written to ledger metadata, by who made them (writer, recovery).",
		}, []string{"by"}),
		missingCopies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_ledger_under_replicated_copies_total",
			Help: "Copies of confirmed entries known never to have been stored (under-replicated until auto-recovery).",
		}),
		explicitLACs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_ledger_explicit_lacs_total",
			Help: "LACs ledger writers sent explicitly because no add carried them (each is one small RPC per ensemble member).",
		}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_ledger_recoveries_total",
			Help: "Ledger recoveries, by outcome (closed: this client closed it; lost_race: another recoverer did).",
		}, []string{"outcome"}),
		checksumErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_ledger_read_checksum_errors_total",
			Help: "Entry reads that failed their checksum and went to another replica.",
		}),
		readRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_ledger_read_retries_total",
			Help: "Entry reads that moved on to another replica, after an error or a speculative read timeout.",
		}),
		repairsAdopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_ledger_writer_repairs_adopted_total",
			Help: "Times a ledger writer found its metadata changed by a repair of earlier fragments (auto-recovery) and went on with it.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.adds, m.addLatency, m.ensembleChanges, m.missingCopies, m.explicitLACs, m.recoveries, m.checksumErrors, m.readRetries, m.repairsAdopted} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: ledger metrics already registered (one client per registry)", ErrInvalidConfig)
			}
			return nil, err
		}
	}
	return m, nil
}
