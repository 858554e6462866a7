// Package node assembles what one meridian process runs: its metadata
// stores (an embedded etcd, or clients of etcd clusters that run elsewhere),
// and for each region it serves, that region's bookies, its broker with the
// admin REST API, its replication worker, and its telemetry (one Prometheus
// registry and /metrics endpoint per region, one logger, and one
// OpenTelemetry Tracing for the process). It sits above everything it
// assembles; only cmd and e2e import it.
//
// Every server command of the binary but `meridian etcd` (which runs one
// meta.StartEmbed member and nothing else) is one configuration of the same
// Config:
//
//	meridian standalone   embedded etcd; one region with a bookie, a broker and a replicator (Standalone)
//	meridian dev          embedded etcd; several regions, each with a bookie, a broker and a replicator (Dev)
//	meridian broker       etcd elsewhere; one region with a broker
//	meridian bookie       etcd elsewhere; one region with a bookie (and /metrics with --metrics-listen)
//	meridian replicator   etcd elsewhere; one region with a replicator (and /metrics with --metrics-listen)
//
// so there is one way to wire a part, and a region's name, stores, logger,
// registry and clock are set once, in the region, and handed to each part.
// The clock is the process's one clockwork.Clock, made in Start: every
// behavioural timer of every part reads it. Each part that draws random
// numbers for its behaviour gets a source of its own (newRand).
// docs/architecture.md ("Time and randomness: one clock, one wiring") lists
// what still reads the wall clock or a global random source, and why.
// Pulsar's broker.conf is read onto a RegionConfig by ApplyPulsarConf, the
// one table of the settings Meridian honours.
//
// Everything a node with an embedded etcd and local bookies keeps lives
// under its data directories, so a restart on the same directories continues
// where the last run stopped, after a clean stop or a SIGKILL alike: etcd
// replays its WAL, each bookie its journal, brokers and bookies revoke their
// previous run's leases before registering (DESIGN §3; this needs a stable
// broker id, the advertised host:port, so restart on the same ports), and
// every topic is fenced and recovered as in a takeover when it is first
// used again.
//
// node.go holds Config, the regions and their parts, and Standalone and Dev;
// broker.go a region's broker with its web listener; health.go the health
// and readiness endpoints of every role; conf.go
// ApplyPulsarConf's table; tracing.go the process's Tracing; schemas.go the
// replicator's read-only view of a region's schema registry; security.go the
// TLS files and tokens that reach a secured etcd and the region's bookies.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator"
	"github.com/meridian-mq/meridian/telemetry"
)

// Config is what one process runs.
type Config struct {
	// EmbedEtcd runs an embedded etcd member in DataDir/etcd, serving
	// clients on EtcdClientURL; every region's metadata and the global
	// configuration live in it. Otherwise Etcd names the etcd that holds
	// the regions' metadata.
	EmbedEtcd bool
	// DataDir holds the embedded etcd's data. Required with EmbedEtcd.
	DataDir string
	// EtcdClientURL is where the embedded etcd serves clients. Default
	// http://127.0.0.1:0, a free port (EtcdEndpoints reports it): nothing
	// but this process needs it, except tools that edit policies directly.
	EtcdClientURL string
	// Etcd are the client URLs of the regions' etcd, without EmbedEtcd.
	Etcd []string
	// GlobalEtcd are the client URLs of the global configuration store's
	// etcd (DESIGN §3: it may be another cluster). Empty: the regions'
	// store holds the global configuration too.
	GlobalEtcd []string
	// EtcdAuth is how this process's etcd clients reach the region's
	// secured etcd (Etcd): its TLS and its RBAC user. Zero: plain http, no
	// user. Not for an embedded etcd, which serves this process alone on
	// loopback.
	EtcdAuth EtcdClientAuth
	// GlobalEtcdAuth is how they reach the global store's etcd when
	// GlobalEtcd is another cluster. Zero: EtcdAuth, as one secured etcd
	// deployment usually serves both; set, it is the whole of the global
	// side's settings (nothing of EtcdAuth carries over).
	GlobalEtcdAuth EtcdClientAuth
	// Regions are the regions this process serves parts of: one for every
	// command but dev. Their names are distinct.
	Regions []RegionConfig
	// Bootstrap ensures the standalone/dev starting state once every
	// region serves: each region's cluster record, tenant public and
	// namespace public/default replicating to every region of Regions
	// (global.Store.Ensure). Without it a broker only creates its region's
	// cluster record if there is none (an existing record is an
	// operator's), and tenants and namespaces are the operator's to create.
	Bootstrap bool
	// EnablePprof serves Go's runtime profiles under /debug/pprof/ on the
	// process's HTTP listeners (health.go's addPprof), as etcd's
	// --enable-pprof. They are unauthenticated: off by default.
	EnablePprof bool
	// Logger receives every part's logs; each region's carry its name.
	// Required.
	Logger *slog.Logger
	// Tracing traces the messages that carry a W3C traceparent through
	// every region's broker and replicator. Nil, the default: the
	// process's tracing from the OTEL_* environment
	// (telemetry.TracingFromEnv), which is none unless an exporter or an
	// OTLP endpoint is set; the node then shuts it down on Close. A
	// Tracing given here is the caller's to shut down.
	Tracing *telemetry.Tracing
}

