// Package brokertest starts a broker for tests of the broker and of the
// layers that sit on it (the admin API): the topic service and the protocol
// server on a real embedded etcd and in-memory bookies (ledgertest), with no
// admin API, web listener or telemetry. A whole region, with real bookies on
// disk and the admin API, is cluster/node's, and its tests are there.
//
// The etcd and the bookies (a Storage) outlive the brokers started on them,
// so that a test can stop a broker and start another on the same data, as a
// restart or a takeover does.
package brokertest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
)

// Region is the region name of the brokers brokertest starts, and the one
// replication cluster of the namespace public/default it bootstraps.
const Region = "standalone"

// RegionNumber is Region's number, the high bits of its ledger ids
// (ledger.LedgerID).
const RegionNumber = 1

// Logger discards everything, unless BROKER_TEST_LOG is set: then it
// prints every record at debug level on stderr.
func Logger() *slog.Logger {
	if os.Getenv("BROKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Storage is what brokers run on: a region's metadata store (an embedded
// etcd) and three in-memory bookies registered in it. Close stops it.
type Storage struct {
	Etcd    *meta.Embed
	Store   meta.Store // the region's metadata and, by default, the global configuration
	Bookies *ledgertest.Cluster

	// etcdCfg starts Etcd again on the same data and client address
	// (StartEtcd).
	etcdCfg meta.EmbedConfig
}

// NewStorage starts an embedded etcd in dir and three in-memory bookies.
func NewStorage(ctx context.Context, dir string) (_ *Storage, err error) {
	ecfg := meta.DefaultEmbedConfig()
	ecfg.DataDir = dir
	ecfg.Logger = Logger()
	s := &Storage{Bookies: ledgertest.NewCluster()}
	if s.Etcd, err = meta.StartEmbed(ctx, ecfg); err != nil {
		return nil, err
	}
	ecfg.ListenClientURLs = s.Etcd.Endpoints()
	s.etcdCfg = ecfg
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Store, err = Dial(ctx, s.Etcd.Endpoints()); err != nil {
		return nil, err
	}
	for _, id := range []string{"bookie-0", "bookie-1", "bookie-2"} {
		s.Bookies.AddBookie(id)
		if err := ledgertest.Register(ctx, s.Store, Region, id, "", false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close stops the store, then etcd (its graceful stop waits for open
// client streams).
func (s *Storage) Close() {
	if s.Store != nil {
		s.Store.Close()
	}
	s.Etcd.Close()
}

// StopEtcd stops the storage's etcd, as an outage of the metadata store:
// the brokers' store clients stay, and retry until StartEtcd brings it
// back.
func (s *Storage) StopEtcd() error { return s.Etcd.Close() }

// StartEtcd starts the storage's etcd again after StopEtcd, on the same
// data and the same client address, so that the clients reconnect to it.
func (s *Storage) StartEtcd(ctx context.Context) (err error) {
	s.Etcd, err = meta.StartEmbed(ctx, s.etcdCfg)
	return err
}

// Dial connects to the etcd at endpoints.
func Dial(ctx context.Context, endpoints []string) (meta.Store, error) {
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = Logger()
	return meta.Dial(ctx, endpoints, cfg)
}

// Config is a broker to start. Its region, id and service URL are set by
// Start.
type Config struct {
	Broker  broker.Config
	Service broker.ServiceConfig
	// Ledgers tunes the managed ledgers; E=Qw=Qa=1 by default.
	Ledgers mledger.Config
	// Global is the global configuration store. Nil: the storage's
	// store.
	Global meta.Store
	// WebURL is the web service the broker advertises (in its cluster
	// record, and as the target of admin redirects), for tests that serve
	// the admin API over it; empty by default.
	WebURL string
	// Logger logs the broker's parts; nil: Logger().
	Logger *slog.Logger
}

// DefaultConfig is a broker with the packages' defaults.
func DefaultConfig() Config {
	ml := mledger.DefaultConfig(Region)
	ml.EnsembleSize, ml.WriteQuorum, ml.AckQuorum = 1, 1, 1
	return Config{
		Broker:  broker.DefaultConfig(""),
		Service: broker.DefaultServiceConfig(Region, "", ""),
		Ledgers: ml,
	}
}

// Broker is a running broker on 127.0.0.1 and a free port. Close stops it.
type Broker struct {
	service *broker.Service
	server  *broker.Server
	id, url string
	closers []func() // in order of start; run in reverse
	served  chan struct{}
}

// Start starts a broker on s and bootstraps tenant public and namespace
// public/default (replicating to Region) in its global store.
func Start(ctx context.Context, s *Storage, cfg Config) (_ *Broker, err error) {
	log := cmp.Or(cfg.Logger, Logger())
	b := &Broker{served: make(chan struct{})}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { ln.Close() })
	b.id, b.url = ln.Addr().String(), "pulsar://"+ln.Addr().String()

	lc, err := ledger.New(ledger.DefaultConfig(Region, RegionNumber), s.Store, s.Bookies.Client(b.id), log, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { lc.Close() })
	mlcfg := cfg.Ledgers
	mlcfg.Region = Region
	factory, err := mledger.NewFactory(mlcfg, lc, s.Store, log)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		factory.Close(cctx)
	})
	gmeta := cfg.Global
	if gmeta == nil {
		gmeta = s.Store
	}
	gscfg := global.DefaultConfig()
	gscfg.Logger = log
	gstore, err := global.NewStore(gmeta, gscfg)
	if err != nil {
		return nil, err
	}
	cluster := global.ClusterData{ServiceURL: cfg.WebURL, BrokerServiceURL: b.url, MaintainedByRegion: true}
	if err := gstore.Ensure(ctx, global.Bootstrap{Clusters: map[string]global.ClusterData{Region: cluster}}); err != nil {
		return nil, err
	}
	ccfg := global.DefaultCacheConfig()
	ccfg.Logger = log
	cache, err := global.StartCache(gstore, ccfg)
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { cache.Close() })
	select {
	case <-cache.Ready():
	case <-ctx.Done():
		return nil, fmt.Errorf("brokertest: loading the global policy cache: %w", ctx.Err())
	}

	scfg := cfg.Service
	scfg.Region, scfg.BrokerID, scfg.ServiceURL, scfg.WebURL = Region, b.id, b.url, cfg.WebURL
	if b.service, err = broker.NewService(scfg, s.Store, cache, gstore, factory, log, rand.New(rand.NewPCG(3, 4))); err != nil {
		return nil, err
	}
	if err := b.service.Start(ctx); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.service.Close(cctx)
	})
	pcfg := cfg.Broker
	pcfg.ServiceURL = b.url
	if b.server, err = broker.NewServer(pcfg, b.service, log); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.server.Close(cctx)
	})
	// Runs before the server closes, as a SIGTERMed broker's drain does:
	// its bundles go to the other brokers started on the storage, if any.
	b.closers = append(b.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.service.LoadManager().Drain(cctx)
	})
	go func() {
		defer close(b.served)
		b.server.Serve(ln)
	}()
	return b, nil
}

// ID is the broker's id in its region: its listener's address.
func (b *Broker) ID() string { return b.id }

// ServiceURL is the pulsar:// URL clients use.
func (b *Broker) ServiceURL() string { return b.url }

// Service is the broker's topic service.
func (b *Broker) Service() *broker.Service { return b.service }

// Server is the broker's protocol server.
func (b *Broker) Server() *broker.Server { return b.server }

// Kill stops the broker's protocol server and nothing else, as a crash
// looks to the rest of the region: its port refuses connections, its
// clients are cut off, but its session lease lives on (the storage's store
// keeps it alive) with every bundle it held. Close still stops the rest.
func (b *Broker) Kill() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.server.Close(ctx)
	<-b.served
}

// Close stops the broker: the protocol server first, then the topic
// service (its topics close cleanly and its ownership is released), then
// the parts below it. The storage stays. Closing twice is harmless.
func (b *Broker) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	b.closers = nil
	if b.server != nil {
		<-b.served
	}
}
