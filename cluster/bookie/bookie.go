package bookie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"golang.org/x/sync/semaphore"
)

// Bookie is a running bookie: listener, journal, entry store, registration
// and garbage collector. Start it with Start and stop it with Close.
//
// Goroutines, all started by Start and all waited for by Close: the accept
// loop; two per connection (reader, writer); the journal's sync stage (the
// sole owner of the journal file) and apply stage (the sole writer of ledger
// state); the checkpointer; the compactor when CompactionInterval is set;
// the registration loop and the GC loop when a metadata store is configured;
// the failpoint endpoint's server when Config.FailpointEndpoint is set; and a
// watcher that closes the listeners and connections when the bookie's
// context ends.
type Bookie struct {
	cfg     Config
	log     *slog.Logger
	clock   clockwork.Clock
	m       *metrics
	store   *store
	journal *journal
	ln      net.Listener
	addr    string

	failpoints *failpointSwitch
	// failpointSrv serves Config.FailpointEndpoint; nil without one.
	failpointSrv *http.Server
	failpointLn  net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	readOnly  atomic.Bool
	readOnlyC chan struct{} // wakes the registration loop; capacity 1
	// decommissioning is the operator's drain (decommission.go): writers'
	// adds are refused and the registration says readOnly, as readOnly
	// does, but reads, recovery adds and the disk probe are unaffected.
	decommissioning atomic.Bool
	// registered is true while the registration loop holds the bookie's
	// key under a live lease: writers can choose it (Registered).
	registered atomic.Bool

	fatalOnce sync.Once
	fatalErr  error // set once before cancel

	mu struct {
		sync.Mutex
		conns map[*serverConn]struct{}
	}
	closeOnce sync.Once
	closeErr  error
}

