package bookie

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are every metric the bookie exports, declared in this one place and
// registered on the registry the caller passes in (never the global one):
// Meridian's meridian_bookie_* families, and the figures BookKeeper's own
// Prometheus provider serves under BookKeeper's names (bk below), which
// Pulsar's stock BookKeeper dashboard queries.
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
	bk           bkMetrics
}

// bkMetrics are the figures the bookie serves under BookKeeper's names:
// the server's request stats (bookkeeper_server_*), the bookie's state and
// bytes (bookie_*) and its journal's (bookie_journal_*). Latencies are
// summaries, as BookKeeper's OpStatsLoggers are: labelled success, with
// BookKeeper's quantiles over about the last minute (BookKeeper rolls its
// sketches over every minute). What BookKeeper measures that Meridian has
// no figure for (its DbLedgerStorage's entry count and its write and read
// caches: Meridian's journal is its entry log, and it caches no entries)
// is not served; the README says so.
type bkMetrics struct {
	// serverStatus is bookie_SERVER_STATUS: 1 while writable, 0 while
	// read-only. writableDirs is bookie_ledger_writable_dirs: the bookie
	// has one data directory, writable unless the disk is full.
	serverStatus, writableDirs prometheus.Gauge
	// addEntry and readEntry time a request from the moment it is
	// dispatched to its answer (an add's once its record is durable);
	// addEntryRequest and readEntryRequest from the moment its frame was
	// read, so they include the wait for an in-flight slot of its
	// connection (Config.MaxConnInFlight), as BookKeeper's request stats
	// include its request queue.
	addEntry, addEntryRequest, readEntry, readEntryRequest *opStats
	// writeBytes and readBytes count the entry payloads added and read.
	writeBytes, readBytes prometheus.Counter
	// journalSync is one group commit's write plus fdatasync; journalAdd
	// an add's time from entering the journal's queue to its answer.
	journalSync, journalAdd *opStats
	// forceWriteQueue counts the records of the batch being written and
	// synced; callbackQueue the synced records the apply stage has not
	// taken yet.
	forceWriteQueue, callbackQueue atomic.Int64
	ledgers                        prometheus.Gauge
	deletedLedgers                 prometheus.Counter
}

// bkQuantiles are the quantiles BookKeeper's summaries serve, with the
// error each is allowed.
var bkQuantiles = map[float64]float64{0.5: 0.05, 0.75: 0.025, 0.95: 0.005, 0.99: 0.001, 0.999: 0.0001, 0.9999: 0.00001, 1.0: 0}

// opStats is a summary in the shape of BookKeeper's OpStatsLogger:
// labelled success, and in milliseconds, not Prometheus's seconds, because
// BookKeeper's are and the dashboards made for them say "ms". Both of its
// series exist from the start, as BookKeeper's do, and are looked up once:
// adds and reads observe them on their path.
type opStats struct {
	vec        *prometheus.SummaryVec
	ok, failed prometheus.Observer
}

func newOpStats(name, help string) *opStats {
	vec := prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Name: name, Help: help, Objectives: bkQuantiles, MaxAge: time.Minute,
	}, []string{"success"})
	return &opStats{vec: vec, ok: vec.WithLabelValues("true"), failed: vec.WithLabelValues("false")}
}

// observe records an operation that took d, and whether it succeeded.
func (s *opStats) observe(d time.Duration, ok bool) {
	o := s.failed
	if ok {
		o = s.ok
	}
	o.Observe(float64(d) / float64(time.Millisecond))
}

// setReadOnly records the bookie turning read-only (on) or writable.
func (m *metrics) setReadOnly(on bool) {
	status := 1.0
	if on {
		status = 0
	}
	m.readOnly.Set(1 - status)
	m.bk.serverStatus.Set(status)
	m.bk.writableDirs.Set(status)
}

// setLedgers records how many ledgers the bookie stores.
func (m *metrics) setLedgers(n int) {
	m.ledgers.Set(float64(n))
	m.bk.ledgers.Set(float64(n))
}

