package replicator

import "github.com/prometheus/client_golang/prometheus"

// workerMetrics are the meridian_replicator_* families of one worker,
// registered on Config.Registerer. A nil *workerMetrics (metrics disabled)
// records nothing. The Pulsar-named replication series
// (pulsar_replication_*) are the brokers': they read the state this worker
// publishes (stats.go).
type workerMetrics struct {
	readToReceipt *prometheus.HistogramVec
}

func newWorkerMetrics(cfg Config) (*workerMetrics, error) {
	if cfg.DisableMetrics {
		return nil, nil
	}
	m := &workerMetrics{
		readToReceipt: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meridian_replicator_read_to_receipt_seconds",
			Help: "Time from reading an entry off the source region's bookies to the remote broker's receipt for it, " +
				"by remote cluster (the rate limit's wait included).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18),
		}, []string{"remote_cluster"}),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(m.readToReceipt); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// receiptObserver returns where a task to remote records its latencies, or
// nil.
func (m *workerMetrics) receiptObserver(remote string) prometheus.Observer {
	if m == nil {
		return nil
	}
	return m.readToReceipt.WithLabelValues(remote)
}
