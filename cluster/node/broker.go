package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/replicator/remote"
	"github.com/meridian-mq/meridian/telemetry"
)

// BrokerConfig configures a region's broker in this process: the
// managed-ledger factory, the topic service, the protocol server, and the
// web listener with the admin REST API and /metrics, on the region's ledger
// client and policy cache. The region, the metadata stores, the logger and
// the metrics registry are the region's (RegionConfig, Config), set once
// there and handed to every part.
type BrokerConfig struct {
	// BrokerAddr is where the Pulsar protocol is served, WebAddr where HTTP
	// (the admin API, /metrics) is. Port 0 picks a free port (tests); then
	// the broker id changes with every run unless BrokerID is set.
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
	// Web bounds the HTTP server of WebAddr and WebTLSAddr: its timeouts
	// and open connections (maxHttpServerConnections). The zero value is
	// DefaultHTTPConfig.
	Web HTTPConfig
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
	// are the listeners'. Required, unless AdvertisedListeners is set:
	// then it defaults to the internal listener's host, and is the host
	// of the web URLs only.
	AdvertisedHost string
	// AdvertisedListeners are Pulsar's advertisedListeners (PIP-61): named
	// addresses by which clients of different networks reach the broker,
	// as name:pulsar://host:port[,name:pulsar+ssl://host:port]..., e.g.
	// internal:pulsar://10.0.0.5:6650,external:pulsar://broker1.example.com:16650.
	// A client names one with its ListenerName and is answered that
	// listener's URLs, by whichever broker it asks. The internal
	// listener's URLs are the broker's own (ServiceURL): for lookups that
	// name none, the region's other brokers, the replicators and the
	// cluster record. Every listener is served on BrokerAddr (and
	// BrokerTLSAddr): the addresses are what clients dial, through
	// whatever port mapping lies between. Rules: parseAdvertisedListeners.
	// Empty, the default: clients are told AdvertisedHost.
	AdvertisedListeners string
	// InternalListenerName names the internal listener (Pulsar's
	// internalListenerName); default the first of AdvertisedListeners.
	InternalListenerName string
	// BrokerID names the broker in its region, stably across restarts, so
	// that a restarted broker revokes its previous run's leases at once
	// instead of waiting out their TTL (DESIGN §3). Default: the
	// advertised host:port of the protocol listener (the internal
	// listener's, with AdvertisedListeners).
	BrokerID string
	// Broker and Service tune the protocol server and the topic service.
	// Their region, broker id and URL fields are not read: the node sets
	// them from the region's name and the listeners.
	Broker  broker.Config
	Service broker.ServiceConfig
	// Ledgers tunes the managed ledgers, including the E/Qw/Qa of new
	// ledgers; the broker waits for EnsembleSize bookies before serving.
	// Its Region is set by the node.
	Ledgers mledger.Config
	// BookieWait bounds the wait for EnsembleSize bookies to register.
	// Default 30s.
	BookieWait time.Duration
	// DrainTimeout bounds the hand-off of every bundle to the other brokers
	// when the broker stops (SIGTERM, Close), taken while it still serves
	// its clients so that they are told where their topics went; what is
	// left at the deadline is unloaded. Longer lets a loaded broker finish
	// its hand-offs; the process's stop takes up to this much more. Default
	// 30s (Pulsar's brokerShutdownTimeoutMs is 60s); at least 1s.
	DrainTimeout time.Duration
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

// DefaultBrokerConfig returns the defaults for a broker that advertises
// host and listens on localhost:6650 and localhost:8080.
func DefaultBrokerConfig(host string) BrokerConfig {
	return BrokerConfig{
		BrokerAddr:     "localhost:6650",
		WebAddr:        "localhost:8080",
		AdvertisedHost: host,
		Broker:         broker.DefaultConfig(""),
		Service:        broker.DefaultServiceConfig("", "", ""),
		Ledgers:        mledger.DefaultConfig(""),
		BookieWait:     30 * time.Second,
		DrainTimeout:   30 * time.Second,
		Auth:           auth.DefaultConfig(),
		Web:            DefaultHTTPConfig(),

		DefaultNamespaceBundles: global.DefaultConfig().DefaultBundles,
	}
}

// Validate checks what the broker needs before anything starts; the parts
// validate their own configs.
func (c BrokerConfig) Validate() error {
	listeners, err := parseAdvertisedListeners(c.AdvertisedListeners, c.InternalListenerName)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	switch {
	case c.AdvertisedHost == "" && listeners.byName == nil:
		return errors.New("node: BrokerConfig.AdvertisedHost (or AdvertisedListeners) is required")
	case listeners.hasTLS() && c.BrokerTLSAddr == "":
		return errors.New("node: a pulsar+ssl:// URL in AdvertisedListeners needs the broker to serve TLS (BrokerTLSAddr, brokerServicePortTls)")
	case c.BrokerAddr == "" || c.WebAddr == "":
		return errors.New("node: BrokerConfig.BrokerAddr and WebAddr are required")
	case (c.BrokerTLSAddr != "" || c.WebTLSAddr != "") && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return errors.New("node: serving TLS (BrokerTLSAddr, WebTLSAddr) needs TLS.CertFile and TLS.KeyFile (tlsCertificateFilePath, tlsKeyFilePath)")
	case c.DrainTimeout < time.Second:
		return fmt.Errorf("node: BrokerConfig.DrainTimeout %v, want at least 1s", c.DrainTimeout)
	}
	if err := c.Web.orDefault().Validate(); err != nil {
		return err
	}
	return c.Auth.Validate()
}

// Broker is a running broker with its admin API. Its region closes it.
type Broker struct {
	cfg      BrokerConfig
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
	// host is the host of the broker's web URLs, and of its broker URLs
	// when it has no advertised listeners: AdvertisedHost, or the
	// internal listener's.
	host      string
	listeners advertisedListeners
	id        string
	served    chan struct{} // closed when every listener has stopped serving
	draining  atomic.Bool   // set when the stop's drain begins (Ready)
}

// startBroker starts region r's broker, on the region's ledger client and
// policy cache, and returns once it serves: the
// policy cache is loaded, the broker has revoked its previous run's leases
// and registered, and every listener accepts.
func startBroker(ctx context.Context, r *regionParts, cfg BrokerConfig) (_ *Broker, err error) {
	n := &Broker{cfg: cfg, served: make(chan struct{}), host: cfg.AdvertisedHost}
	defer func() {
		if err != nil {
			n.stop()
			close(n.served)
		}
	}()
	if n.listeners, err = parseAdvertisedListeners(cfg.AdvertisedListeners, cfg.InternalListenerName); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.host == "" {
		u, _ := url.Parse(n.listeners.byName[n.listeners.internal].ServiceURL)
		n.host = u.Hostname()
	}
	log := r.log
	var tlsCfg *tls.Config
	if cfg.BrokerTLSAddr != "" || cfg.WebTLSAddr != "" {
		t := cfg.TLS
		if tlsCfg, err = auth.ServerTLSConfig(t.CertFile, t.KeyFile, t.TrustCertsFile, t.RequireTrustedClientCert, t.AllowInsecureConnection); err != nil {
			return nil, fmt.Errorf("node: TLS: %w", err)
		}
	}
	n.authn = cfg.Broker.Auth
	if n.authn == nil {
		if n.authn, err = auth.New(cfg.Auth); err != nil {
			return nil, fmt.Errorf("node: authentication: %w", err)
		}
	}
	lc, err := r.ledgerClient(ctx)
	if err != nil {
		return nil, err
	}
	if err := waitForBookies(ctx, lc, cfg.Ledgers.EnsembleSize, cfg.BookieWait); err != nil {
		return nil, err
	}
	mlcfg := cfg.Ledgers
	mlcfg.Region, mlcfg.DisableMetrics, mlcfg.Clock = r.name, r.metrics.Disabled, r.clock
	factory, err := mledger.NewFactory(mlcfg, lc, r.store, log)
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
	gstore, err := global.NewStore(r.global, gscfg)
	if err != nil {
		return nil, err
	}
	if n.brokerLn, err = net.Listen("tcp", cfg.BrokerAddr); err != nil {
		return nil, fmt.Errorf("node: broker listener: %w", err)
	}
	n.closers = append(n.closers, func() { n.brokerLn.Close() })
	if n.webLn, err = net.Listen("tcp", cfg.WebAddr); err != nil {
		return nil, fmt.Errorf("node: web listener: %w", err)
	}
	webCfg := cfg.Web.orDefault()
	n.webLn = webCfg.listener(n.webLn)
	n.closers = append(n.closers, func() { n.webLn.Close() })
	if cfg.BrokerTLSAddr != "" {
		ln, err := net.Listen("tcp", cfg.BrokerTLSAddr)
		if err != nil {
			return nil, fmt.Errorf("node: broker TLS listener: %w", err)
		}
		n.brokerTLSLn = tls.NewListener(ln, tlsCfg)
		n.closers = append(n.closers, func() { n.brokerTLSLn.Close() })
	}
	if cfg.WebTLSAddr != "" {
		ln, err := net.Listen("tcp", cfg.WebTLSAddr)
		if err != nil {
			return nil, fmt.Errorf("node: web TLS listener: %w", err)
		}
		n.webTLSLn = webCfg.tlsListener(ln, tlsCfg)
		n.closers = append(n.closers, func() { n.webTLSLn.Close() })
	}
	serviceURL, webURL := n.ServiceURL(), n.WebURL()
	serviceURLTLS, webURLTLS := n.ServiceURLTLS(), n.WebURLTLS()
	n.id = cfg.BrokerID
	if n.id == "" {
		n.id = strings.TrimPrefix(serviceURL, "pulsar://")
	}

	cluster := n.ClusterData()
	if r.bootstrap {
		err = gstore.Ensure(ctx, global.Bootstrap{Clusters: map[string]global.ClusterData{r.name: cluster}})
		if err != nil {
			return nil, fmt.Errorf("node: bootstrap tenant public and namespace public/default: %w", err)
		}
	} else if _, err := gstore.CreateCluster(ctx, r.name, cluster); err != nil && !errors.Is(err, global.ErrExists) {
		return nil, fmt.Errorf("node: create the cluster record of region %s: %w", r.name, err)
	}
	// The cache starts after the bootstrap, so that its first load, which
	// Ready waits for, holds what the bootstrap wrote.
	cache, err := r.policyCache(ctx)
	if err != nil {
		return nil, err
	}
	n.authz = cfg.Broker.Authz
	if n.authz == nil && cfg.Authorization.Enabled {
		n.authz = auth.NewAuthorizer(cfg.Authorization.SuperUserRoles, cache)
	}

	scfg := cfg.Service
	scfg.Region, scfg.BrokerID, scfg.ServiceURL, scfg.WebURL = r.name, n.id, serviceURL, webURL
	scfg.ServiceURLTLS, scfg.WebURLTLS = serviceURLTLS, webURLTLS
	scfg.Listeners = n.listeners.byName
	if scfg.Tracing == nil {
		scfg.Tracing = r.tracing
	}
	scfg.Metrics, scfg.Registerer, scfg.Clock = r.metrics, r.registry, r.clock
	if scfg.Failover.Probe == nil {
		scfg.Failover.Probe = probeRegion(r.name)
	}
	n.service, err = broker.NewService(scfg, r.store, cache, gstore, factory, log, newRand())
	if err != nil {
		return nil, err
	}
	if !r.metrics.Disabled {
		pulsar := broker.NewPulsarCollector(n.service, scrapeTimeout)
		if err := r.registry.Register(pulsar); err != nil {
			return nil, fmt.Errorf("node: register the broker's Pulsar metrics: %w", err)
		}
		n.closers = append(n.closers, func() { r.registry.Unregister(pulsar) })
		unbuilt := admin.NewUnbuiltCollector(cache)
		if err := r.registry.Register(unbuilt); err != nil {
			return nil, fmt.Errorf("node: register the policies-not-built metric: %w", err)
		}
		n.closers = append(n.closers, func() { r.registry.Unregister(unbuilt) })
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
	pcfg.Auth, pcfg.Authz, pcfg.Clock = n.authn, n.authz, r.clock
	n.server, err = broker.NewServer(pcfg, n.service, log)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.server.Close(cctx); err != nil {
			log.Warn("closing the Pulsar protocol server", "err", err)
		}
	})
	// Runs before the server closes: the clients hear where their topics
	// went while their connections are still up.
	n.closers = append(n.closers, func() {
		n.draining.Store(true)
		cctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
		defer cancel()
		n.service.LoadManager().Drain(cctx)
	})
	acfg := admin.BrokerConfig(pcfg, n.service.Config())
	acfg.Bookies = autorecovery.NewAdmin(r.store, r.name, lc)
	adm, err := admin.New(acfg, n.service, log)
	if err != nil {
		return nil, fmt.Errorf("node: admin API: %w", err)
	}
	web := webCfg.server(webHandler(r.registry, adm, n.statusPage, r.pprof))
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
	log.Info("broker serving", telemetry.KeyBroker, n.id, "service_url", serviceURL, "web_url", webURL,
		"service_url_tls", serviceURLTLS, "web_url_tls", webURLTLS, "advertised_listeners", cfg.AdvertisedListeners, "authentication", n.authn.Enabled(), "authorization", n.authz != nil)
	return n, nil
}