// RegionConfig is one region's parts in this process.
type RegionConfig struct {
	// Name is the region (Pulsar's cluster name). Required.
	Name string
	// Bookies are the bookies to run, each with its own DataDir, listener
	// and id. Their Region, Meta, Registerer and Logger are set by the
	// node. An empty DataDir is the default under Config.DataDir:
	// <DataDir>/bookie when the node runs one region (standalone), else
	// <DataDir>/<region>/bookie (dev); at most one bookie of a region may
	// use it.
	Bookies []bookie.Config
	// Broker, when set, runs a broker; it serves the region's /metrics on
	// its web port.
	Broker *BrokerConfig
	// Replicator, when set, runs a replication worker (DESIGN §6) that
	// copies the region's topics to the other regions of their replication
	// clusters; its Region is the region's name.
	Replicator *replicator.Config
	// AutoRecovery, when set, runs auto-recovery in this process on the
	// region's ledger client: a candidate for the region's auditor and
	// replication workers (cluster/autorecovery). Standalone and Dev set
	// it, and `meridian broker` does unless --autorecovery=false: every
	// region has brokers, so it runs with no process of its own (see
	// docs/architecture.md). Its Region, Logger and Registerer are the
	// region's; an empty WorkerID is the broker's id, or the region's name
	// and the process id without a broker.
	AutoRecovery *autorecovery.Config
	// MetricsAddr, when set, serves the region's /metrics, with its
	// health and readiness endpoints (health.go), on a listener of its
	// own: for processes without a broker (a bookie, a replicator).
	MetricsAddr string
	// MetricsHTTP bounds the server of MetricsAddr, as BrokerConfig.Web
	// does the broker's; the zero value is DefaultHTTPConfig.
	MetricsHTTP HTTPConfig
	// Ledger tunes the region's ledger client, which its broker and its
	// replicator share; the zero value is ledger.DefaultConfig. Its Region,
	// RegionNumber (from the global store) and Registerer are set by the
	// node.
	Ledger ledger.Config
	// Metrics is whether the region's parts record their metrics, and how
	// the broker exposes its topics' Pulsar series; the zero value is
	// Pulsar's default (topic-level series, a 60s stats period). Pulsar's
	// exposeTopicLevelMetricsInPrometheus and statsUpdateFrequencyInSecs
	// set it.
	Metrics telemetry.MetricsConfig
	// BookieClient is how the region's ledger client (its broker,
	// replicator and auto-recovery) authenticates to the region's
	// bookies: the token and certificates that the bookies' AuthToken and
	// TLS require. The zero value presents none.
	BookieClient BookieClientAuth
	// BookieTransport is how the ledger client reaches the registered
	// bookies. Nil, the default: bkproto connections. Benchmarks set
	// in-memory bookies (ledgertest) here to measure the broker and its
	// clients without storage; the caller owns them.
	BookieTransport ledger.Bookies
}

