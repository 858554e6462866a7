package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/crypto/bcrypt"
)

// EmbedConfig configures an embedded etcd member: the one-member cluster of
// `meridian standalone` and `meridian dev`, the server the tests run against,
// and each member that `meridian etcd` runs as its own process.
//
// Hygiene (DESIGN §3). The member always runs with periodic auto-compaction
// and a backend quota, and defragments on a schedule. Compaction drops old
// revisions but only frees pages inside the bbolt file; defragmentation gives
// the space back. When the database still reaches the quota, etcd raises a
// NOSPACE alarm and refuses every write (reads and deletes still work) until
// an operator, after freeing space, disarms it:
//
//	rev=$(etcdctl endpoint status --write-out=json | grep -o '"revision":[0-9]*' | cut -d: -f2)
//	etcdctl compact "$rev"              # drop all history before now
//	etcdctl defrag --cluster            # give the freed pages back, member by member
//	etcdctl endpoint status --write-out=table   # DB SIZE now well under the quota?
//	etcdctl alarm disarm                # writes resume
//	etcdctl alarm list                  # empty
//
// Disarming without first getting well under the quota only re-raises the
// alarm at the next write. If the data itself is too big, raise
// QuotaBackendBytes (at most 8 GiB, etcd's own advice) and restart the
// member, or delete data. The launcher never disarms by itself: it cannot know
// whether the space problem is solved.
type EmbedConfig struct {
	// Name is the member's name, unique in its cluster and used as its key
	// in InitialCluster. Default "meridian".
	Name string
	// DataDir holds the member's WAL and database. When empty, a temporary
	// directory is created and removed by Close, so nothing survives the
	// process: right for tests, wrong for anything that must keep data.
	DataDir string
	// ListenClientURLs are where clients connect (http://IP:port). A port of
	// 0 on a loopback or other local IP is replaced by a free port before
	// starting; Endpoints reports the result. Default http://127.0.0.1:0.
	ListenClientURLs []string
	// AdvertiseClientURLs are the client URLs the member publishes to the
	// cluster. Empty means the (resolved) listen URLs. They need real ports.
	AdvertiseClientURLs []string
	// ListenPeerURLs are where the other members' raft traffic arrives.
	// Port 0 is resolved as for client URLs, which is only possible while
	// InitialCluster is empty (a one-member cluster). Default
	// http://127.0.0.1:0.
	ListenPeerURLs []string
	// AdvertisePeerURLs are the peer URLs the member publishes, which must
	// match its entry in InitialCluster. Empty means the listen URLs.
	AdvertisePeerURLs []string
	// ListenMetricsURLs are extra URLs (etcd's --listen-metrics-urls) that
	// serve only /metrics and /health, e.g. http://0.0.0.0:2381: probes and
	// scrapers that hold no client certificate (the kubelet's) reach them
	// while the client URLs require one. http://, or https:// with
	// ClientTLS's certificate. Port 0 is resolved as for client URLs
	// (MetricsURLs reports the result). Empty, the default: none.
	ListenMetricsURLs []string
	// InitialCluster is the bootstrap membership, "name=peerURL,...". Empty
	// means this member alone. It is read only when DataDir is new.
	InitialCluster string
	// InitialClusterState is "new" to bootstrap a cluster, or "existing" to
	// join one (after `etcdctl member add`). Default "new".
	InitialClusterState string
	// InitialClusterToken tells clusters apart at bootstrap so that members
	// of two clusters never join each other. Default "meridian-etcd".
	InitialClusterToken string
	// AutoCompactionRetention is how much revision history periodic
	// compaction keeps. Watches and List pages further back fail with
	// ErrCompacted; a longer retention costs database space. Default 1h;
	// at least 1m.
	AutoCompactionRetention time.Duration
	// QuotaBackendBytes caps the database file. At the cap etcd raises the
	// NOSPACE alarm and refuses writes (see the type's doc). Default 2 GiB;
	// between 64 MiB and 8 GiB.
	QuotaBackendBytes int64
	// DefragInterval is how often the member checks whether defragmenting
	// is worth it (see DefragMinFree). A defragmentation blocks the member's
	// reads and writes while it rewrites the file (seconds per GiB). Default
	// 1h; at least 1m.
	DefragInterval time.Duration
	// Clock drives the defragmentation check's ticker (DefragInterval).
	// StartTimeout bounds a real server's start and stays on the wall
	// clock, as raft's own timers do. Required: DefaultEmbedConfig sets
	// the wall clock, and the assembly hands the process's one clock.
	Clock clockwork.Clock
	// DefragMinFree is the free space inside the database file (size minus
	// size in use) from which a scheduled check defragments. Default
	// 128 MiB; not negative.
	DefragMinFree int64
	// HeartbeatInterval and ElectionTimeout are raft's timing. A member that
	// hears no heartbeat for ElectionTimeout starts an election; it must be at
	// least 5 heartbeats and should exceed the round trip between members
	// several times. Lease TTLs below about 1.5 ElectionTimeout are raised
	// to that. Defaults 100ms and 1s.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// ClientTLS secures the client URLs and PeerTLS the peer URLs, as
	// etcd's --cert-file, --key-file, --trusted-ca-file and
	// --client-cert-auth (and their --peer- forms) do. With a CertFile the
	// matching URLs must be https://; with ClientCertAuth a client (or
	// peer) needs a certificate signed by TrustedCAFile, which is how a
	// region's etcd admits only the region's components. Zero: plain http.
	ClientTLS EmbedTLS
	PeerTLS   EmbedTLS
	// BcryptCost is the cost of the hashes of etcd's user passwords
	// (etcd's --bcrypt-cost), once its authentication is on (`etcdctl auth
	// enable`). Each client's authentication checks one hash, which costs
	// 2^BcryptCost rounds of the member's CPU: about 60ms at the default
	// 10. A lower cost is cheaper to check and to guess. Default 10;
	// between 4 and 31. The cost applies to passwords set while it holds.
	BcryptCost int
	// StartTimeout bounds how long StartEmbed waits for the member to be
	// ready, which for a multi-member cluster means until a quorum of members
	// is up. Default 1m.
	StartTimeout time.Duration
	// Logger receives etcd's log records at LogLevel and above (default
	// warnings), and the launcher's own. Nil discards them; the assembly
	// hands the process's logger.
	Logger   *slog.Logger
	LogLevel slog.Level
}

