package bookie

import (
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are every metric the bookie exports, declared in this one place and
// registered on the registry the caller passes in (never the global one).
type metrics struct {
	journalSync     prometheus.Histogram
	journalBatch    prometheus.Histogram
	addLatency      prometheus.Histogram
	adds            *prometheus.CounterVec
	reads           *prometheus.CounterVec
	checksumErrors  prometheus.Counter
	authFailures    prometheus.Counter
	readOnly        prometheus.Gauge
	ledgers         prometheus.Gauge
	gcDeleted       prometheus.Counter
	logFiles        prometheus.Gauge
	logFilesDeleted prometheus.Counter
	compactedFiles  prometheus.Counter
	compactedBytes  prometheus.Counter
	// journalQueue is the journal's queue once the journal exists, which
	// meridian_bookie_journal_queue_depth reads at scrape time.
	journalQueue atomic.Pointer[chan *op]
	queueDepth   prometheus.GaugeFunc
	index        indexMemory
}

// indexMemory serves meridian_bookie_index_memory_bytes: the memory of the
// index (pebble) while it is open. In a cgo build pebble allocates its
// memtables and block cache with C malloc, outside the Go heap, so the
// process's resident memory holds them though no go_memstats series counts
// them; without cgo (as the README builds Meridian) they are Go allocations,
// counted in go_memstats_heap_* as well. Both are bounded by the
// configuration (memtables of up to 32 MiB, one or two at a time, sized
// as openStore's pebble options say; IndexCacheSize for the cache), and
// the cache fills as the bookie reads.
type indexMemory struct {
	mu   sync.Mutex // held over a collection, so that close waits for it
	db   *pebble.DB // nil while the index is closed
	desc *prometheus.Desc
}

// set makes the collector read db, or nothing when db is nil: the store
// sets it once open and clears it before it closes pebble.
func (c *indexMemory) set(db *pebble.DB) {
	c.mu.Lock()
	c.db = db
	c.mu.Unlock()
}

func (c *indexMemory) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *indexMemory) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == nil {
		return
	}
	m := c.db.Metrics()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(m.MemTable.Size), "memtables")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(m.BlockCache.Size), "block_cache")
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		journalSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_bookie_journal_sync_seconds",
			Help:    "Time of one journal write plus fdatasync (one group commit).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		journalBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_bookie_journal_batch_records",
			Help:    "Records written by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		addLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "meridian_bookie_add_seconds",
			Help:    "Time from an add's arrival to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_bookie_adds_total",
			Help: "Add requests answered, by status.",
		}, []string{"status"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meridian_bookie_reads_total",
			Help: "Read requests answered, by status.",
		}, []string{"status"}),
		checksumErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_checksum_errors_total",
			Help: "Entries that failed their CRC32C, on add or on read.",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_auth_failures_total",
			Help: "Connections closed because they did not authenticate (no AuthRequest first, a wrong token).",
		}),
		readOnly: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_bookie_read_only",
			Help: "1 while the bookie refuses adds because its disk is full.",
		}),
		ledgers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_bookie_ledgers",
			Help: "Ledgers stored on this bookie.",
		}),
		gcDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_gc_ledgers_deleted_total",
			Help: "Ledgers deleted because their metadata is gone.",
		}),
		logFiles: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "meridian_bookie_journal_files",
			Help: "Journal files on disk; they are also the entry log.",
		}),
		logFilesDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_journal_files_deleted_total",
			Help: "Journal files deleted because no live entry was left in them (after GC or compaction).",
		}),
		compactedFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_compacted_files_total",
			Help: "Journal files whose live entries the compactor copied forward before deleting them.",
		}),
		compactedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "meridian_bookie_compacted_bytes_total",
			Help: "Record bytes the compactor copied forward (the write amplification compaction costs).",
		}),
	}
	m.index.desc = prometheus.NewDesc("meridian_bookie_index_memory_bytes",
		"Memory the index (pebble) holds, by part: memtables (allocated) and block_cache (in use); outside the Go heap in a cgo build, in it without cgo.",
		[]string{"part"}, nil)
	m.queueDepth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "meridian_bookie_journal_queue_depth",
		Help: "Adds waiting in the journal's queue for a group commit.",
	}, func() float64 {
		if q := m.journalQueue.Load(); q != nil {
			return float64(len(*q))
		}
		return 0
	})
	for s := bkproto.StatusOK; s <= bkproto.StatusUnauthorized; s++ {
		m.adds.WithLabelValues(s.String())
		m.reads.WithLabelValues(s.String())
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.journalSync, m.journalBatch, m.addLatency, m.adds, m.reads,
			m.checksumErrors, m.authFailures, m.readOnly, m.ledgers, m.gcDeleted, m.logFiles, m.logFilesDeleted, m.compactedFiles,
			m.compactedBytes, m.queueDepth, &m.index} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