// Start opens the bookie's storage (replaying its journal), starts serving on
// cfg.ListenAddr and registers it. ctx bounds only the startup; the bookie
// then runs until Close or until a fatal error, which Done and Err report.
func Start(ctx context.Context, cfg Config) (*Bookie, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("bookie", cfg.ID)
	clock := cfg.Clock
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("bookie: register metrics: %w", err)
	}
	fs := cfg.FS
	if fs == nil {
		fs = OSFS{}
	}
	if cfg.NoSync {
		fs = noSyncFS{fs}
		log.Warn("journal fsync is off (--storage memory): acknowledged entries are not durable, a machine crash loses them; for benchmarks only")
	}
	// The journal goes through a FaultFS only when a failpoint may need
	// it: a bookie without failpoints pays nothing for them.
	fps := &failpointSwitch{}
	if cfg.Failpoints.fsActive() || cfg.FailpointEndpoint != "" {
		fps.fs = NewFaultFS(fs)
		fps.fs.clock = clock
		fs = fps.fs
	}
	if err := fps.set(cfg.Failpoints); err != nil {
		return nil, err
	}
	if spec := cfg.Failpoints.String(); spec != "" {
		log.Warn("failpoints armed", "failpoints", spec)
	}

	journalDir := filepath.Join(cfg.DataDir, "journal")
	st, err := openStore(filepath.Join(cfg.DataDir, "index"), cfg.IndexCacheSize, log, m, fps, fs, journalDir)
	if err != nil {
		return nil, err
	}
	b := &Bookie{cfg: cfg, log: log, clock: clock, m: m, store: st, failpoints: fps, readOnlyC: make(chan struct{}, 1)}
	b.mu.conns = make(map[*serverConn]struct{})
	b.journal = &journal{
		fs: fs, dir: journalDir, log: log, m: m, clock: clock, store: st,
		maxBatchBytes: cfg.JournalMaxBatchBytes, maxWait: cfg.JournalMaxWait, fileSize: cfg.JournalFileSize,
		queue: make(chan *op, cfg.JournalQueue), queueBytes: semaphore.NewWeighted(cfg.JournalQueueBytes),
		maxQueued: cfg.JournalQueueBytes, syncq: make(chan []*op, 1), syncerIdle: make(chan struct{}, 1),
		applyq: make(chan applyItem, 4), rolled: make(chan uint64, 1),
		onFatal: b.fatal, onReadOnly: b.setReadOnly, readOnly: &b.readOnly,
	}
	if err := openJournal(b.journal); err != nil {
		st.close()
		return nil, err
	}
	m.journalQueue.Store(&b.journal.queue)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.ListenAddr)
	if err != nil {
		b.journal.file.Close()
		st.close()
		return nil, fmt.Errorf("bookie: listen on %s: %w", cfg.ListenAddr, err)
	}
	if cfg.TLS != nil {
		// The handshake runs on each connection's reader goroutine, at its
		// first read: a client that fails it never gets a frame decoded.
		ln = tls.NewListener(ln, cfg.TLS)
	}
	if cfg.FailpointEndpoint != "" {
		if b.failpointLn, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.FailpointEndpoint); err != nil {
			ln.Close()
			b.journal.file.Close()
			st.close()
			return nil, fmt.Errorf("bookie: failpoint endpoint on %s: %w", cfg.FailpointEndpoint, err)
		}
		b.failpointSrv = &http.Server{Handler: b.failpointHandler(), ReadHeaderTimeout: 10 * time.Second}
	}
	b.ln = ln
	b.addr = ln.Addr().String()
	if cfg.AdvertiseAddr != "" {
		b.addr = cfg.AdvertiseAddr
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())

	b.goroutine(func() { b.journal.run(b.ctx) })
	b.goroutine(b.journal.syncLoop)
	b.goroutine(b.journal.applyLoop)
	b.goroutine(func() { b.journal.checkpointLoop(b.ctx) })
	if cfg.CompactionInterval > 0 && cfg.CompactionThreshold > 0 {
		b.goroutine(b.compactLoop)
	}
	b.goroutine(b.acceptLoop)
	b.goroutine(b.probeLoop)
	if b.failpointSrv != nil {
		b.goroutine(func() {
			if err := b.failpointSrv.Serve(b.failpointLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("failpoint endpoint stopped", "err", err)
			}
		})
		log.Warn("failpoint endpoint serving: for tests only, whoever reaches it can fail this bookie's disk",
			"address", b.failpointLn.Addr().String())
	}
	b.goroutine(func() {
		<-b.ctx.Done()
		if b.failpointSrv != nil {
			b.failpointSrv.Close()
		}
		b.ln.Close()
		b.mu.Lock()
		for c := range b.mu.conns {
			c.close()
		}
		b.mu.Unlock()
	})
	if cfg.Meta != nil {
		b.goroutine(func() { b.registerLoop(b.ctx) })
		b.goroutine(func() { b.decommissionLoop(b.ctx) })
		if cfg.GCInterval > 0 {
			b.goroutine(func() { b.gcLoop(b.ctx) })
		}
	}
	log.Info("bookie started", "address", b.addr, "listen", ln.Addr().String(), "data_dir", cfg.DataDir,
		"tls", cfg.TLS != nil, "mutual_tls", cfg.TLS != nil && cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert,
		"token_auth", cfg.AuthToken != "")
	return b, nil
}