// EmbedTLS is one of an embedded member's TLS settings (EmbedConfig's
// ClientTLS and PeerTLS), in etcd's terms. Files are PEM.
type EmbedTLS struct {
	// CertFile and KeyFile are the member's certificate and key; both or
	// neither.
	CertFile, KeyFile string
	// TrustedCAFile verifies the other side's certificates.
	TrustedCAFile string
	// ClientCertAuth requires a certificate from the other side, signed
	// by TrustedCAFile.
	ClientCertAuth bool
}

func (t EmbedTLS) enabled() bool { return t.CertFile != "" }

func (t EmbedTLS) scheme() string {
	if t.enabled() {
		return "https"
	}
	return "http"
}

func (t EmbedTLS) validate(name string) error {
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		return fmt.Errorf("meta: EmbedConfig.%s: CertFile and KeyFile go together", name)
	case t.ClientCertAuth && (t.TrustedCAFile == "" || !t.enabled()):
		return fmt.Errorf("meta: EmbedConfig.%s: ClientCertAuth needs CertFile, KeyFile and TrustedCAFile", name)
	}
	return nil
}

func (t EmbedTLS) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
}

// DefaultEmbedConfig returns a one-member, loopback, temporary-directory
// configuration with the defaults documented on EmbedConfig.
func DefaultEmbedConfig() EmbedConfig {
	return EmbedConfig{
		Name:                    "meridian",
		ListenClientURLs:        []string{"http://127.0.0.1:0"},
		ListenPeerURLs:          []string{"http://127.0.0.1:0"},
		InitialClusterState:     embed.ClusterStateFlagNew,
		InitialClusterToken:     "meridian-etcd",
		AutoCompactionRetention: time.Hour,
		QuotaBackendBytes:       2 << 30,
		DefragInterval:          time.Hour,
		DefragMinFree:           128 << 20,
		HeartbeatInterval:       100 * time.Millisecond,
		ElectionTimeout:         time.Second,
		BcryptCost:              bcrypt.DefaultCost,
		StartTimeout:            time.Minute,
		LogLevel:                slog.LevelWarn,
		Clock:                   clockwork.NewRealClock(),
	}
}

