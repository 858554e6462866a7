package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
)

// NodeConfig configures one broker node: the broker-side parts of a region
// (ledger client, managed-ledger factory, global policy cache, topic
// service, protocol server and web listener), on metadata stores and
// bookies that run elsewhere. `meridian broker` runs exactly this;
// `meridian standalone` runs it next to an embedded etcd and a local bookie.
type NodeConfig struct {
	// Region is the region (Pulsar cluster) the broker serves. Required.
	Region string
	// Store is the region's metadata store: bookie registrations, ledgers,
	// managed ledgers, cursors and ownership live there. Required; the
	// caller owns it (Close does not close it).
	Store meta.Store
	// Global is the global configuration store (clusters, tenants,
	// namespaces, policies). It may be Store itself, as in standalone.
	// Required; the caller owns it.
	Global meta.Store
	// BrokerAddr is where the Pulsar protocol is served, WebAddr where HTTP
	// (/metrics) is. Port 0 picks a free port (tests); then the broker id
	// changes with every run unless BrokerID is set.
	BrokerAddr string
	WebAddr    string
	// AdvertisedHost is the host clients are told to connect to; the ports
	// are the listeners'. Required.
	AdvertisedHost string
	// BrokerID names the broker in its region, stably across restarts, so
	// that a restarted broker revokes its previous run's leases at once
	// instead of waiting out their TTL (DESIGN §3). Default: the
	// advertised host:port of the protocol listener.
	BrokerID string
	// Bootstrap makes the node ensure the standalone/dev bootstrap state
	// (global.Store.Ensure: its cluster record, tenant public and namespace
	// public/default). Without it the node only creates its region's
	// cluster record if there is none (create-if-absent: an existing record
	// is an operator's and is left alone), so that lookups and active-region
	// redirects can name the region; tenants and namespaces are then the
	// operator's to create.
	Bootstrap bool
	// Broker and Service tune the protocol server and the topic service;
	// their URL, region and id fields are filled in from the fields above.
	Broker  broker.Config
	Service broker.ServiceConfig
	// Ledgers tunes the managed ledgers, including the E/Qw/Qa of new
	// ledgers; the node waits for EnsembleSize bookies before serving.
	Ledgers mledger.Config
	// Ledger tunes the ledger client.
	Ledger ledger.Config
	// BookieWait bounds the wait for EnsembleSize bookies to register.
	// Default 30s.
	BookieWait time.Duration
	// Registry receives the node's metrics and is served on WebAddr at
	// /metrics. Nil: a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// DefaultNodeConfig returns the defaults for a broker of region that
// advertises host. Store and Global are left for the caller to set.
func DefaultNodeConfig(region, host string) NodeConfig {
	return NodeConfig{
		Region:         region,
		BrokerAddr:     "localhost:6650",
		WebAddr:        "localhost:8080",
		AdvertisedHost: host,
		Broker:         broker.DefaultConfig("pulsar://localhost:6650"),
		Service:        broker.DefaultServiceConfig(region, "localhost:6650", "pulsar://localhost:6650"),
		Ledgers:        mledger.DefaultConfig(region),
		Ledger:         ledger.DefaultConfig(region),
		BookieWait:     30 * time.Second,
		Logger:         slog.Default(),
	}
}

// Validate checks what StartNode needs before it starts anything; the
// parts validate their own configs.
func (c NodeConfig) Validate() error {
	switch {
	case c.Region == "":
		return errors.New("standalone: NodeConfig.Region is required")
	case c.Store == nil || c.Global == nil:
		return errors.New("standalone: NodeConfig.Store and Global are required")
	case c.AdvertisedHost == "":
		return errors.New("standalone: NodeConfig.AdvertisedHost is required")
	case c.BrokerAddr == "" || c.WebAddr == "":
		return errors.New("standalone: NodeConfig.BrokerAddr and WebAddr are required")
	case c.Logger == nil:
		return errors.New("standalone: NodeConfig.Logger is required")
	}
	return nil
}

// Node is a running broker node. Close stops it.
type Node struct {
	cfg      NodeConfig
	closers  []func() // in order of start; run in reverse
	service  *broker.Service
	server   *broker.Server
	brokerLn net.Listener
	webLn    net.Listener
	id       string
	served   chan struct{} // closed when both listeners have stopped serving
}

// StartNode starts the broker-side parts of a region and returns once the
// broker serves: the policy cache is loaded, the broker has revoked its
// previous run's leases and registered, and both listeners accept.
func StartNode(ctx context.Context, cfg NodeConfig) (n *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, served: make(chan struct{})}
	defer func() {
		if err != nil {
			n.stop()
			close(n.served)
		}
	}()
	log := cfg.Logger
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}

	bookies, err := ledger.NewBKProto(cfg.Store, cfg.Region, bkproto.DefaultConnConfig(nil))
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { bookies.Close() })
	lcfg := cfg.Ledger
	lcfg.Region = cfg.Region
	lc, err := ledger.New(lcfg, cfg.Store, bookies, log, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { lc.Close() })
	if err := waitForBookies(ctx, lc, cfg.Ledgers.EnsembleSize, cfg.BookieWait); err != nil {
		return nil, err
	}
	mlcfg := cfg.Ledgers
	mlcfg.Region = cfg.Region
	factory, err := mledger.NewFactory(mlcfg, lc, cfg.Store, log, mledger.SystemClock())
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		factory.Close(cctx)
	})

	gscfg := global.DefaultConfig()
	gscfg.Logger = log
	gstore, err := global.NewStore(cfg.Global, gscfg)
	if err != nil {
		return nil, err
	}
	if n.brokerLn, err = net.Listen("tcp", cfg.BrokerAddr); err != nil {
		return nil, fmt.Errorf("standalone: broker listener: %w", err)
	}
	n.closers = append(n.closers, func() { n.brokerLn.Close() })
	if n.webLn, err = net.Listen("tcp", cfg.WebAddr); err != nil {
		return nil, fmt.Errorf("standalone: web listener: %w", err)
	}
	n.closers = append(n.closers, func() { n.webLn.Close() })
	serviceURL, webURL := n.ServiceURL(), n.WebURL()
	n.id = cfg.BrokerID
	if n.id == "" {
		n.id = advertised(cfg.AdvertisedHost, n.brokerLn)
	}

	cluster := global.ClusterData{ServiceURL: webURL, BrokerServiceURL: serviceURL}
	if cfg.Bootstrap {
		err = gstore.Ensure(ctx, global.Bootstrap{Clusters: map[string]global.ClusterData{cfg.Region: cluster}})
		if err != nil {
			return nil, fmt.Errorf("standalone: bootstrap tenant public and namespace public/default: %w", err)
		}
	} else if _, err := gstore.CreateCluster(ctx, cfg.Region, cluster); err != nil && !errors.Is(err, global.ErrExists) {
		return nil, fmt.Errorf("standalone: create the cluster record of region %s: %w", cfg.Region, err)
	}
	// The cache starts after the bootstrap, so that its first load, which
	// Ready waits for, holds what the bootstrap wrote.
	gcfg := global.DefaultCacheConfig()
	gcfg.Logger = log
	cache, err := global.StartCache(gstore, gcfg)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { cache.Close() })
	select {
	case <-cache.Ready():
	case <-ctx.Done():
		return nil, fmt.Errorf("standalone: loading the global policy cache: %w", ctx.Err())
	}

	scfg := cfg.Service
	scfg.Region, scfg.BrokerID, scfg.ServiceURL, scfg.WebURL = cfg.Region, n.id, serviceURL, webURL
	n.service, err = broker.NewService(scfg, cfg.Store, cache, gstore, factory, log)
	if err != nil {
		return nil, err
	}
	if err := n.service.Start(ctx); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.service.Close(cctx)
	})
	pcfg := cfg.Broker
	pcfg.ServiceURL = serviceURL
	n.server, err = broker.NewServer(pcfg, n.service, log)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.server.Close() })
	web := &http.Server{Handler: webHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	n.closers = append(n.closers, func() { web.Close() })

	go func() {
		defer close(n.served)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := web.Serve(n.webLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("web server stopped", "err", err)
			}
		}()
		if err := n.server.Serve(n.brokerLn); err != nil && !errors.Is(err, broker.ErrServerClosed) {
			log.Warn("broker server stopped", "err", err)
		}
		<-done
	}()
	log.Info("broker serving", "region", cfg.Region, "broker", n.id, "service_url", serviceURL, "web_url", webURL)
	return n, nil
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

