// Package standalone assembles the broker side of a region (a Node: the
// ledger client on the region's bookies, the managed-ledger factory, the
// global policy cache, the topic service, the protocol server and the web
// listener) and, around it, a whole region in one process (Standalone: an
// embedded etcd and a local bookie plus a Node; with StartDev, several
// regions on one embedded etcd, each with its own bookie and Node).
// `meridian broker` runs a Node against separate etcd and bookie processes;
// `meridian standalone`, `meridian dev` and the broker's tests run a
// Standalone. All go through StartNode, so there is one way to wire a
// broker, and through ApplyPulsarConf, so there is one way to read a
// Pulsar broker.conf onto its configuration.
//
// Everything a Standalone keeps lives under DataDir (etcd/ and bookie/), so
// a restart on the same directory continues where the last run stopped,
// after a clean stop or a SIGKILL alike: etcd replays its WAL, the bookie
// its journal, the broker and the bookie revoke their previous run's leases
// before registering (DESIGN §3; this needs a stable broker id, the
// advertised host:port, so restart on the same ports), and every topic is
// fenced and recovered as in a takeover when it is first used again.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// Config configures a standalone region.
type Config struct {
	// DataDir holds etcd's and the bookie's data. Required.
	DataDir string
	// EtcdClientURL is where the embedded etcd serves clients. Default
	// http://127.0.0.1:0, a free port (Endpoints reports it): nothing but
	// this process needs it, except tools that edit policies directly.
	EtcdClientURL string
	// NodeConfig is the broker: its region (Pulsar's standalone calls it
	// "standalone"), listeners (default localhost:6650 and
	// localhost:8080; port 0 picks a free port), advertised host (default
	// localhost), TLS, authentication and tuning, with E=Qw=Qa=1 on the one
	// bookie. Store, Global, Registry and Bootstrap are set by Start.
	NodeConfig
}

// DefaultConfig returns the defaults for a standalone region in dataDir.
func DefaultConfig(dataDir string) Config {
	node := DefaultNodeConfig("standalone", "localhost")
	node.Ledgers.EnsembleSize, node.Ledgers.WriteQuorum, node.Ledgers.AckQuorum = 1, 1, 1
	return Config{DataDir: dataDir, EtcdClientURL: "http://127.0.0.1:0", NodeConfig: node}
}

// DevConfig configures several regions in one process (`meridian dev`):
// one embedded etcd holds the global configuration and every region's
// metadata, and each region has its own bookie (under DataDir/<region>/)
// and broker. Namespace public/default replicates to every region.
type DevConfig struct {
	// DataDir holds etcd's data (etcd/) and each region's bookie
	// (<region>/bookie/). Required.
	DataDir string
	// EtcdClientURL is as Config's.
	EtcdClientURL string
	// Regions are the regions' brokers, one NodeConfig each, with distinct
	// Region names and listeners. Store, Global, Registry and Bootstrap are
	// set by StartDev. At least one.
	Regions []NodeConfig
	Logger  *slog.Logger
}

// DefaultDevConfig returns the defaults of `meridian dev`: region i of
// regions serves the Pulsar protocol on localhost:portBase+100*i and HTTP
// on localhost:webPortBase+100*i (a base of 0 picks free ports), with
// E=Qw=Qa=1 on its one bookie.
func DefaultDevConfig(dataDir string, regions []string, portBase, webPortBase int) DevConfig {
	cfg := DevConfig{DataDir: dataDir, EtcdClientURL: "http://127.0.0.1:0", Logger: slog.Default()}
	port := func(base, i int) int {
		if base == 0 {
			return 0
		}
		return base + 100*i
	}
	for i, r := range regions {
		n := DefaultNodeConfig(r, "localhost")
		n.Ledgers.EnsembleSize, n.Ledgers.WriteQuorum, n.Ledgers.AckQuorum = 1, 1, 1
		n.BrokerAddr = fmt.Sprintf("localhost:%d", port(portBase, i))
		n.WebAddr = fmt.Sprintf("localhost:%d", port(webPortBase, i))
		cfg.Regions = append(cfg.Regions, n)
	}
	return cfg
}

// Validate checks what StartDev needs before it starts anything.
func (c DevConfig) Validate() error {
	if c.DataDir == "" {
		return errors.New("standalone: DevConfig.DataDir is required")
	}
	if len(c.Regions) == 0 {
		return errors.New("standalone: DevConfig.Regions: at least one region is required")
	}
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if r.Region == "" || seen[r.Region] {
			return fmt.Errorf("standalone: DevConfig.Regions: region names must be non-empty and distinct, got %q twice or empty", r.Region)
		}
		seen[r.Region] = true
	}
	return nil
}

// Standalone is one or more running regions on one embedded etcd. Close
// stops it.
type Standalone struct {
	*Node   // the first (with Start, the only) region's broker
	nodes   []*Node
	etcd    *meta.Embed
	closers []func() // of the parts under the nodes, in order of start
}

