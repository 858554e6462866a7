package standalone

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
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
	// BrokerTLSAddr and WebTLSAddr serve the same protocol and HTTP over
	// TLS (Pulsar's brokerServicePortTls, 6651, and webServicePortTls,
	// 8443); empty, the default, serves no TLS. Either needs TLS's
	// certificate and key. Clients are then also told of pulsar+ssl:// and
	// https:// URLs.
	BrokerTLSAddr string
	WebTLSAddr    string
	// TLS is the server side of the TLS listeners.
	TLS TLSConfig
	// Auth is client authentication (Pulsar's authenticationEnabled and
	// its providers), on the protocol and, through Authenticator, on the
	// admin API. Broker.Auth, when set, is used instead (tests).
	Auth auth.Config
	// Authorization is Pulsar's authorizationEnabled and superUserRoles.
	// Broker.Authz, when set, is used instead (tests).
	Authorization AuthorizationConfig
	// DefaultNamespaceBundles is the bundle count of a namespace created
	// without one (Pulsar's defaultNumberOfNamespaceBundles). Default 4;
	// 1..1024.
	DefaultNamespaceBundles int
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
	// Bookies is how the ledger client reaches the registered bookies. Nil,
	// the default: bkproto connections. Benchmarks set in-memory bookies
	// (ledgertest) here to measure the broker and its clients without
	// storage; the caller owns them.
	Bookies ledger.Bookies
	// Registry receives the node's metrics and is served on WebAddr at
	// /metrics. Nil: a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

// TLSConfig is the server side of TLS, as Pulsar's broker.conf gives it
// (see auth.ServerTLSConfig for how the settings combine).
type TLSConfig struct {
	// CertFile and KeyFile are the broker's PEM certificate chain and key
	// (tlsCertificateFilePath, tlsKeyFilePath). Required to serve TLS.
	CertFile, KeyFile string
	// TrustCertsFile holds the PEM CAs client certificates are verified
	// against (tlsTrustCertsFilePath). Without it no client certificate
	// is verified, so the "tls" authentication method refuses everyone.
	TrustCertsFile string
	// RequireTrustedClientCert refuses a handshake without a verified
	// client certificate (tlsRequireTrustedClientCertOnConnect).
	RequireTrustedClientCert bool
	// AllowInsecureConnection accepts client certificates without
	// verifying them (tlsAllowInsecureConnection): encrypted, but no
	// certificate authenticates.
	AllowInsecureConnection bool
}

// AuthorizationConfig is Pulsar's authorization switch.
type AuthorizationConfig struct {
	// Enabled checks every lookup, producer, consumer and admin call
	// against the role's grants (authorizationEnabled). Without
	// authentication every client has the anonymous role.
	Enabled bool
	// SuperUserRoles may do anything (superUserRoles).
	SuperUserRoles []string
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
		Auth:           auth.DefaultConfig(),
		Logger:         slog.Default(),

		DefaultNamespaceBundles: global.DefaultConfig().DefaultBundles,
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
	case (c.BrokerTLSAddr != "" || c.WebTLSAddr != "") && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return errors.New("standalone: serving TLS (BrokerTLSAddr, WebTLSAddr) needs TLS.CertFile and TLS.KeyFile (tlsCertificateFilePath, tlsKeyFilePath)")
	}
	return c.Auth.Validate()
}

// Node is a running broker node. Close stops it.
type Node struct {
	cfg      NodeConfig
	closers  []func() // in order of start; run in reverse
	service  *broker.Service
	server   *broker.Server
	authn    *auth.Authenticator
	authz    *auth.Authorizer // nil when authorization is off
	brokerLn net.Listener
	webLn    net.Listener
	// brokerTLSLn and webTLSLn are nil when TLS is not served.
	brokerTLSLn net.Listener
	webTLSLn    net.Listener
	id          string
	served      chan struct{} // closed when every listener has stopped serving
}