func waitForBookies(ctx context.Context, lc *ledger.Client, n int, wait time.Duration) error {
	if wait <= 0 {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(lc.Directory().Snapshot()) < n {
		select {
		case <-lc.Directory().Changed():
		case <-ctx.Done():
			return fmt.Errorf("standalone: waiting for %d bookie(s) to register (start them, or lower the ensemble size): %w", n, ctx.Err())
		}
	}
	return nil
}

// ServiceURL is the pulsar:// URL clients use.
func (n *Node) ServiceURL() string {
	return "pulsar://" + advertised(n.cfg.AdvertisedHost, n.brokerLn)
}

// WebURL is the http:// URL of the web service.
func (n *Node) WebURL() string { return "http://" + advertised(n.cfg.AdvertisedHost, n.webLn) }

// BrokerID is the broker's id in its region.
func (n *Node) BrokerID() string { return n.id }

// Service is the broker's topic service.
func (n *Node) Service() *broker.Service { return n.service }

// Server is the broker's protocol server.
func (n *Node) Server() *broker.Server { return n.server }

// Close stops the node: the protocol server first, then the topic service
// (its topics are closed cleanly and its ownership released), then the
// parts below it. The metadata stores are the caller's.
func (n *Node) Close() error {
	n.stop()
	<-n.served
	return nil
}

func (n *Node) stop() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}