// Validate checks the configuration before anything starts.
func (c Config) Validate() error {
	switch {
	case c.Logger == nil:
		return errors.New("node: Config.Logger is required")
	case len(c.Regions) == 0:
		return errors.New("node: Config.Regions: at least one region is required")
	case c.EmbedEtcd && c.DataDir == "":
		return errors.New("node: Config.DataDir is required with an embedded etcd")
	case !c.EmbedEtcd && len(c.Etcd) == 0:
		return errors.New("node: Config.Etcd is required: the client URLs of the region's etcd")
	case c.EmbedEtcd && !c.EtcdAuth.IsZero():
		return errors.New("node: Config.EtcdAuth is for an etcd of its own (Config.Etcd), not the embedded one")
	case !c.GlobalEtcdAuth.IsZero() && !c.separateGlobal(c.Etcd):
		return errors.New("node: Config.GlobalEtcdAuth needs Config.GlobalEtcd, the URLs of another etcd than the region's")
	}
	for _, a := range []struct {
		field string
		auth  EtcdClientAuth
	}{{"EtcdAuth", c.EtcdAuth}, {"GlobalEtcdAuth", c.GlobalEtcdAuth}} {
		if err := a.auth.Validate(); err != nil {
			return fmt.Errorf("node: Config.%s: %w", a.field, err)
		}
	}
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if r.Name == "" || seen[r.Name] {
			return fmt.Errorf("node: region names must be non-empty and distinct, got %q twice or empty", r.Name)
		}
		seen[r.Name] = true
		defaultDirs := 0
		for _, b := range r.Bookies {
			if b.DataDir == "" {
				defaultDirs++
			}
		}
		if defaultDirs > 0 && (c.DataDir == "" || defaultDirs > 1) {
			return fmt.Errorf("node: region %s: a bookie without a DataDir takes the default under Config.DataDir, which needs Config.DataDir and serves one bookie only", r.Name)
		}
		if r.Broker == nil && r.Replicator == nil && len(r.Bookies) == 0 {
			return fmt.Errorf("node: region %s runs nothing: give it a broker, a replicator or bookies", r.Name)
		}
		if err := r.Metrics.Validate(); err != nil {
			return fmt.Errorf("node: region %s: %w", r.Name, err)
		}
		if err := r.MetricsHTTP.orDefault().Validate(); err != nil {
			return fmt.Errorf("node: region %s: MetricsHTTP: %w", r.Name, err)
		}
		if r.Broker != nil {
			if err := r.Broker.Validate(); err != nil {
				return fmt.Errorf("region %s: %w", r.Name, err)
			}
		}
	}
	return nil
}

// Standalone is `meridian standalone`: one region named "standalone" (as
// Pulsar's standalone calls it) in dataDir, on an embedded etcd, with one
// bookie (E=Qw=Qa=1), a broker on localhost:6650 and localhost:8080, and a
// replication worker (for namespaces an operator replicates to regions
// added later).
func Standalone(dataDir string) Config {
	return Dev(dataDir, []string{"standalone"}, 6650, 8080)
}

