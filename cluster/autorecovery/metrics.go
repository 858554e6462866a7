package autorecovery

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are every metric of auto-recovery, declared in this one place.
// Where a BookKeeper dashboard reads a series, the name is BookKeeper's
// (its auditor_ and replication_worker_ scopes as Pulsar's bookies export
// them); the rest are meridian_autorecovery_*. BookKeeper's
// NUM_UNDER_REPLICATED_LEDGERS is a summary observed at each audit; here it
// is a gauge of the marks the last audit left, which is what an alert
// compares with 0. Byte counts are summaries of entry sizes, as
// BookKeeper's are: their _sum is the bytes and their _count the entries.
type metrics struct {
	underReplicated     prometheus.Gauge
	underReplicatedSize prometheus.Gauge
	noGoodCopy          prometheus.Gauge
	ledgersChecked      prometheus.Counter
	auditsDelayed       prometheus.Counter
	auditsCancelled     prometheus.Counter
	auditTime           prometheus.Summary
	checkTime           prometheus.Summary
	electionAttempts    prometheus.Counter
	leading             prometheus.Gauge
	paused              prometheus.Gauge

	bytesRead          prometheus.Summary
	bytesWritten       prometheus.Summary
	entriesRead        prometheus.Counter
	entriesWritten     prometheus.Counter
	ledgersReplicated  prometheus.Counter
	unableToRead       prometheus.Counter
	repairs            *prometheus.HistogramVec
	replacementsFailed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	ms := func(name, help string) prometheus.Summary {
		return prometheus.NewSummary(prometheus.SummaryOpts{Name: name, Help: help})
	}
	m := &metrics{
		underReplicated: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "auditor_NUM_UNDER_REPLICATED_LEDGERS",
			Help: "Ledgers marked under-replicated (a copy of some entry is on a lost, decommissioning or lacking bookie) after the auditor's last run; set by the region's auditor, 0 elsewhere.",
		}),
		underReplicatedSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "auditor_UNDER_REPLICATED_LEDGERS_TOTAL_SIZE",
			Help: "Bytes of the under-replicated closed ledgers (their recorded length) after the auditor's last run.",
		}),
		noGoodCopy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "auditor_NUM_LEDGERS_HAVING_NO_REPLICA_OF_AN_ENTRY",
			Help: "Under-replicated ledgers whose last repair found an entry with no good copy left: data lost, which recovery cannot mend.",
		}),
		ledgersChecked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditor_NUM_LEDGERS_CHECKED",
			Help: "Ledgers whose sampled entries the auditor's periodic check read from every copy.",
		}),
		auditsDelayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditor_NUM_BOOKIE_AUDITS_DELAYED",
			Help: "Bookies seen gone whose ledgers wait lostBookieRecoveryDelay before they are marked.",
		}),
		auditsCancelled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "auditor_NUM_DELAYED_BOOKIE_AUDITS_CANCELLED",
			Help: "Bookies that came back within lostBookieRecoveryDelay: nothing was copied for them.",
		}),
		auditTime: ms("auditor_AUDIT_BOOKIES_TIME",
			"Seconds one audit of every ledger's ensembles against the live bookies took; its _count is the auditor's runs."),
		checkTime: ms("auditor_CHECK_ALL_LEDGERS_TIME",
			"Seconds one periodic check of sampled entries on every copy took; its _count is the checks run."),
		electionAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "election_attempts",
			Help: "Campaigns for the region's auditor this process started.",
		}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_autorecovery_auditor_leading",
			Help: "1 while this process is the region's auditor.",
		}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_autorecovery_paused",
			Help: "1 while an operator has paused auto-recovery (meridian admin bookies autorecovery disable), as this process last saw.",
		}),
		bytesRead: ms("replication_worker_NUM_BYTES_READ",
			"Sizes of the entries workers read to re-replicate; _sum is the bytes, _count the entries."),
		bytesWritten: ms("replication_worker_NUM_BYTES_WRITTEN",
			"Sizes of the entries workers wrote to replacement bookies; _sum is the bytes copied, _count the entries."),
		entriesRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replication_worker_NUM_ENTRIES_READ",
			Help: "Entries workers read to re-replicate.",
		}),
		entriesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replication_worker_NUM_ENTRIES_WRITTEN",
			Help: "Entries workers wrote to replacement bookies.",
		}),
		ledgersReplicated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replication_worker_NUM_FULL_OR_PARTIAL_LEDGERS_REPLICATED",
			Help: "Ledgers whose repair a worker finished (their mark deleted).",
		}),
		unableToRead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replication_worker_NUM_ENTRIES_UNABLE_TO_READ_FOR_REPLICATION",
			Help: "Entries a worker found no good copy of (every copy missing or damaged).",
		}),
		repairs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "meridian_autorecovery_repair_seconds",
			Help:    "Time a worker held a ledger's claim, by outcome: repaired (mark deleted), retry (left for later), failed (an error noted on the mark).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"result"}),
		replacementsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_autorecovery_replacements_failed_total",
			Help: "Replacement bookies that failed a copy, after which another was chosen.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.underReplicated, m.underReplicatedSize, m.noGoodCopy, m.ledgersChecked,
		m.auditsDelayed, m.auditsCancelled, m.auditTime, m.checkTime, m.electionAttempts, m.leading, m.paused,
		m.bytesRead, m.bytesWritten, m.entriesRead, m.entriesWritten, m.ledgersReplicated, m.unableToRead, m.repairs,
		m.replacementsFailed} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: auto-recovery metrics already registered (one service per registry)", ErrInvalidConfig)
			}
			return nil, err
		}
	}
	return m, nil
}