// Validate reports a field out of bounds or inconsistent with another.
func (c EmbedConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("meta: EmbedConfig."+format, args...)
	}
	if c.Name == "" || strings.ContainsAny(c.Name, "=,") {
		return bad("Name %q must be non-empty and hold no '=' or ','", c.Name)
	}
	if c.Clock == nil {
		return bad("Clock is required (DefaultEmbedConfig sets the wall clock)")
	}
	if err := c.ClientTLS.validate("ClientTLS"); err != nil {
		return err
	}
	if err := c.PeerTLS.validate("PeerTLS"); err != nil {
		return err
	}
	for _, f := range []struct {
		name     string
		urls     []string
		required bool
		port0    bool
		scheme   string
	}{
		{"ListenClientURLs", c.ListenClientURLs, true, true, c.ClientTLS.scheme()},
		{"AdvertiseClientURLs", c.AdvertiseClientURLs, false, false, c.ClientTLS.scheme()},
		{"ListenPeerURLs", c.ListenPeerURLs, true, c.InitialCluster == "", c.PeerTLS.scheme()},
		{"AdvertisePeerURLs", c.AdvertisePeerURLs, false, false, c.PeerTLS.scheme()},
		{"ListenMetricsURLs", c.ListenMetricsURLs, false, true, "http"},
	} {
		if f.required && len(f.urls) == 0 {
			return bad("%s must not be empty", f.name)
		}
		for _, s := range f.urls {
			u, err := url.Parse(s)
			// A metrics URL may be https:// when ClientTLS has the
			// certificate etcd serves it with.
			metricsTLS := f.name == "ListenMetricsURLs" && u != nil && u.Scheme == "https" && c.ClientTLS.enabled()
			if err != nil || (u.Scheme != f.scheme && !metricsTLS) || u.Port() == "" {
				return bad("%s: %q is not %s://host:port (https with a certificate, http without)", f.name, s, f.scheme)
			}
			if u.Port() == "0" && !f.port0 {
				return bad("%s: %q needs a real port (port 0 is only for listen URLs of a one-member cluster)", f.name, s)
			}
		}
	}
	switch {
	case c.InitialClusterState != embed.ClusterStateFlagNew && c.InitialClusterState != embed.ClusterStateFlagExisting:
		return bad("InitialClusterState must be %q or %q, got %q", embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting, c.InitialClusterState)
	case c.InitialCluster != "" && !strings.Contains(","+c.InitialCluster, ","+c.Name+"="):
		return bad("InitialCluster %q has no entry for this member's Name %q", c.InitialCluster, c.Name)
	case c.InitialClusterToken == "":
		return bad("InitialClusterToken must not be empty")
	case c.AutoCompactionRetention < time.Minute:
		return bad("AutoCompactionRetention must be at least 1m, got %v", c.AutoCompactionRetention)
	case c.QuotaBackendBytes < 64<<20 || c.QuotaBackendBytes > 8<<30:
		return bad("QuotaBackendBytes must be in [64 MiB, 8 GiB], got %d", c.QuotaBackendBytes)
	case c.DefragInterval < time.Minute:
		return bad("DefragInterval must be at least 1m, got %v", c.DefragInterval)
	case c.DefragMinFree < 0:
		return bad("DefragMinFree must not be negative, got %d", c.DefragMinFree)
	case c.HeartbeatInterval < 10*time.Millisecond:
		return bad("HeartbeatInterval must be at least 10ms, got %v", c.HeartbeatInterval)
	case c.ElectionTimeout < 5*c.HeartbeatInterval:
		return bad("ElectionTimeout (%v) must be at least 5 HeartbeatIntervals (%v)", c.ElectionTimeout, c.HeartbeatInterval)
	case c.BcryptCost < bcrypt.MinCost || c.BcryptCost > bcrypt.MaxCost:
		return bad("BcryptCost must be in [%d, %d], got %d", bcrypt.MinCost, bcrypt.MaxCost, c.BcryptCost)
	case c.StartTimeout <= 0:
		return bad("StartTimeout must be positive, got %v", c.StartTimeout)
	}
	return nil
}