// Dev is `meridian dev`: several regions in one process on one embedded
// etcd in dataDir, each with its own bookie (in the default bookie
// directory: see RegionConfig.Bookies), broker and replication worker. Region i serves the
// Pulsar protocol on localhost:portBase+100*i and HTTP on
// localhost:webPortBase+100*i (a base of 0 picks free ports), with E=Qw=Qa=1
// on its one bookie. Namespace public/default replicates to every region.
func Dev(dataDir string, regions []string, portBase, webPortBase int) Config {
	cfg := Config{EmbedEtcd: true, DataDir: dataDir, EtcdClientURL: "http://127.0.0.1:0", Bootstrap: true, Logger: slog.Default()}
	port := func(base, i int) int {
		if base == 0 {
			return 0
		}
		return base + 100*i
	}
	for i, r := range regions {
		b := DefaultBrokerConfig("localhost")
		b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
		b.BrokerAddr = fmt.Sprintf("localhost:%d", port(portBase, i))
		b.WebAddr = fmt.Sprintf("localhost:%d", port(webPortBase, i))
		bk := bookie.DefaultConfig()
		bk.ID, bk.ListenAddr = "bookie-0", "127.0.0.1:0"
		rep := replicator.DefaultConfig(r)
		ar := autorecovery.DefaultConfig(r, "")
		cfg.Regions = append(cfg.Regions, RegionConfig{Name: r, Bookies: []bookie.Config{bk}, Broker: &b, Replicator: &rep, AutoRecovery: &ar})
	}
	return cfg
}

// Node is a running process's parts. Close stops it.
type Node struct {
	cfg     Config
	etcd    *meta.Embed // nil without EmbedEtcd
	regions []*Region
	closers []func() // the stores', in order of start; run in reverse

	watchers sync.WaitGroup // the watchBookie goroutines; they end with their bookies
	done     chan struct{}  // closed when a part stops by itself
	doneOnce sync.Once
	err      error // why; set before done closes
}

// Region is one region's running parts.
type Region struct {
	parts        regionParts
	bookies      []*bookie.Bookie
	broker       *Broker               // nil without one
	replicator   *replicator.Worker    // nil without one
	autoRecovery *autorecovery.Service // nil without one
	metrics      *http.Server
	// metricsLn is nil without MetricsAddr.
	metricsLn net.Listener
	served    chan struct{} // closed once the metrics server has stopped
}

// regionParts is what a region hands each of its parts: set once, here.
// The ledger client and the policy cache are made on first use and shared
// by the region's broker and replicator (one client per registry: its
// metrics register once).
type regionParts struct {
	name     string
	store    meta.Store // the region's metadata
	global   meta.Store // the global configuration; may be store
	registry *prometheus.Registry
	tracing  *telemetry.Tracing // nil: not tracing
	metrics  telemetry.MetricsConfig
	log      *slog.Logger
	// clock is the process's one clock (Start makes it), which drives
	// every part's behavioural timers (see the package doc).
	clock           clockwork.Clock
	bootstrap       bool
	ledgerCfg       ledger.Config
	bookieClient    BookieClientAuth
	bookieTransport ledger.Bookies
	pprof           bool // Config.EnablePprof: serve the profiles

	ledgers  *ledger.Client
	policies *global.Cache
	closers  []func() // of the shared parts, in order of start; run in reverse
}

// instrumentStores times the region's metadata operations into its
// registry (meridian_etcd_operation_seconds), labelled by store: region,
// and global when the global configuration has a store of its own.
func (p *regionParts) instrumentStores() error {
	if p.metrics.Disabled {
		return nil
	}
	sm, err := meta.NewStoreMetrics(p.registry)
	if err != nil {
		return fmt.Errorf("node: region %s: metadata store metrics: %w", p.name, err)
	}
	sameStore := p.global == p.store
	p.store = meta.Instrument(p.store, sm, "region")
	if sameStore {
		p.global = p.store
	} else {
		p.global = meta.Instrument(p.global, sm, "global")
	}
	return nil
}