// ledgerDeleted counts a ledger GC deleted.
func (m *metrics) ledgerDeleted() {
	m.gcDeleted.Inc()
	m.bk.deletedLedgers.Inc()
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
	}, m.journalQueueLen)
	for s := bkproto.StatusOK; s <= bkproto.StatusUnauthorized; s++ {
		m.adds.WithLabelValues(s.String())
		m.reads.WithLabelValues(s.String())
	}
	bkCollectors := m.bk.init(m.journalQueueLen)
	m.setReadOnly(false)
	if reg != nil {
		for _, c := range append([]prometheus.Collector{m.journalSync, m.journalBatch, m.addLatency, m.adds, m.reads,
			m.checksumErrors, m.authFailures, m.readOnly, m.ledgers, m.gcDeleted, m.logFiles, m.logFilesDeleted, m.compactedFiles,
			m.compactedBytes, m.queueDepth, &m.index}, bkCollectors...) {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// journalQueueLen is the length of the journal's queue, 0 before the
// journal exists.
func (m *metrics) journalQueueLen() float64 {
	if q := m.journalQueue.Load(); q != nil {
		return float64(len(*q))
	}
	return 0
}

// init builds the BookKeeper-named families and returns them to register;
// journalQueueLen reads the journal's queue.
func (bk *bkMetrics) init(journalQueueLen func() float64) []prometheus.Collector {
	bk.serverStatus = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookie_SERVER_STATUS", Help: "1 while the bookie accepts adds, 0 while it is read-only (its disk is full).",
	})
	bk.writableDirs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bookie_ledger_writable_dirs", Help: "Writable data directories: the bookie has one, writable unless its disk is full.",
	})
	bk.addEntry = newOpStats("bookkeeper_server_ADD_ENTRY", "Milliseconds from an add's dispatch to its answer (once its record is durable), by success.")
	bk.addEntryRequest = newOpStats("bookkeeper_server_ADD_ENTRY_REQUEST", "Milliseconds from an add's frame being read (its wait for an in-flight slot included) to its answer, by success.")
	bk.readEntry = newOpStats("bookkeeper_server_READ_ENTRY", "Milliseconds from a read's dispatch to its answer, by success.")
	bk.readEntryRequest = newOpStats("bookkeeper_server_READ_ENTRY_REQUEST", "Milliseconds from a read's frame being read (its wait for an in-flight slot included) to its answer, by success.")
	bk.writeBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "bookie_WRITE_BYTES", Help: "Entry payload bytes added."})
	bk.readBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "bookie_READ_BYTES", Help: "Entry payload bytes read."})
	bk.journalSync = newOpStats("bookie_journal_JOURNAL_SYNC", "Milliseconds of one group commit's write plus fdatasync, by success.")
	bk.journalAdd = newOpStats("bookie_journal_JOURNAL_ADD_ENTRY", "Milliseconds from an add entering the journal's queue to its answer, by success.")
	bk.ledgers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "bookie_ledgers_count", Help: "Ledgers stored on this bookie."})
	bk.deletedLedgers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bookie_DELETED_LEDGER_COUNT", Help: "Ledgers garbage-collected because their metadata is gone.",
	})
	queueSize := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bookie_journal_JOURNAL_QUEUE_SIZE", Help: "Adds waiting in the journal's queue for a group commit.",
	}, journalQueueLen)
	forceWrite := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE", Help: "Journal records written and waiting for their fdatasync.",
	}, func() float64 { return float64(bk.forceWriteQueue.Load()) })
	callbacks := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bookie_journal_JOURNAL_CB_QUEUE_SIZE", Help: "Journal records synced and waiting for the apply stage, which applies them to the index and answers them.",
	}, func() float64 { return float64(bk.callbackQueue.Load()) })
	return []prometheus.Collector{bk.serverStatus, bk.writableDirs, bk.addEntry.vec, bk.addEntryRequest.vec, bk.readEntry.vec,
		bk.readEntryRequest.vec, bk.writeBytes, bk.readBytes, bk.journalSync.vec, bk.journalAdd.vec, bk.ledgers, bk.deletedLedgers,
		queueSize, forceWrite, callbacks}
}