// scrapeTimeout bounds the reads one scrape of the broker's Pulsar series
// makes (the replication backlogs), so that a slow bookie delays a scrape
// by at most this long.
const scrapeTimeout = 5 * time.Second

// webHandler serves the metrics, the health endpoints (health.go), the
// admin REST API (with the HTTP lookup surface of clients whose service
// URL is http://), and the profiles with pprof.
func webHandler(reg *prometheus.Registry, adm http.Handler, status http.HandlerFunc, pprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.MetricsHandler(reg))
	mux.Handle("GET /status.html", status)
	addLiveness(mux)
	if pprof {
		addPprof(mux)
	}
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
	dir := lc.Directory()
	for {
		// Changed before Snapshot: a registration between the two closes
		// the channel rather than going unseen.
		changed := dir.Changed()
		if len(dir.Snapshot()) >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("node: waiting for %d bookie(s) to register (start them, or lower the ensemble size): %w", n, ctx.Err())
		}
	}
}

// ServiceURL is the pulsar:// URL clients use: the internal listener's,
// or the advertised host with the listener's port.
func (n *Broker) ServiceURL() string {
	if n.listeners.byName != nil {
		return n.listeners.byName[n.listeners.internal].ServiceURL
	}
	return "pulsar://" + advertised(n.host, n.brokerLn)
}