// ledgerClient is the region's ledger client.
func (p *regionParts) ledgerClient(ctx context.Context) (*ledger.Client, error) {
	if p.ledgers != nil {
		return p.ledgers, nil
	}
	number, err := p.regionNumber(ctx)
	if err != nil {
		return nil, err
	}
	bookies := p.bookieTransport
	if bookies == nil {
		ccfg, err := p.bookieClient.connConfig()
		if err != nil {
			return nil, fmt.Errorf("node: region %s's bookie credentials: %w", p.name, err)
		}
		bk, err := ledger.NewBKProto(p.store, p.name, ccfg)
		if err != nil {
			return nil, err
		}
		p.closers = append(p.closers, func() { bk.Close() })
		bookies = bk
	}
	cfg := p.ledgerCfg
	cfg.Region, cfg.RegionNumber, cfg.Registerer, cfg.Clock = p.name, number, p.registry, p.clock
	lc, err := ledger.New(cfg, p.store, bookies, p.log, newRand())
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, func() { lc.Close() })
	p.ledgers = lc
	return lc, nil
}

// regionNumber is the region's number, which its ledger ids carry
// (ledger.LedgerID). The global store assigns it once; the region keeps a
// copy in its own store, which it reads first, so that a restart needs no
// global store and the number cannot change under the region's ledgers.
func (p *regionParts) regionNumber(ctx context.Context) (int, error) {
	key := meta.RegionKey(p.name, "region-number")
	var local struct {
		Number int `json:"number"`
	}
	kv, err := p.store.Get(ctx, key)
	if err == nil {
		if _, err := meta.DecodeJSON(kv.Value, 1, &local); err != nil {
			return 0, fmt.Errorf("node: region %s's number at %s: %w", p.name, key, err)
		}
		return local.Number, nil
	}
	if !errors.Is(err, meta.ErrNotFound) {
		return 0, fmt.Errorf("node: region %s's number: %w", p.name, err)
	}
	gcfg := global.DefaultConfig()
	gcfg.Logger = p.log
	gstore, err := global.NewStore(p.global, gcfg)
	if err != nil {
		return 0, err
	}
	number, err := gstore.RegionNumber(ctx, p.name)
	if err != nil {
		return 0, fmt.Errorf("node: region %s's number: %w", p.name, err)
	}
	local.Number = number
	val, err := meta.EncodeJSON(1, local)
	if err != nil {
		return 0, err
	}
	if _, err := p.store.Create(ctx, key, val, meta.NoLease); err != nil && !errors.Is(err, meta.ErrExists) {
		return 0, fmt.Errorf("node: keep region %s's number: %w", p.name, err)
	}
	return number, nil
}

// policyCache is the region's watched view of the global configuration,
// loaded: a broker asks for it after its bootstrap, so that the first load
// holds what the bootstrap wrote.
func (p *regionParts) policyCache(ctx context.Context) (*global.Cache, error) {
	if p.policies != nil {
		return p.policies, nil
	}
	scfg := global.DefaultConfig()
	scfg.Logger = p.log
	gstore, err := global.NewStore(p.global, scfg)
	if err != nil {
		return nil, err
	}
	ccfg := global.DefaultCacheConfig()
	ccfg.Logger, ccfg.Clock = p.log, p.clock
	cache, err := global.StartCache(gstore, ccfg)
	if err != nil {
		return nil, err
	}
	p.closers = append(p.closers, func() { cache.Close() })
	select {
	case <-cache.Ready():
	case <-ctx.Done():
		return nil, fmt.Errorf("node: loading the global policy cache: %w", ctx.Err())
	}
	p.policies = cache
	return cache, nil
}

