package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meridian-mq/meridian/testkit"
)

// The etcd tests share one embedded member, started on first use and closed
// by TestMain; every test writes under its own prefix. (The other packages'
// tests share one through metatest, which these cannot import: it imports
// this package.)
var shared struct {
	once sync.Once
	e    *Embed
	err  error
	// records counts the etcd log records that reached slog.
	records atomic.Int64
}

// countHandler counts the records it is given and writes none.
type countHandler struct {
	n     *atomic.Int64
	level slog.Level
}

func (h countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h countHandler) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h countHandler) WithGroup(string) slog.Handler                { return h }

// fastEmbedConfig makes raft quick on loopback, so that etcd's minimum lease
// TTL (1.5 election timeouts) is well under a second.
func fastEmbedConfig() EmbedConfig {
	cfg := DefaultEmbedConfig()
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.StartTimeout = 30 * time.Second
	cfg.Logger = nil
	return cfg
}

func sharedEtcd(t *testing.T) *Embed {
	t.Helper()
	shared.once.Do(func() {
		cfg := fastEmbedConfig()
		cfg.Logger = slog.New(countHandler{n: &shared.records, level: slog.LevelInfo})
		cfg.LogLevel = slog.LevelInfo
		shared.e, shared.err = StartEmbed(context.Background(), cfg)
		if shared.err == nil {
			testkit.AfterTests(shared.e.Close)
		}
	})
	if shared.err != nil {
		t.Fatalf("start embedded etcd: %v", shared.err)
	}
	return shared.e
}