// regionSpec is one region to start on the shared store.
type regionSpec struct {
	node      NodeConfig
	bookieDir string
}

// Start starts every part and returns once the broker serves.
func Start(ctx context.Context, cfg Config) (*Standalone, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("standalone: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s, err := start(ctx, cfg.DataDir, cfg.EtcdClientURL, cfg.Logger,
		[]regionSpec{{node: cfg.NodeConfig, bookieDir: filepath.Join(cfg.DataDir, "bookie")}})
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("standalone ready", "broker", s.ServiceURL(), "web", s.WebURL(), "etcd", s.EtcdEndpoints(), "data", cfg.DataDir)
	return s, nil
}

// StartDev starts every region and returns once all serve and namespace
// public/default replicates to every one of them. Replication itself
// (DESIGN §6) is not built yet: each region serves its own copy.
func StartDev(ctx context.Context, cfg DevConfig) (*Standalone, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	specs := make([]regionSpec, len(cfg.Regions))
	for i, r := range cfg.Regions {
		if r.Logger == nil {
			r.Logger = cfg.Logger
		}
		specs[i] = regionSpec{node: r, bookieDir: filepath.Join(cfg.DataDir, r.Region, "bookie")}
	}
	s, err := start(ctx, cfg.DataDir, cfg.EtcdClientURL, cfg.Logger, specs)
	if err != nil {
		return nil, err
	}
	clusters := map[string]global.ClusterData{}
	for _, n := range s.nodes {
		clusters[n.cfg.Region] = n.ClusterData()
	}
	gcfg := global.DefaultConfig()
	gcfg.Logger = cfg.Logger
	gstore, err := global.NewStore(s.nodes[0].cfg.Global, gcfg)
	if err == nil {
		err = gstore.Ensure(ctx, global.Bootstrap{Clusters: clusters})
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("standalone: bootstrap public/default replicating to %v: %w", slices.Sorted(maps.Keys(clusters)), err)
	}
	cfg.Logger.Info("dev regions ready", "regions", len(s.nodes), "etcd", s.EtcdEndpoints(), "data", cfg.DataDir)
	return s, nil
}

// start runs the embedded etcd, then for each region its bookie and its
// broker, all on the one etcd.
func start(ctx context.Context, dataDir, etcdURL string, log *slog.Logger, regions []regionSpec) (_ *Standalone, err error) {
	s := &Standalone{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	ecfg := meta.DefaultEmbedConfig()
	ecfg.DataDir = filepath.Join(dataDir, "etcd")
	if etcdURL != "" {
		ecfg.ListenClientURLs = []string{etcdURL}
	}
	ecfg.Logger = log
	if s.etcd, err = meta.StartEmbed(ctx, ecfg); err != nil {
		return nil, fmt.Errorf("standalone: start etcd: %w", err)
	}
	s.closers = append(s.closers, func() { s.etcd.Close() })
	dcfg := meta.DefaultEtcdConfig()
	dcfg.Logger = log
	store, err := meta.Dial(ctx, s.etcd.Endpoints(), dcfg)
	if err != nil {
		return nil, fmt.Errorf("standalone: connect to etcd: %w", err)
	}
	s.closers = append(s.closers, func() { store.Close() })
	for _, r := range regions {
		n, err := startRegion(ctx, store, r, &s.closers)
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	s.Node = s.nodes[0]
	return s, nil
}

// startRegion starts a region's bookie and broker on store; the bookie's
// closer goes to closers.
func startRegion(ctx context.Context, store meta.Store, r regionSpec, closers *[]func()) (*Node, error) {
	ncfg := r.node
	log := ncfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bcfg := bookie.DefaultConfig()
	bcfg.Region, bcfg.ID, bcfg.DataDir = ncfg.Region, "bookie-0", r.bookieDir
	bcfg.ListenAddr = "127.0.0.1:0"
	bcfg.Meta, bcfg.Registerer, bcfg.Logger = store, reg, log
	bk, err := bookie.Start(ctx, bcfg)
	if err != nil {
		return nil, fmt.Errorf("standalone: start the bookie of region %s: %w", ncfg.Region, err)
	}
	*closers = append(*closers, func() { bk.Close() })
	ncfg.Store, ncfg.Global, ncfg.Registry, ncfg.Logger = store, store, reg, log
	ncfg.Bootstrap = true
	return StartNode(ctx, ncfg)
}

// Nodes are the regions' brokers, in the order they were configured.
func (s *Standalone) Nodes() []*Node { return slices.Clone(s.nodes) }

// EtcdEndpoints are the client URLs of the embedded etcd, which holds both
// the regions' metadata and the global configuration.
func (s *Standalone) EtcdEndpoints() []string { return s.etcd.Endpoints() }

// Close stops every part, the brokers first (their topics are closed
// cleanly and their ownership released), etcd last.
func (s *Standalone) Close() error {
	s.stop()
	return nil
}

func (s *Standalone) stop() {
	for i := len(s.nodes) - 1; i >= 0; i-- {
		s.nodes[i].Close()
	}
	s.nodes = nil
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