// Start starts every part and returns once all of them serve.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, done: make(chan struct{})}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	log := cfg.Logger
	// The one clock of the process: the embedded etcd's and every region's
	// parts take their timers from it, in place of the wall clock their
	// Default…() configurations set.
	clock := clockwork.NewRealClock()
	endpoints := cfg.Etcd
	if cfg.EmbedEtcd {
		ecfg := meta.DefaultEmbedConfig()
		ecfg.DataDir = filepath.Join(cfg.DataDir, "etcd")
		if cfg.EtcdClientURL != "" {
			ecfg.ListenClientURLs = []string{cfg.EtcdClientURL}
		}
		ecfg.Logger, ecfg.Clock = log, clock
		if n.etcd, err = meta.StartEmbed(ctx, ecfg); err != nil {
			return nil, fmt.Errorf("node: start etcd: %w", err)
		}
		n.closers = append(n.closers, func() { n.etcd.Close() })
		endpoints = n.etcd.Endpoints()
	}
	store, err := n.dial(ctx, endpoints, cfg.EtcdAuth)
	if err != nil {
		return nil, fmt.Errorf("node: connect to the region's etcd %v: %w", endpoints, err)
	}
	global := store
	if cfg.separateGlobal(endpoints) {
		auth := cfg.GlobalEtcdAuth
		if auth.IsZero() {
			auth = cfg.EtcdAuth
		}
		if global, err = n.dial(ctx, cfg.GlobalEtcd, auth); err != nil {
			return nil, fmt.Errorf("node: connect to the global etcd %v: %w", cfg.GlobalEtcd, err)
		}
	}
	tracing, err := n.tracing(ctx)
	if err != nil {
		return nil, err
	}
	for _, rc := range cfg.Regions {
		parts := regionParts{
			name: rc.Name, store: store, global: global, registry: telemetry.NewRegistry(),
			tracing: tracing, metrics: rc.Metrics,
			log: log.With(telemetry.KeyRegion, rc.Name), clock: clock, bootstrap: cfg.Bootstrap,
			ledgerCfg: rc.Ledger, bookieClient: rc.BookieClient, bookieTransport: rc.BookieTransport, pprof: cfg.EnablePprof,
		}
		if err := parts.instrumentStores(); err != nil {
			return nil, err
		}
		if parts.ledgerCfg == (ledger.Config{}) {
			parts.ledgerCfg = ledger.DefaultConfig(rc.Name, 0) // ledgerClient sets the number
		}
		r, err := n.startRegion(ctx, parts, rc)
		if r != nil {
			n.regions = append(n.regions, r)
		}
		if err != nil {
			return nil, err
		}
	}
	if cfg.Bootstrap {
		if err := n.bootstrap(ctx, global); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// separateGlobal reports whether the global store is an etcd of its own,
// apart from the region's at endpoints.
func (c Config) separateGlobal(endpoints []string) bool {
	return len(c.GlobalEtcd) > 0 && !slices.Equal(c.GlobalEtcd, endpoints)
}

// dial connects to the etcd at endpoints with auth (zero for the embedded
// etcd).
func (n *Node) dial(ctx context.Context, endpoints []string, auth EtcdClientAuth) (meta.Store, error) {
	ecfg := meta.DefaultEtcdConfig()
	ecfg.Logger = n.cfg.Logger
	if err := auth.apply(&ecfg); err != nil {
		return nil, err
	}
	s, err := meta.Dial(ctx, endpoints, ecfg)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { s.Close() })
	return s, nil
}

