// Package standalone assembles one region in one process: an embedded etcd,
// a local bookie, the ledger client and managed-ledger factory, the global
// configuration cache, and a broker serving the Pulsar protocol. It is what
// `meridian standalone` runs, and what the broker's tests start, so that
// both exercise the same wiring.
//
// Everything lives under DataDir (etcd/ and bookie/), so a restart on the
// same directory continues where the last run stopped: the broker and the
// bookie revoke their previous run's leases before registering (DESIGN §3),
// and topics are fenced and recovered as in a takeover.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
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
	ml := mledger.DefaultConfig(region)
	ml.EnsembleSize, ml.WriteQuorum, ml.AckQuorum = 1, 1, 1
	return Config{
		DataDir:        dataDir,
		Region:         region,
		BrokerAddr:     "localhost:6650",
		WebAddr:        "localhost:8080",
		AdvertisedHost: "localhost",
		Broker:         broker.DefaultConfig("pulsar://localhost:6650"),
		Service:        broker.DefaultServiceConfig(region, "localhost:6650", "pulsar://localhost:6650"),
		Ledgers:        ml,
		Logger:         slog.Default(),
	}
}

// Standalone is a running region. Close stops it.
type Standalone struct {
	cfg      Config
	closers  []func() // in reverse order of start
	service  *broker.Service
	server   *broker.Server
	brokerLn net.Listener
	webLn    net.Listener
	served   chan struct{}
}

// Start starts every part and returns once the broker serves.
func Start(ctx context.Context, cfg Config) (s *Standalone, err error) {
	if cfg.DataDir == "" {
		return nil, errors.New("standalone: DataDir is required")
	}
	s = &Standalone{cfg: cfg, served: make(chan struct{})}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	log := cfg.Logger

	ecfg := meta.DefaultEmbedConfig()
	ecfg.DataDir = filepath.Join(cfg.DataDir, "etcd")
	ecfg.Logger = log
	emb, err := meta.StartEmbed(ctx, ecfg)
	if err != nil {
		return nil, fmt.Errorf("standalone: start etcd: %w", err)
	}
	s.closers = append(s.closers, func() { emb.Close() })
	dcfg := meta.DefaultEtcdConfig()
	dcfg.Logger = log
	store, err := meta.Dial(ctx, emb.Endpoints(), dcfg)
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

	bookies, err := ledger.NewBKProto(store, cfg.Region, bkproto.DefaultConnConfig(nil))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { bookies.Close() })
	lc, err := ledger.New(ledger.DefaultConfig(cfg.Region), store, bookies, log, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { lc.Close() })
	if err := waitForBookies(ctx, lc, cfg.Ledgers.EnsembleSize); err != nil {
		return nil, err
	}
	factory, err := mledger.NewFactory(cfg.Ledgers, lc, store, log, mledger.SystemClock())
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		factory.Close(cctx)
	})

	gstore, err := global.NewStore(store, global.DefaultConfig())
	if err != nil {
		return nil, err
	}
	gcfg := global.DefaultCacheConfig()
	gcfg.Logger = log
	cache, err := global.StartCache(gstore, gcfg)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { cache.Close() })

	if s.brokerLn, err = net.Listen("tcp", cfg.BrokerAddr); err != nil {
		return nil, fmt.Errorf("standalone: broker listener: %w", err)
	}
	s.closers = append(s.closers, func() { s.brokerLn.Close() })
	if s.webLn, err = net.Listen("tcp", cfg.WebAddr); err != nil {
		return nil, fmt.Errorf("standalone: web listener: %w", err)
	}
	s.closers = append(s.closers, func() { s.webLn.Close() })
	serviceURL := fmt.Sprintf("pulsar://%s", advertised(cfg.AdvertisedHost, s.brokerLn))
	webURL := fmt.Sprintf("http://%s", advertised(cfg.AdvertisedHost, s.webLn))

	if err := gstore.Ensure(ctx, global.Bootstrap{Clusters: map[string]global.ClusterData{
		cfg.Region: {ServiceURL: webURL, BrokerServiceURL: serviceURL},
	}}); err != nil {
		return nil, fmt.Errorf("standalone: bootstrap tenant public and namespace public/default: %w", err)
	}
	select {
	case <-cache.Ready():
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	scfg := cfg.Service
	scfg.Region, scfg.ServiceURL, scfg.WebURL = cfg.Region, serviceURL, webURL
	scfg.BrokerID = advertised(cfg.AdvertisedHost, s.brokerLn)
	s.service, err = broker.NewService(scfg, store, cache, gstore, factory, log)
	if err != nil {
		return nil, err
	}
	if err := s.service.Start(ctx); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.service.Close(cctx)
	})
	pcfg := cfg.Broker
	pcfg.ServiceURL = serviceURL
	s.server, err = broker.NewServer(pcfg, s.service, log)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.server.Close() })
	web := &http.Server{Handler: webHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	s.closers = append(s.closers, func() { web.Close() })

	go func() {
		defer close(s.served)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := web.Serve(s.webLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("web server stopped", "err", err)
			}
		}()
		if err := s.server.Serve(s.brokerLn); err != nil && !errors.Is(err, broker.ErrServerClosed) {
			log.Warn("broker server stopped", "err", err)
		}
		<-done
	}()
	log.Info("standalone ready", "broker", serviceURL, "web", webURL, "data", cfg.DataDir)
	return s, nil
}

func webHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// advertised is host with ln's port.
func advertised(host string, ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port)
}

func waitForBookies(ctx context.Context, lc *ledger.Client, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(lc.Directory().Snapshot()) < n {
		select {
		case <-lc.Directory().Changed():
		case <-ctx.Done():
			return fmt.Errorf("standalone: waiting for %d bookie(s) to register: %w", n, ctx.Err())
		}
	}
	return nil
}

// ServiceURL is the pulsar:// URL clients use.
func (s *Standalone) ServiceURL() string {
	return "pulsar://" + advertised(s.cfg.AdvertisedHost, s.brokerLn)
}

// WebURL is the http:// URL of the web service.
func (s *Standalone) WebURL() string { return "http://" + advertised(s.cfg.AdvertisedHost, s.webLn) }

// Service is the broker's topic service.
func (s *Standalone) Service() *broker.Service { return s.service }

// Server is the broker's protocol server.
func (s *Standalone) Server() *broker.Server { return s.server }

// Close stops every part, the broker first (its topics are closed cleanly
// and its ownership released), etcd last.
func (s *Standalone) Close() error {
	s.stop()
	<-s.served
	return nil
}

func (s *Standalone) stop() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
	if s.server == nil {
		close(s.served)
	}
}
