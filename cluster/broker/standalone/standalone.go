// Package standalone assembles the broker side of a region (a Node: the
// ledger client on the region's bookies, the managed-ledger factory, the
// global policy cache, the topic service, the protocol server and the web
// listener) and, around it, a whole region in one process (Standalone: an
// embedded etcd and a local bookie plus a Node). `meridian broker` runs a
// Node against separate etcd and bookie processes; `meridian standalone`
// and the broker's tests run a Standalone. Both go through StartNode, so
// there is one way to wire a broker.
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
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
)

// Config configures a standalone region.
type Config struct {
	// DataDir holds etcd's and the bookie's data. Required.
	DataDir string
	// Region is the region (Pulsar cluster) name; Pulsar's standalone calls
	// it "standalone".
	Region string
	// BrokerAddr is where the Pulsar protocol is served (default
	// localhost:6650); WebAddr where HTTP is (default localhost:8080).
	// Port 0 picks a free port (tests).
	BrokerAddr string
	WebAddr    string
	// AdvertisedHost is the host clients are told to connect to. Default
	// localhost.
	AdvertisedHost string
	// EtcdClientURL is where the embedded etcd serves clients. Default
	// http://127.0.0.1:0, a free port (Endpoints reports it): nothing but
	// this process needs it, except tools that edit policies directly.
	EtcdClientURL string
	// Broker and Service tune the broker; their ServiceURL fields are
	// filled in from the listeners.
	Broker  broker.Config
	Service broker.ServiceConfig
	// Ledgers tunes the managed ledgers; E=Qw=Qa=1 on the one bookie.
	Ledgers mledger.Config
	Logger  *slog.Logger
}

// DefaultConfig returns the defaults for a standalone region in dataDir.
func DefaultConfig(dataDir string) Config {
	const region = "standalone"
	node := DefaultNodeConfig(region, "localhost")
	node.Ledgers.EnsembleSize, node.Ledgers.WriteQuorum, node.Ledgers.AckQuorum = 1, 1, 1
	return Config{
		DataDir:        dataDir,
		Region:         region,
		BrokerAddr:     node.BrokerAddr,
		WebAddr:        node.WebAddr,
		AdvertisedHost: node.AdvertisedHost,
		EtcdClientURL:  "http://127.0.0.1:0",
		Broker:         node.Broker,
		Service:        node.Service,
		Ledgers:        node.Ledgers,
		Logger:         node.Logger,
	}
}

// Standalone is a running region. Close stops it.
type Standalone struct {
	*Node
	etcd    *meta.Embed
	closers []func() // of the parts under the node, in order of start
}

// Start starts every part and returns once the broker serves.
func Start(ctx context.Context, cfg Config) (s *Standalone, err error) {
	if cfg.DataDir == "" {
		return nil, errors.New("standalone: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s = &Standalone{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	log := cfg.Logger

	ecfg := meta.DefaultEmbedConfig()
	ecfg.DataDir = filepath.Join(cfg.DataDir, "etcd")
	if cfg.EtcdClientURL != "" {
		ecfg.ListenClientURLs = []string{cfg.EtcdClientURL}
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bcfg := bookie.DefaultConfig()
	bcfg.Region, bcfg.ID, bcfg.DataDir = cfg.Region, "bookie-0", filepath.Join(cfg.DataDir, "bookie")
	bcfg.ListenAddr = "127.0.0.1:0"
	bcfg.Meta, bcfg.Registerer, bcfg.Logger = store, reg, log
	bk, err := bookie.Start(ctx, bcfg)
	if err != nil {
		return nil, fmt.Errorf("standalone: start bookie: %w", err)
	}
	s.closers = append(s.closers, func() { bk.Close() })

	ncfg := DefaultNodeConfig(cfg.Region, cfg.AdvertisedHost)
	ncfg.Store, ncfg.Global, ncfg.Registry, ncfg.Logger = store, store, reg, log
	ncfg.BrokerAddr, ncfg.WebAddr = cfg.BrokerAddr, cfg.WebAddr
	ncfg.Bootstrap = true
	ncfg.Broker, ncfg.Service, ncfg.Ledgers = cfg.Broker, cfg.Service, cfg.Ledgers
	if s.Node, err = StartNode(ctx, ncfg); err != nil {
		return nil, err
	}
	log.Info("standalone ready", "broker", s.ServiceURL(), "web", s.WebURL(), "etcd", s.EtcdEndpoints(), "data", cfg.DataDir)
	return s, nil
}

// EtcdEndpoints are the client URLs of the embedded etcd, which holds both
// the region's metadata and the global configuration.
func (s *Standalone) EtcdEndpoints() []string { return s.etcd.Endpoints() }

// Close stops every part, the broker first (its topics are closed cleanly
// and its ownership released), etcd last.
func (s *Standalone) Close() error {
	s.stop()
	return nil
}

func (s *Standalone) stop() {
	if s.Node != nil {
		s.Node.Close()
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}