// startRegion starts a region's bookies, then its broker (which waits for
// them), then its metrics listener. On an error it returns what it started,
// for Close to stop.
func (n *Node) startRegion(ctx context.Context, p regionParts, rc RegionConfig) (*Region, error) {
	r := &Region{parts: p, served: make(chan struct{})}
	for _, bc := range rc.Bookies {
		bc.Region, bc.Meta, bc.Registerer, bc.Logger, bc.Clock = p.name, p.store, p.registry, p.log, p.clock
		if bc.DataDir == "" {
			bc.DataDir = filepath.Join(n.cfg.DataDir, p.name, "bookie")
			if len(n.cfg.Regions) == 1 {
				bc.DataDir = filepath.Join(n.cfg.DataDir, "bookie")
			}
		}
		b, err := bookie.Start(ctx, bc)
		if err != nil {
			close(r.served)
			return r, fmt.Errorf("node: start bookie %s of region %s: %w", bc.ID, p.name, err)
		}
		r.bookies = append(r.bookies, b)
		n.watchers.Go(func() { n.watchBookie(b, bc.ID) })
	}
	if rc.Broker != nil {
		b, err := startBroker(ctx, &r.parts, *rc.Broker)
		if err != nil {
			close(r.served)
			return r, fmt.Errorf("node: start the broker of region %s: %w", p.name, err)
		}
		r.broker = b
	}
	if rc.Replicator != nil {
		if err := r.startReplicator(ctx, *rc.Replicator); err != nil {
			close(r.served)
			return r, fmt.Errorf("node: start the replicator of region %s: %w", p.name, err)
		}
	}
	if rc.AutoRecovery != nil {
		if err := r.startAutoRecovery(ctx, *rc.AutoRecovery); err != nil {
			close(r.served)
			return r, fmt.Errorf("node: start auto-recovery of region %s: %w", p.name, err)
		}
	}
	if rc.MetricsAddr == "" {
		close(r.served)
		return r, nil
	}
	ln, err := net.Listen("tcp", rc.MetricsAddr)
	if err != nil {
		close(r.served)
		return r, fmt.Errorf("node: metrics listener of region %s: %w", p.name, err)
	}
	r.metricsLn = ln
	mcfg := rc.MetricsHTTP.orDefault()
	r.metrics = mcfg.server(r.metricsHandler(p.pprof))
	go func() {
		defer close(r.served)
		if err := r.metrics.Serve(mcfg.listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Warn("metrics server stopped", "listener", ln.Addr().String(), "err", err)
		}
	}()
	p.log.Info("serving metrics", "address", ln.Addr().String())
	return r, nil
}

// startReplicator starts the region's replication worker on its ledger
// client and policy cache.
func (r *Region) startReplicator(ctx context.Context, cfg replicator.Config) error {
	lc, err := r.parts.ledgerClient(ctx)
	if err != nil {
		return err
	}
	cache, err := r.parts.policyCache(ctx)
	if err != nil {
		return err
	}
	cfg.Region, cfg.Clock = r.parts.name, r.parts.clock
	if cfg.Tracing == nil {
		cfg.Tracing = r.parts.tracing
	}
	cfg.Registerer, cfg.DisableMetrics = r.parts.registry, r.parts.metrics.Disabled
	if cfg.Schemas == nil {
		if cfg.Schemas, err = newRegistrySchemas(r.parts.store, r.parts.name, r.parts.log); err != nil {
			return err
		}
	}
	r.replicator, err = replicator.Start(ctx, cfg, r.parts.store, lc, cache, r.parts.log)
	return err
}

// startAutoRecovery starts the region's auditor candidate and replication
// workers on its ledger client.
func (r *Region) startAutoRecovery(ctx context.Context, cfg autorecovery.Config) error {
	lc, err := r.parts.ledgerClient(ctx)
	if err != nil {
		return err
	}
	cfg.Region, cfg.Logger, cfg.Clock = r.parts.name, r.parts.log, r.parts.clock
	if !r.parts.metrics.Disabled {
		cfg.Registerer = r.parts.registry
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = fmt.Sprintf("%s-%d", r.parts.name, os.Getpid())
		if r.broker != nil {
			cfg.WorkerID = r.broker.BrokerID()
		}
	}
	r.autoRecovery, err = autorecovery.Start(cfg, r.parts.store, lc, newRand())
	return err
}