func (b *Bookie) goroutine(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// Addr is the address the bookie serves on (its advertised address if one
// was configured).
func (b *Bookie) Addr() string { return b.addr }

// Done is closed when the bookie stops: after Close, or on its own after a
// fatal error.
func (b *Bookie) Done() <-chan struct{} { return b.ctx.Done() }

// Err is the fatal error that stopped the bookie (wrapping ErrJournalSync or
// ErrStorage), or nil.
func (b *Bookie) Err() error {
	select {
	case <-b.ctx.Done():
		return b.fatalErr
	default:
		return nil
	}
}

// ReadOnly reports whether the bookie refuses adds because its disk is full.
func (b *Bookie) ReadOnly() bool { return b.readOnly.Load() }

// Registered reports whether the bookie is listed in its region's
// metadata store under a live lease, so that writers can choose it: false
// before the first registration, while it registers again after losing
// its lease, and once it stops. A read-only bookie stays registered.
func (b *Bookie) Registered() bool { return b.registered.Load() && b.ctx.Err() == nil }

// Close stops the bookie, waits for every goroutine it started and closes its
// storage. It returns the fatal error, if one stopped the bookie.
func (b *Bookie) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		b.wg.Wait()
		if err := b.store.close(); err != nil && b.fatalErr == nil {
			b.closeErr = fmt.Errorf("%w: close: %w", ErrStorage, err)
		}
		b.log.Info("bookie stopped")
	})
	if b.fatalErr != nil {
		return b.fatalErr
	}
	return b.closeErr
}

// fatal stops the bookie because its storage can no longer be trusted.
func (b *Bookie) fatal(err error) {
	b.fatalOnce.Do(func() {
		b.log.Error("fatal storage error; the bookie stops", "err", err)
		b.fatalErr = err
		b.cancel()
	})
}

func (b *Bookie) setReadOnly() {
	if b.readOnly.CompareAndSwap(false, true) {
		b.m.setReadOnly(true)
		b.notifyRegistration()
	}
}

func (b *Bookie) setWritable() {
	if b.readOnly.CompareAndSwap(true, false) {
		b.log.Info("journal disk has room again; the bookie accepts adds")
		b.m.setReadOnly(false)
		b.notifyRegistration()
	}
}

// notifyRegistration asks the registration loop to rewrite the value.
func (b *Bookie) notifyRegistration() {
	select {
	case b.readOnlyC <- struct{}{}:
	default:
	}
}

// probeLoop, while the bookie is read-only, writes a probe record through
// the journal every ReadOnlyProbeInterval; the first that is durable turns
// the bookie writable again. A probe goes through the same FS as adds, so it
// fails exactly when an add would.
func (b *Bookie) probeLoop() {
	t := b.clock.NewTicker(b.cfg.ReadOnlyProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.Chan():
		}
		if !b.readOnly.Load() {
			continue
		}
		res := make(chan error, 1)
		if err := b.journal.enqueue(b.ctx, &op{rec: record{kind: recProbe}, done: func(r opResult) { res <- r.err }}); err != nil {
			return
		}
		if err := <-res; err == nil {
			b.setWritable()
		}
	}
}

func (b *Bookie) acceptLoop() {
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			b.log.Warn("accept failed", "err", err)
			// Back off so that a persistent error (EMFILE) cannot spin.
			t := b.clock.NewTicker(100 * time.Millisecond)
			select {
			case <-t.Chan():
			case <-b.ctx.Done():
			}
			t.Stop()
			continue
		}
		c := &serverConn{
			b: b, nc: nc, log: b.log.With("peer", nc.RemoteAddr().String()), authed: b.cfg.AuthToken == "",
			out:   make(chan reply, b.cfg.MaxConnInFlight+1), // +1: closeAfter
			slots: make(chan struct{}, b.cfg.MaxConnInFlight),
			done:  make(chan struct{}),
		}
		b.mu.Lock()
		if b.ctx.Err() != nil {
			b.mu.Unlock()
			nc.Close()
			return
		}
		b.mu.conns[c] = struct{}{}
		b.mu.Unlock()
		b.goroutine(c.writeLoop)
		b.goroutine(func() {
			c.readLoop()
			b.mu.Lock()
			delete(b.mu.conns, c)
			b.mu.Unlock()
		})
	}
}

// registration is the bookie's current registration value.
func (b *Bookie) registration() []byte {
	return bkproto.Registration{ID: b.cfg.ID, Address: b.addr, Rack: b.cfg.Rack, ReadOnly: b.readOnly.Load() || b.decommissioning.Load()}.Marshal()
}