// Embed is a running embedded etcd member. Its one goroutine, the
// defragmentation schedule, is stopped and waited for by Close.
type Embed struct {
	etcd      *embed.Etcd
	cfg       EmbedConfig
	log       *slog.Logger
	endpoints []string
	peerURLs  []string
	// metricsURLs are ListenMetricsURLs with their ports resolved.
	metricsURLs []string
	// removeDir is the temporary data directory Close removes, if any.
	removeDir string
	// noise lowers etcd's records that report no fault; its stopping flag is
	// set when the member is being closed, by Close or by a failed start.
	noise memberNoise

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// StartEmbed starts the member and waits until it serves (ReadyNotify), at
// most cfg.StartTimeout, or until ctx ends. Ports chosen for port-0 URLs can,
// rarely, be taken by another process between choice and bind; the start is
// then retried with fresh ports, up to three times.
func StartEmbed(ctx context.Context, cfg EmbedConfig) (*Embed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("etcd", cfg.Name)
	e := &Embed{cfg: cfg, log: log}
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "meridian-etcd-")
		if err != nil {
			return nil, fmt.Errorf("meta: embedded etcd data dir: %w", err)
		}
		cfg.DataDir, e.removeDir = dir, dir
	}
	var err error
	for attempt := 1; ; attempt++ {
		var picked bool
		e.etcd, e.metricsURLs, picked, err = startEtcd(cfg, &e.noise)
		if err == nil || !picked || attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		log.Warn("a chosen free port was taken; retrying with new ports", "err", err)
	}
	if err != nil {
		e.removeTemp()
		return nil, fmt.Errorf("meta: start embedded etcd %s: %w", cfg.Name, err)
	}

	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.etcd.Server.ReadyNotify():
	case err = <-e.etcd.Err():
		err = fmt.Errorf("meta: embedded etcd %s failed while starting: %w", cfg.Name, err)
	case <-timer.C:
		err = fmt.Errorf("meta: embedded etcd %s not ready after %v (for a multi-member cluster: "+
			"are a majority of the members in InitialCluster running and reachable?)", cfg.Name, cfg.StartTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		e.noise.stopping.Store(true)
		e.etcd.Close()
		e.removeTemp()
		return nil, err
	}
	for _, l := range e.etcd.Clients {
		e.endpoints = append(e.endpoints, cfg.ClientTLS.scheme()+"://"+l.Addr().String())
	}
	for _, p := range e.etcd.Peers {
		e.peerURLs = append(e.peerURLs, cfg.PeerTLS.scheme()+"://"+p.Addr().String())
	}
	var life context.Context
	life, e.stop = context.WithCancel(context.Background())
	e.wg.Add(1)
	go e.defragLoop(life)
	log.Info("embedded etcd ready", "clients", e.endpoints, "peers", e.peerURLs, "data_dir", cfg.DataDir)
	return e, nil
}

// startEtcd resolves port-0 URLs and starts the server, returning the
// metrics URLs as resolved. picked reports whether any port was chosen here
// (so that a bind failure may be retried). etcd's log records go through
// noise (see memberNoise).
func startEtcd(cfg EmbedConfig, noise *memberNoise) (_ *embed.Etcd, metricsURLs []string, picked bool, _ error) {
	lcurls, p1, err := resolveURLs(cfg.ListenClientURLs)
	if err != nil {
		return nil, nil, false, err
	}
	lpurls, p2, err := resolveURLs(cfg.ListenPeerURLs)
	if err != nil {
		return nil, nil, false, err
	}
	lmurls, p3, err := resolveURLs(cfg.ListenMetricsURLs)
	if err != nil {
		return nil, nil, false, err
	}
	picked = p1 || p2 || p3
	acurls, apurls := lcurls, lpurls
	if len(cfg.AdvertiseClientURLs) > 0 {
		if acurls, _, err = resolveURLs(cfg.AdvertiseClientURLs); err != nil {
			return nil, nil, picked, err
		}
	}
	if len(cfg.AdvertisePeerURLs) > 0 {
		if apurls, _, err = resolveURLs(cfg.AdvertisePeerURLs); err != nil {
			return nil, nil, picked, err
		}
	}
	for _, u := range lmurls {
		metricsURLs = append(metricsURLs, u.String())
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.ClientTLSInfo, ec.PeerTLSInfo = cfg.ClientTLS.info(), cfg.PeerTLS.info()
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = lcurls, acurls
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = lpurls, apurls
	ec.ListenMetricsUrls = lmurls
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	}
	ec.ClusterState = cfg.InitialClusterState
	ec.InitialClusterToken = cfg.InitialClusterToken
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = cfg.AutoCompactionRetention.String()
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.TickMs = uint(cfg.HeartbeatInterval / time.Millisecond)
	ec.ElectionMs = uint(cfg.ElectionTimeout / time.Millisecond)
	ec.BcryptCost = uint(cfg.BcryptCost)
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(quietMember(zapToSlog(cfg.Logger, cfg.LogLevel), noise))
	e, err := embed.StartEtcd(ec)
	return e, metricsURLs, picked, err
}