// WebURL is the http:// URL of the web service.
func (n *Broker) WebURL() string { return "http://" + advertised(n.host, n.webLn) }

// ServiceURLTLS is the pulsar+ssl:// URL clients use, or "" without TLS:
// the internal listener's (which may have none), or the advertised host
// with the TLS listener's port.
func (n *Broker) ServiceURLTLS() string {
	switch {
	case n.brokerTLSLn == nil:
		return ""
	case n.listeners.byName != nil:
		return n.listeners.byName[n.listeners.internal].ServiceURLTLS
	}
	return "pulsar+ssl://" + advertised(n.host, n.brokerTLSLn)
}

// WebURLTLS is the https:// URL of the web service, or "" without TLS.
func (n *Broker) WebURLTLS() string {
	if n.webTLSLn == nil {
		return ""
	}
	return "https://" + advertised(n.host, n.webTLSLn)
}

// ClusterData is the region's cluster record as this node would create
// it: its URLs, and the mark by which the region's leader keeps the record
// naming every live broker of the region (broker's clusterrecord.go).
func (n *Broker) ClusterData() global.ClusterData {
	return global.ClusterData{
		ServiceURL: n.WebURL(), ServiceURLTLS: n.WebURLTLS(),
		BrokerServiceURL: n.ServiceURL(), BrokerServiceURLTLS: n.ServiceURLTLS(),
		MaintainedByRegion: true,
	}
}