func dialT(t *testing.T, endpoints []string) *Etcd {
	t.Helper()
	cfg := DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.ListPageSize = 2 // List must page correctly; the suite lists up to 4 keys
	s, err := Dial(ctxT(t), endpoints, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEtcdContract(t *testing.T) {
	e := sharedEtcd(t)
	runContract(t, harness{
		newStore: func(t *testing.T) Store { return dialT(t, e.Endpoints()) },
		ttl:      time.Second,
		elapse:   func(time.Duration) {},
		compact: func(t *testing.T, s Store, rev int64) {
			if _, err := s.(*Etcd).Client().Compact(ctxT(t), rev, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// Dial fails, within its timeout and with an actionable message, when no
// etcd answers.
func TestDialUnreachable(t *testing.T) {
	cfg := DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 300 * time.Millisecond
	start := time.Now()
	// Port 1 on loopback: nothing listens there.
	_, err := Dial(t.Context(), []string{"http://127.0.0.1:1"}, cfg)
	if err == nil || !strings.Contains(err.Error(), "quorum read") {
		t.Fatalf("Dial to nothing: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Dial took %v with a %v timeout", took, cfg.DialTimeout)
	}
}

// NewEtcd over a caller's client leaves that client open on Close.
func TestNewEtcdKeepsClient(t *testing.T) {
	e := sharedEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zapToSlog(nil, 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := NewEtcd(cli, DefaultEtcdConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctxT(t), "/test/newetcd", []byte("x"), NoLease); err != nil && !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctxT(t), "/test/newetcd"); err != nil {
		t.Fatalf("caller's client unusable after Store.Close: %v", err)
	}
}

// etcd's own log records reach the caller's slog handler at its level.
func TestEmbedLogsToSlog(t *testing.T) {
	sharedEtcd(t)
	if shared.records.Load() == 0 {
		t.Fatal("no etcd log record reached slog at info level")
	}
}

// A clean stop of a member, with a client connected and gone, logs no ERROR,
// with etcd logging at every level. The reports that the listeners closed are
// still there, at Debug: the fix demotes them and hides nothing else.
func TestEmbedCleanStopLogsNoError(t *testing.T) {
	var rec recorder
	cfg := fastEmbedConfig()
	cfg.Logger = slog.New(&rec)
	cfg.LogLevel = slog.LevelDebug
	e, err := StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, e.Endpoints())
	if _, err := s.Create(ctxT(t), "/test/cleanstop", []byte("v"), NoLease); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Close returns after etcd's serving goroutines have logged (embed.Etcd
	// waits for them), so every record of the stop is in rec now.
	if errs := rec.atLeast(slog.LevelError); len(errs) > 0 {
		t.Errorf("a clean stop logged at ERROR:\n%s", strings.Join(errs, "\n"))
	}
	demoted := 0
	for _, line := range rec.atLeast(slog.LevelDebug) {
		if strings.HasPrefix(line, "DEBUG setting up serving from embedded etcd failed.") {
			demoted++
		}
	}
	if demoted == 0 {
		t.Errorf("no demoted serving record: etcd no longer reports its closed listeners, or they were dropped")
	}
}

// ListenMetricsURLs serve etcd's /metrics and /health, without the client
// URLs' TLS: what etcd's Kubernetes probes use.
func TestEmbedServesMetricsURLs(t *testing.T) {
	cfg := fastEmbedConfig()
	cfg.ListenMetricsURLs = []string{"http://127.0.0.1:0"}
	e, err := StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	urls := e.MetricsURLs()
	if len(urls) != 1 || strings.HasSuffix(urls[0], ":0") {
		t.Fatalf("MetricsURLs %v, want one with its port resolved", urls)
	}
	// No keep-alive: an idle connection would outlive the test.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for path, want := range map[string]string{"/metrics": "etcd_server_has_leader", "/health": `"health":"true"`} {
		resp, err := client.Get(urls[0] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 with %q in:\n%.300s", path, resp.StatusCode, want, body)
		}
	}
}

// A member restarted on its own data renews its leases to a full TTL; the
// restarted process removes its previous run's lease with RevokeStale
// (DESIGN §3, "Leases after a crash").
func TestEmbedRestartRevokeStale(t *testing.T) {
	cfg := fastEmbedConfig()
	cfg.DataDir = t.TempDir()
	e, err := StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := dialT(t, e.Endpoints())
	// The first run's lease would outlive the test by far.
	l, err := s.Grant(context.WithoutCancel(t.Context()), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := RegionKey("r1", "bookies", "b1")
	mustCreate(t, s, key, "run 1", l.ID())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Same data, same ports (the member's peer URL is in its data).
	cfg.ListenClientURLs, cfg.ListenPeerURLs = e.Endpoints(), e.PeerURLs()
	e2, err := StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	s2 := dialT(t, e2.Endpoints())
	defer s2.Close()
	if kv := mustGet(t, s2, key); kv.Lease != l.ID() {
		t.Fatalf("after restart the key's lease is %x, want %x", kv.Lease, l.ID())
	}
	id, err := RevokeStale(ctxT(t), s2, key)
	if err != nil || id != l.ID() {
		t.Fatalf("RevokeStale = %x, %v", id, err)
	}
	if _, err := s2.Create(ctxT(t), key, []byte("run 2"), NoLease); err != nil {
		t.Fatalf("re-register after RevokeStale: %v", err)
	}
}

// Defragment gives back the space that deletes and compaction freed.
func TestEmbedDefragment(t *testing.T) {
	cfg := fastEmbedConfig()
	cfg.DefragMinFree = 1 << 20
	e, err := StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := dialT(t, e.Endpoints())
	defer s.Close()
	ctx := ctxT(t)
	if did, err := e.Defragment(ctx); err != nil || did {
		t.Fatalf("Defragment of a fresh database = %v, %v; want nothing to do", did, err)
	}
	val := make([]byte, 64<<10)
	for i := range 64 {
		mustCreate(t, s, Key("big", string(rune('a'+i%26)), string(rune('a'+i/26))), string(val), NoLease)
	}
	kvs, rev, err := s.List(ctx, "/big/")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if err := s.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Client().Compact(ctx, rev+int64(len(kvs)), clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	before := e.etcd.Server.Backend().Size()
	// The freed pages count as free only once the backend has committed and
	// no reader still holds them, so wait for Defragment to see them.
	testkit.WaitFor(t, "Defragment to find the deleted 4 MiB free (DefragMinFree is 1 MiB)", func() bool {
		e.etcd.Server.Backend().ForceCommit()
		did, err := e.Defragment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return did
	})
	if after := e.etcd.Server.Backend().Size(); after >= before {
		t.Fatalf("database size %d after defragmentation, %d before", after, before)
	}
}

func TestEmbedConfigValidate(t *testing.T) {
	if err := DefaultEmbedConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	secured := DefaultEmbedConfig()
	secured.ListenClientURLs, secured.ListenPeerURLs = []string{"https://127.0.0.1:0"}, []string{"https://127.0.0.1:0"}
	secured.ClientTLS = EmbedTLS{CertFile: "c.pem", KeyFile: "k.pem", TrustedCAFile: "ca.pem", ClientCertAuth: true}
	secured.PeerTLS = secured.ClientTLS
	if err := secured.Validate(); err != nil {
		t.Fatalf("a TLS config with client certificates invalid: %v", err)
	}
	for name, mutate := range map[string]func(*EmbedConfig){
		"empty name":    func(c *EmbedConfig) { c.Name = "" },
		"name with =":   func(c *EmbedConfig) { c.Name = "a=b" },
		"no client URL": func(c *EmbedConfig) { c.ListenClientURLs = nil },
		"https":         func(c *EmbedConfig) { c.ListenClientURLs = []string{"https://127.0.0.1:2379"} },
		"http with a certificate": func(c *EmbedConfig) {
			c.ClientTLS = EmbedTLS{CertFile: "c.pem", KeyFile: "k.pem"}
		},
		"certificate without key": func(c *EmbedConfig) {
			c.ListenClientURLs = []string{"https://127.0.0.1:0"}
			c.ClientTLS = EmbedTLS{CertFile: "c.pem"}
		},
		"client cert auth without a CA": func(c *EmbedConfig) {
			c.ListenClientURLs = []string{"https://127.0.0.1:0"}
			c.ClientTLS = EmbedTLS{CertFile: "c.pem", KeyFile: "k.pem", ClientCertAuth: true}
		},
		"peer https without a certificate": func(c *EmbedConfig) { c.ListenPeerURLs = []string{"https://127.0.0.1:0"} },
		"no port":                          func(c *EmbedConfig) { c.ListenClientURLs = []string{"http://127.0.0.1"} },
		"advertise port 0":                 func(c *EmbedConfig) { c.AdvertiseClientURLs = []string{"http://127.0.0.1:0"} },
		"cluster with peer 0":              func(c *EmbedConfig) { c.InitialCluster = "meridian=http://127.0.0.1:2380" },
		"cluster without member": func(c *EmbedConfig) {
			c.InitialCluster = "x=http://127.0.0.1:2380"
			c.ListenPeerURLs = []string{"http://127.0.0.1:2380"}
		},
		"bad state":            func(c *EmbedConfig) { c.InitialClusterState = "old" },
		"no compaction":        func(c *EmbedConfig) { c.AutoCompactionRetention = 0 },
		"tiny quota":           func(c *EmbedConfig) { c.QuotaBackendBytes = 1 << 20 },
		"huge quota":           func(c *EmbedConfig) { c.QuotaBackendBytes = 16 << 30 },
		"defrag too often":     func(c *EmbedConfig) { c.DefragInterval = time.Second },
		"negative defrag free": func(c *EmbedConfig) { c.DefragMinFree = -1 },
		"election too short":   func(c *EmbedConfig) { c.ElectionTimeout = 2 * c.HeartbeatInterval },
		"no start timeout":     func(c *EmbedConfig) { c.StartTimeout = 0 },
		"bcrypt cost too low":  func(c *EmbedConfig) { c.BcryptCost = 3 },
		"bcrypt cost too high": func(c *EmbedConfig) { c.BcryptCost = 32 },
		"no clock":             func(c *EmbedConfig) { c.Clock = nil },
		"metrics without port": func(c *EmbedConfig) { c.ListenMetricsURLs = []string{"http://0.0.0.0"} },
		"metrics https without a certificate": func(c *EmbedConfig) {
			c.ListenMetricsURLs = []string{"https://0.0.0.0:2381"}
		},
	} {
		c := DefaultEmbedConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := DefaultEmbedConfig()
	ok.Name = "m2"
	ok.ListenPeerURLs = []string{"http://127.0.0.1:2380"}
	ok.InitialCluster = "m1=http://127.0.0.1:2390,m2=http://127.0.0.1:2380"
	if err := ok.Validate(); err != nil {
		t.Errorf("three-member config rejected: %v", err)
	}
}

func TestEtcdConfigValidate(t *testing.T) {
	if err := DefaultEtcdConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*EtcdConfig){
		"dial timeout": func(c *EtcdConfig) { c.DialTimeout = time.Millisecond },
		"keepalive":    func(c *EtcdConfig) { c.KeepAliveTime = 0 },
		"page size":    func(c *EtcdConfig) { c.ListPageSize = 0 },
		// clientv3 would connect as no user without a word.
		"user without a password": func(c *EtcdConfig) { c.Username = "meridian" },
		"password without a user": func(c *EtcdConfig) { c.Password = "secret" },
	} {
		c := DefaultEtcdConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// When etcd goes away, a lease cannot be renewed: its Done, and the Done of a
// leadership held under it, close within about one TTL, so that the holder
// stops acting on what it can no longer be sure it holds.
func TestEtcdLeaseEndsWhenServerGone(t *testing.T) {
	e, err := StartEmbed(t.Context(), fastEmbedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := dialT(t, e.Endpoints())
	defer s.Close()
	l, err := s.Grant(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := s.Campaign(ctxT(t), "/test/gone", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	// Close waits a few seconds for this store's open streams, then cuts
	// them (see Embed.Close).
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "Lease.Done after the server stopped", l.Done())
	waitClosed(t, "Leadership.Done after the server stopped", ld.Done())
}

// A reader that falls further behind than WatchBacklog gets ErrCompacted
// instead of making the etcd client buffer without limit.
func TestEtcdSlowWatcherCompacted(t *testing.T) {
	e := sharedEtcd(t)
	cfg := DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.WatchBacklog = 4
	s, err := Dial(ctxT(t), e.Endpoints(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	p := fmt.Sprintf("/test/%d/slow/", runs.Add(1))
	ch := s.Watch(ctx, p, 0)
	// Many more writes than the backlog: the reader starts only after all are
	// committed, by which time etcd has pushed nearly all of them.
	const writes = 100
	for i := range writes {
		mustCreate(t, s, fmt.Sprintf("%s%03d", p, i), "x", NoLease)
	}
	var events int
	for r := range ch {
		if r.Err != nil {
			wantErr(t, "slow watcher", r.Err, ErrCompacted)
			if events >= writes {
				t.Fatalf("all %d events delivered before the backlog error", events)
			}
			return
		}
		events += len(r.Events)
		if events == writes {
			t.Fatalf("a reader %d responses behind got every event; the backlog is 4", writes)
		}
	}
	t.Fatal("watch closed without an error")
}