// resolveURLs parses urls, replacing each port 0 with a free port of its IP.
func resolveURLs(urls []string) (_ []url.URL, picked bool, _ error) {
	out := make([]url.URL, 0, len(urls))
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, false, err
		}
		if u.Port() == "0" {
			l, err := net.Listen("tcp", u.Host)
			if err != nil {
				return nil, false, fmt.Errorf("meta: find a free port for %s: %w", s, err)
			}
			u.Host = l.Addr().String()
			_ = l.Close()
			picked = true
		}
		out = append(out, *u)
	}
	return out, picked, nil
}

// MetricsURLs are the member's ListenMetricsURLs, with real ports.
func (e *Embed) MetricsURLs() []string { return append([]string(nil), e.metricsURLs...) }

// Endpoints are the member's client URLs, with real ports.
func (e *Embed) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// PeerURLs are the member's peer URLs, with real ports.
func (e *Embed) PeerURLs() []string { return append([]string(nil), e.peerURLs...) }

// Err delivers a fatal server error; the member has then stopped serving.
func (e *Embed) Err() <-chan error { return e.etcd.Err() }

// Stopped is closed when the server stops, by Close or on its own (for
// example after being removed from the cluster).
func (e *Embed) Stopped() <-chan struct{} { return e.etcd.Server.StopNotify() }

// Defragment defragments the member's database when at least
// cfg.DefragMinFree bytes of it are free, and reports whether it did. It is
// what the schedule runs; operators and tests may call it directly.
func (e *Embed) Defragment(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	be := e.etcd.Server.Backend()
	size, inUse := be.Size(), be.SizeInUse()
	if size-inUse < e.cfg.DefragMinFree {
		return false, nil
	}
	start := time.Now()
	if err := e.etcd.Server.Defragment(); err != nil {
		return false, fmt.Errorf("meta: defragment embedded etcd %s: %w", e.cfg.Name, err)
	}
	e.log.Info("defragmented etcd database", "size_before", size, "in_use", inUse,
		"size_after", be.Size(), "took", time.Since(start))
	return true, nil
}

func (e *Embed) defragLoop(ctx context.Context) {
	defer e.wg.Done()
	t := e.cfg.Clock.NewTicker(e.cfg.DefragInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.etcd.Server.StopNotify():
			return
		case <-t.Chan():
		}
		if _, err := e.Defragment(ctx); err != nil {
			e.log.Warn("scheduled defragmentation failed", "err", err)
		}
		for _, a := range e.etcd.Server.Alarms() {
			if a.Alarm == pb.AlarmType_NOSPACE {
				e.log.Error("etcd NOSPACE alarm is raised: writes are refused; free space, " +
					"compact, defragment and then run `etcdctl alarm disarm` (see meta.EmbedConfig)")
				break
			}
		}
	}
}

// Close stops the member, waits for it and for the defragmentation schedule,
// and removes a temporary data directory. It is safe to call more than once.
//
// etcd stops gracefully: it lets open client streams (watches, lease
// keep-alives) finish for up to 5s + 2×ElectionTimeout before cutting them,
// and a leader first hands leadership to another member. Those streams never
// end by themselves, so close the Stores of this process before the member.
//
// A clean Close logs no ERROR: etcd's reports that its listeners were closed
// go out at Debug (see memberNoise); any other error keeps its level.
func (e *Embed) Close() error {
	e.closeOnce.Do(func() {
		e.noise.stopping.Store(true)
		e.stop()
		e.wg.Wait()
		e.etcd.Close()
		e.closeErr = e.removeTemp()
	})
	return e.closeErr
}

func (e *Embed) removeTemp() error {
	if e.removeDir == "" {
		return nil
	}
	if err := os.RemoveAll(e.removeDir); err != nil {
		return fmt.Errorf("meta: remove embedded etcd data dir: %w", err)
	}
	return nil
}