// Authenticator is the one that authenticates the protocol's clients
// (never nil; a disabled one gives every client the anonymous role). The
// admin REST API must use the same one.
func (n *Broker) Authenticator() *auth.Authenticator { return n.authn }

// Authorizer is the one that authorizes the protocol's lookups, producers
// and consumers, or nil when authorization is off. The admin REST API must
// use the same one.
func (n *Broker) Authorizer() *auth.Authorizer { return n.authz }

// BrokerID is the broker's id in its region.
func (n *Broker) BrokerID() string { return n.id }

// Service is the broker's topic service.
func (n *Broker) Service() *broker.Service { return n.service }

// Server is the broker's protocol server.
func (n *Broker) Server() *broker.Server { return n.server }

// Close stops the broker: the protocol server first, then the topic service
// (its topics are closed cleanly and its ownership released), then the
// parts below it. The metadata stores are the caller's.
func (n *Broker) Close() error {
	n.stop()
	<-n.served
	return nil
}

func (n *Broker) stop() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
	n.closers = nil
}

// probeRegion is automatic failover's probe (broker.FailoverConfig.Probe)
// for the brokers of region from: a lookup through the other region's
// broker service URL, as a replicator of from makes it.
func probeRegion(from string) func(ctx context.Context, c global.ClusterData, topic string, timeout time.Duration) error {
	return func(ctx context.Context, c global.ClusterData, topic string, timeout time.Duration) error {
		rc := remote.DefaultConfig(from, topic, c)
		rc.OperationTimeout = timeout
		return remote.Probe(ctx, rc)
	}
}