// StartNode starts the broker-side parts of a region and returns once the
// broker serves: the policy cache is loaded, the broker has revoked its
// previous run's leases and registered, and both listeners accept.
func StartNode(ctx context.Context, cfg NodeConfig) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, served: make(chan struct{})}
	defer func() {
		if err != nil {
			n.stop()
			close(n.served)
		}
	}()
	log := cfg.Logger
	var tlsCfg *tls.Config
	if cfg.BrokerTLSAddr != "" || cfg.WebTLSAddr != "" {
		t := cfg.TLS
		if tlsCfg, err = auth.ServerTLSConfig(t.CertFile, t.KeyFile, t.TrustCertsFile, t.RequireTrustedClientCert, t.AllowInsecureConnection); err != nil {
			return nil, fmt.Errorf("standalone: TLS: %w", err)
		}
	}
	n.authn = cfg.Broker.Auth
	if n.authn == nil {
		if n.authn, err = auth.New(cfg.Auth); err != nil {
			return nil, fmt.Errorf("standalone: authentication: %w", err)
		}
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}

	bookies := cfg.Bookies
	if bookies == nil {
		bk, err := ledger.NewBKProto(cfg.Store, cfg.Region, bkproto.DefaultConnConfig(nil))
		if err != nil {
			return nil, err
		}
		n.closers = append(n.closers, func() { bk.Close() })
		bookies = bk
	}
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
	if cfg.DefaultNamespaceBundles != 0 {
		gscfg.DefaultBundles = cfg.DefaultNamespaceBundles
	}
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
	if cfg.BrokerTLSAddr != "" {
		ln, err := net.Listen("tcp", cfg.BrokerTLSAddr)
		if err != nil {
			return nil, fmt.Errorf("standalone: broker TLS listener: %w", err)
		}
		n.brokerTLSLn = tls.NewListener(ln, tlsCfg)
		n.closers = append(n.closers, func() { n.brokerTLSLn.Close() })
	}
	if cfg.WebTLSAddr != "" {
		ln, err := net.Listen("tcp", cfg.WebTLSAddr)
		if err != nil {
			return nil, fmt.Errorf("standalone: web TLS listener: %w", err)
		}
		n.webTLSLn = tls.NewListener(ln, tlsCfg)
		n.closers = append(n.closers, func() { n.webTLSLn.Close() })
	}
	serviceURL, webURL := n.ServiceURL(), n.WebURL()
	serviceURLTLS, webURLTLS := n.ServiceURLTLS(), n.WebURLTLS()
	n.id = cfg.BrokerID
	if n.id == "" {
		n.id = advertised(cfg.AdvertisedHost, n.brokerLn)
	}

	cluster := n.ClusterData()
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
	n.authz = cfg.Broker.Authz
	if n.authz == nil && cfg.Authorization.Enabled {
		n.authz = auth.NewAuthorizer(cfg.Authorization.SuperUserRoles, cache)
	}

	scfg := cfg.Service
	scfg.Region, scfg.BrokerID, scfg.ServiceURL, scfg.WebURL = cfg.Region, n.id, serviceURL, webURL
	scfg.ServiceURLTLS = serviceURLTLS
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
	pcfg.ServiceURL, pcfg.ServiceURLTLS = serviceURL, serviceURLTLS
	pcfg.Auth, pcfg.Authz = n.authn, n.authz
	n.server, err = broker.NewServer(pcfg, n.service, log)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() { n.server.Close() })
	adm, err := admin.New(admin.BrokerConfig(pcfg, n.service.Config()), n.service, log)
	if err != nil {
		return nil, fmt.Errorf("standalone: admin API: %w", err)
	}
	web := &http.Server{Handler: webHandler(reg, adm), ReadHeaderTimeout: 10 * time.Second}
	n.closers = append(n.closers, func() { web.Close() })

	// One goroutine per listener, all owned by Close through served.
	var serving sync.WaitGroup
	serveWeb := func(ln net.Listener) {
		serving.Go(func() {
			if err := web.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("web server stopped", "listener", ln.Addr().String(), "err", err)
			}
		})
	}
	serveBroker := func(ln net.Listener) {
		serving.Go(func() {
			if err := n.server.Serve(ln); err != nil && !errors.Is(err, broker.ErrServerClosed) {
				log.Warn("broker server stopped", "listener", ln.Addr().String(), "err", err)
			}
		})
	}
	serveWeb(n.webLn)
	serveBroker(n.brokerLn)
	if n.webTLSLn != nil {
		serveWeb(n.webTLSLn)
	}
	if n.brokerTLSLn != nil {
		serveBroker(n.brokerTLSLn)
	}
	go func() {
		serving.Wait()
		close(n.served)
	}()
	log.Info("broker serving", "region", cfg.Region, "broker", n.id, "service_url", serviceURL, "web_url", webURL,
		"service_url_tls", serviceURLTLS, "web_url_tls", webURLTLS, "authentication", n.authn.Enabled(), "authorization", n.authz != nil)
	return n, nil
}

// webHandler serves the metrics and the admin REST API (with the HTTP
// lookup surface of clients whose service URL is http://).
func webHandler(reg *prometheus.Registry, adm http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/admin/", adm)
	mux.Handle("/lookup/", adm)
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

// ServiceURLTLS is the pulsar+ssl:// URL clients use, or "" without TLS.
func (n *Node) ServiceURLTLS() string {
	if n.brokerTLSLn == nil {
		return ""
	}
	return "pulsar+ssl://" + advertised(n.cfg.AdvertisedHost, n.brokerTLSLn)
}

// WebURLTLS is the https:// URL of the web service, or "" without TLS.
func (n *Node) WebURLTLS() string {
	if n.webTLSLn == nil {
		return ""
	}
	return "https://" + advertised(n.cfg.AdvertisedHost, n.webTLSLn)
}

// ClusterData is the region's cluster record as this node would write it:
// its URLs.
func (n *Node) ClusterData() global.ClusterData {
	return global.ClusterData{
		ServiceURL: n.WebURL(), ServiceURLTLS: n.WebURLTLS(),
		BrokerServiceURL: n.ServiceURL(), BrokerServiceURLTLS: n.ServiceURLTLS(),
	}
}

// Authenticator is the one that authenticates the protocol's clients
// (never nil; a disabled one gives every client the anonymous role). The
// admin REST API must use the same one.
func (n *Node) Authenticator() *auth.Authenticator { return n.authn }

// Authorizer is the one that authorizes the protocol's lookups, producers
// and consumers, or nil when authorization is off. The admin REST API must
// use the same one.
func (n *Node) Authorizer() *auth.Authorizer { return n.authz }

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