// newRand is a part's own random source, seeded from the process's: the
// one place a shipped part's source is made. Each part that draws (the
// ledger client, auto-recovery, the broker's load manager) gets its own and
// guards it with its own lock; a test hands a part a fixed seed instead.
func newRand() *rand.Rand {
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// watchBookie ends the node when b stops by itself: a failed journal fsync
// is fatal (DESIGN §4), and the process must exit rather than serve from
// doubtful disk state. A Close of the node also ends b, and then nothing is
// reported.
func (n *Node) watchBookie(b *bookie.Bookie, id string) {
	<-b.Done()
	if err := b.Err(); err != nil {
		n.fail(fmt.Errorf("bookie %s stopped: %w", id, err))
	}
}

func (n *Node) fail(err error) {
	n.doneOnce.Do(func() {
		n.err = err
		close(n.done)
	})
}

// bootstrap ensures the starting state of standalone and dev: every
// region's cluster record, tenant public and namespace public/default
// replicating to every region.
func (n *Node) bootstrap(ctx context.Context, gs meta.Store) error {
	clusters := map[string]global.ClusterData{}
	for _, r := range n.regions {
		if r.broker != nil {
			clusters[r.parts.name] = r.broker.ClusterData()
		}
	}
	if len(clusters) == 0 {
		return nil
	}
	gcfg := global.DefaultConfig()
	gcfg.Logger = n.cfg.Logger
	gstore, err := global.NewStore(gs, gcfg)
	if err == nil {
		err = gstore.Ensure(ctx, global.Bootstrap{Clusters: clusters})
	}
	if err != nil {
		return fmt.Errorf("node: bootstrap public/default replicating to %v: %w", slices.Sorted(maps.Keys(clusters)), err)
	}
	return nil
}

// Regions are the regions' running parts, in the order configured.
func (n *Node) Regions() []*Region { return slices.Clone(n.regions) }

// Broker is the first region's broker (the only one but in dev), or nil.
func (n *Node) Broker() *Broker { return n.regions[0].broker }

// EtcdEndpoints are the client URLs of the embedded etcd, which holds both
// the regions' metadata and the global configuration; nil without one.
func (n *Node) EtcdEndpoints() []string {
	if n.etcd == nil {
		return nil
	}
	return n.etcd.Endpoints()
}

// Done is closed when a part stopped by itself (a bookie whose journal
// failed); Err says why. The process should then close the node and exit
// non-zero.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is why Done closed, or nil.
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.err
	default:
		return nil
	}
}

// Close stops every part: every region's replicator first, then each
// region's broker (its topics are closed cleanly and its ownership
// released), then its bookies, then the metadata stores, etcd last.
func (n *Node) Close() error {
	// Replication stops first in every region, so that no worker sees a
	// remote region's broker go away during a clean stop.
	for _, r := range n.regions {
		if r.replicator != nil {
			r.replicator.Close()
			r.replicator = nil
		}
	}
	var errs []error
	for i := len(n.regions) - 1; i >= 0; i-- {
		errs = append(errs, n.regions[i].close())
	}
	n.regions = nil
	n.watchers.Wait()
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
	return errors.Join(errs...)
}

func (r *Region) close() error {
	if r.metrics != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.metrics.Shutdown(ctx)
		cancel()
	}
	<-r.served
	if r.replicator != nil {
		r.replicator.Close()
	}
	if r.autoRecovery != nil {
		r.autoRecovery.Close()
	}
	if r.broker != nil {
		r.broker.Close()
	}
	for i := len(r.parts.closers) - 1; i >= 0; i-- {
		r.parts.closers[i]()
	}
	r.parts.closers = nil
	var errs []error
	for i := len(r.bookies) - 1; i >= 0; i-- {
		errs = append(errs, r.bookies[i].Close())
	}
	return errors.Join(errs...)
}

// Name is the region's name.
func (r *Region) Name() string { return r.parts.name }

// Broker is the region's broker, or nil.
func (r *Region) Broker() *Broker { return r.broker }

// Replicator is the region's replication worker, or nil.
func (r *Region) Replicator() *replicator.Worker { return r.replicator }

// Bookies are the region's bookies in this process.
func (r *Region) Bookies() []*bookie.Bookie { return slices.Clone(r.bookies) }

// Registry holds the region's metrics, which every part registers into.
func (r *Region) Registry() *prometheus.Registry { return r.parts.registry }

// MetricsURL is the URL of the region's /metrics listener of its own
// (RegionConfig.MetricsAddr), or "" without one; a broker also serves
// /metrics on its web URL.
func (r *Region) MetricsURL() string {
	if r.metricsLn == nil {
		return ""
	}
	return "http://" + r.metricsLn.Addr().String() + "/metrics"
}
