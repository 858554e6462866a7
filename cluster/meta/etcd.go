package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// EtcdConfig configures the etcd-backed Store.
type EtcdConfig struct {
	// DialTimeout bounds how long Dial waits for the cluster to answer a
	// first (linearizable, so quorum-backed) read. Default 5s; at least
	// 100ms.
	DialTimeout time.Duration
	// KeepAliveTime is the gRPC keep-alive ping interval, which is how fast a
	// dead connection is noticed and the client moves to another endpoint.
	// Each ping costs one small frame per connection. Default 10s; at least
	// 1s.
	KeepAliveTime time.Duration
	// ListPageSize is how many keys List reads per request. Pages are read at
	// one revision, so a List stays a consistent snapshot; smaller pages
	// bound the memory of one response, larger ones save round trips.
	// Default 1000; between 1 and 100,000.
	ListPageSize int
	// WatchBacklog is how many responses (one per revision) a watch queues
	// for a reader that does not keep up. Past it the watch ends with
	// ErrCompacted and the reader re-lists. It bounds a watch's memory; too
	// small a value makes bursty writes restart watches. Default 4096;
	// between 1 and 1,000,000.
	WatchBacklog int
	// Username and Password authenticate to etcd (its RBAC, `etcdctl
	// user add`) when Username is set; Password is then required, since
	// the client would otherwise connect as no user without a word. An
	// error names the user, never the password.
	Username, Password string
	// TLS, when set, connects over TLS, which needs https:// endpoints
	// (Dial refuses an http:// one rather than drop the TLS without a
	// word): RootCAs verify the members' certificates, and Certificates
	// hold the client certificate of an etcd run with --client-cert-auth.
	// Nil: plain http, or the system's roots for https:// endpoints.
	TLS *tls.Config
	// Authority, when set, replaces each endpoint's host:port as the
	// authority of the connections (gRPC's :authority): over TLS it is
	// the name the members' certificates are verified against, for
	// members reached by an address their certificates do not name (an
	// IP, a load balancer). Pulsar's etcd client setting of that name.
	// Empty: each endpoint's own host.
	Authority string
	// Logger receives the etcd client's log records at LogLevel and above.
	// Nil discards them; the assembly hands the process's logger.
	Logger   *slog.Logger
	LogLevel slog.Level
}

// DefaultEtcdConfig returns the defaults documented on EtcdConfig, with
// the warning level but no logger.
func DefaultEtcdConfig() EtcdConfig {
	return EtcdConfig{
		DialTimeout:   5 * time.Second,
		KeepAliveTime: 10 * time.Second,
		ListPageSize:  1000,
		WatchBacklog:  4096,
		LogLevel:      slog.LevelWarn,
	}
}

// Validate reports a field out of bounds.
func (c EtcdConfig) Validate() error {
	switch {
	case c.DialTimeout < 100*time.Millisecond:
		return fmt.Errorf("meta: EtcdConfig.DialTimeout must be at least 100ms, got %v", c.DialTimeout)
	case c.KeepAliveTime < time.Second:
		return fmt.Errorf("meta: EtcdConfig.KeepAliveTime must be at least 1s, got %v", c.KeepAliveTime)
	case c.ListPageSize < 1 || c.ListPageSize > 100_000:
		return fmt.Errorf("meta: EtcdConfig.ListPageSize must be in [1, 100000], got %d", c.ListPageSize)
	case c.WatchBacklog < 1 || c.WatchBacklog > 1_000_000:
		return fmt.Errorf("meta: EtcdConfig.WatchBacklog must be in [1, 1000000], got %d", c.WatchBacklog)
	case c.Username != "" && c.Password == "":
		return fmt.Errorf("meta: EtcdConfig.Username %q needs a Password", c.Username)
	case c.Username == "" && c.Password != "":
		return errors.New("meta: EtcdConfig.Password needs a Username")
	}
	if err := checkAuthority(c.Authority); err != nil {
		return fmt.Errorf("meta: EtcdConfig.Authority: %w", err)
	}
	return nil
}

// checkAuthority refuses what cannot be a connection's authority: a URL,
// or text with blanks.
func checkAuthority(a string) error {
	if strings.ContainsAny(a, "/ \t\n") {
		return fmt.Errorf("want a host or host:port, as the members' certificates name them, got %q", a)
	}
	return nil
}

// probeKey is what a read that only wants the cluster's answer (or its
// revision) reads: a key inside Root + "/", the prefix that every key is
// under and that an etcd user with the least rights is granted (Root itself
// is outside that prefix, and etcd's authentication refuses it).
const probeKey = Root + "/"

// Etcd is the Store over an etcd cluster.
//
// Every conditional write is one etcd Txn: Create compares CreateRevision
// with 0, Update and Delete compare ModRevision with the caller's. Leases
// are renewed by the client's KeepAlive; a Lease's Done closes when the
// keep-alive stream ends for any reason (revoked, expired, renewal impossible
// before the TTL ran out, Grant's context done, store closed).
//
// Goroutines: one per watch (translating etcd's responses into a bounded
// backlog, see WatchBacklog), one per lease (draining its keep-alive
// channel) and one per leadership. The store owns them all: Close stops them
// and waits for them before it closes the client (only a client it dialled
// itself).
type Etcd struct {
	cli          *clientv3.Client
	ownsCli      bool
	pageSize     int
	watchBacklog int

	life   context.Context
	cancel context.CancelFunc
	// wg counts the store's goroutines; Add is only called under mu while
	// mu.closed is false.
	wg sync.WaitGroup

	mu struct {
		sync.Mutex
		closed bool
		// leases are the live leases this store keeps alive, so that Revoke
		// by id ends their Done at once.
		leases map[LeaseID]*etcdLease
	}
}

var _ Store = (*Etcd)(nil)

// Dial connects to the etcd cluster at endpoints and checks that it answers a
// quorum read within cfg.DialTimeout (or ctx's deadline, if sooner). The
// store owns the client and closes it on Close.
func Dial(ctx context.Context, endpoints []string, cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(endpoints) == 0 {
		return nil, errors.New("meta: Dial needs at least one etcd endpoint")
	}
	if cfg.TLS != nil {
		for _, ep := range endpoints {
			// The etcd client speaks plain http to an http:// endpoint
			// whatever its TLS configuration says.
			if host, ok := strings.CutPrefix(ep, "http://"); ok {
				return nil, fmt.Errorf("meta: etcd endpoint %s is plain http, but the client has TLS settings (a CA or a client certificate): write https://%s", ep, host)
			}
		}
	}
	var dialOpts []grpc.DialOption
	if cfg.Authority != "" {
		dialOpts = append(dialOpts, grpc.WithAuthority(cfg.Authority))
	}
	// who names the etcd in errors: its endpoints and, with RBAC, the user.
	who := fmt.Sprint(endpoints)
	if cfg.Username != "" {
		who += fmt.Sprintf(" as user %q", cfg.Username)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    cfg.KeepAliveTime,
		DialKeepAliveTimeout: cfg.KeepAliveTime,
		Username:             cfg.Username,
		Password:             cfg.Password,
		TLS:                  cfg.TLS,
		DialOptions:          dialOpts,
		Logger:               zapToSlog(cfg.Logger, cfg.LogLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("meta: etcd client for %s: %w", who, err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, probeKey, clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if refusedByAuth(err) {
			return nil, fmt.Errorf("meta: etcd at %s refused the client: %w (its authentication is on: "+
				"give a user whose roles grant read and write on %s, and its password, or a client certificate of one)", who, err, probeKey)
		}
		if reason := tlsHandshake(ctx, endpoints[0], cfg); reason != nil {
			return nil, fmt.Errorf("meta: etcd at %s did not answer a quorum read within %v: %w (a TLS handshake with %s fails: %v)",
				who, cfg.DialTimeout, err, endpoints[0], reason)
		}
		return nil, fmt.Errorf("meta: etcd at %s did not answer a quorum read within %v "+
			"(is the cluster up, with a majority of its members?): %w", who, cfg.DialTimeout, err)
	}
	s, err := NewEtcd(cli, cfg)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	s.ownsCli = true
	return s, nil
}

// tlsHandshake is why a TLS handshake with endpoint, as the etcd client
// makes it with cfg, fails, or nil when it succeeds, when the endpoint
// takes no TCP connection, or when it is not https://. The etcd client only retries a handshake that fails (a CA
// that does not sign the member's certificate, a name it does not carry)
// until Dial's timeout, so a Dial that timed out says why with this one.
func tlsHandshake(ctx context.Context, endpoint string, cfg EtcdConfig) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" {
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLS != nil {
		c = cfg.TLS.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = u.Hostname()
		if cfg.Authority != "" {
			c.ServerName = cfg.Authority
			if host, _, err := net.SplitHostPort(cfg.Authority); err == nil {
				c.ServerName = host
			}
		}
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(hctx, "tcp", u.Host)
	if err != nil {
		return nil // not TLS's doing: the member is down or out of reach
	}
	conn := tls.Client(raw, c)
	defer conn.Close()
	return conn.HandshakeContext(hctx)
}

// refusedByAuth reports whether err is etcd's authentication refusing a
// request: it answered, so the cluster is up, and waiting will not help.
func refusedByAuth(err error) bool {
	for _, refusal := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken} {
		if errors.Is(err, refusal) {
			return true
		}
	}
	return false
}

// NewEtcd wraps a client the caller already has. Close leaves the client
// open; of cfg, only ListPageSize and WatchBacklog are used.
func NewEtcd(cli *clientv3.Client, cfg EtcdConfig) (*Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Etcd{cli: cli, pageSize: cfg.ListPageSize, watchBacklog: cfg.WatchBacklog}
	s.life, s.cancel = context.WithCancel(context.Background())
	s.mu.leases = make(map[LeaseID]*etcdLease)
	return s, nil
}

// Client is the underlying etcd client, for maintenance (compaction,
// defragmentation, alarms) that the Store interface leaves out.
func (s *Etcd) Client() *clientv3.Client { return s.cli }

func (s *Etcd) closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}

// fail maps an etcd error to the package's errors: ErrClosed once the store
// is closed, ErrLeaseNotFound and ErrCompacted for etcd's own.
func (s *Etcd) fail(op, key string, err error) error {
	switch {
	case s.closed():
		return ErrClosed
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("meta: %s %s: %w", op, key, ErrLeaseNotFound)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("meta: %s %s: %w", op, key, ErrCompacted)
	}
	return fmt.Errorf("meta: %s %s: %w", op, key, err)
}

// Get implements Store.
func (s *Etcd) Get(ctx context.Context, key string) (KV, error) {
	if s.closed() {
		return KV{}, ErrClosed
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return KV{}, s.fail("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fromEtcd(resp.Kvs[0]), nil
}

// List implements Store. It reads in pages of ListPageSize keys, all at the
// revision of the first page, so the result is one consistent snapshot. A
// compaction past that revision between pages (only possible for a listing
// that outlasts the compaction retention) fails with ErrCompacted.
func (s *Etcd) List(ctx context.Context, prefix string) ([]KV, int64, error) {
	if s.closed() {
		return nil, 0, ErrClosed
	}
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	if prefix == "" {
		from = "\x00" // etcd's "whole key space"
	}
	var out []KV
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.pageSize))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, s.fail("list", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out = append(out, fromEtcd(kv))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Create implements Store.
func (s *Etcd) Create(ctx context.Context, key string, value []byte, lease LeaseID) (int64, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(clientv3.LeaseID(lease)))).
		Commit()
	if err != nil {
		return 0, s.fail("create", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s", ErrExists, key)
	}
	return resp.Header.Revision, nil
}

// Update implements Store.
func (s *Etcd) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	return s.putIf(ctx, key, value, clientv3.WithIgnoreLease(), revisionAt{key, modRev})
}

// UpdateGuarded implements Store: one Txn with both compares.
func (s *Etcd) UpdateGuarded(ctx context.Context, key string, value []byte, modRev int64, guardKey string, guardRev int64) (int64, error) {
	return s.putIf(ctx, key, value, clientv3.WithIgnoreLease(), revisionAt{key, modRev}, revisionAt{guardKey, guardRev})
}

// UpdateIfNone implements Store: one Txn comparing key's ModRevision and
// the CreateRevision of every key under prefix with 0, which etcd reads as
// true for an empty range and false as soon as one key is there.
func (s *Etcd) UpdateIfNone(ctx context.Context, key string, value []byte, modRev int64, prefix string) (int64, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	cond := revisionAt{key, modRev}
	if modRev <= 0 {
		return 0, conflict([]revisionAt{cond})
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
			clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(key, string(value), clientv3.WithIgnoreLease())).
		Commit()
	if err != nil {
		return 0, s.fail("update", key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s at revision %d with no key under %s", ErrConflict, key, modRev, prefix)
	}
	return resp.Header.Revision, nil
}

// putIf puts value at key, with lease (WithIgnoreLease: keeping the key's
// own), if every key of conds is at its ModRevision; conds[0] is key itself.
func (s *Etcd) putIf(ctx context.Context, key string, value []byte, lease clientv3.OpOption, conds ...revisionAt) (int64, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	cmps := make([]clientv3.Cmp, len(conds))
	for i, c := range conds {
		if c.rev <= 0 {
			// ModRevision 0 would match an absent key (and, for the key
			// written, create it: a blind put).
			return 0, conflict(conds)
		}
		cmps[i] = clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev)
	}
	resp, err := s.cli.Txn(ctx).
		If(cmps...).
		Then(clientv3.OpPut(key, string(value), lease)).
		Commit()
	if err != nil {
		return 0, s.fail("update", key, err)
	}
	if !resp.Succeeded {
		return 0, conflict(conds)
	}
	return resp.Header.Revision, nil
}

// MoveToLease implements Store: one Txn comparing the key's ModRevision
// and putting it under the new lease. etcd refuses a put on a lease it does
// not know with ErrLeaseNotFound, failing the whole Txn.
func (s *Etcd) MoveToLease(ctx context.Context, key string, value []byte, modRev int64, lease LeaseID) (int64, error) {
	return s.putIf(ctx, key, value, clientv3.WithLease(clientv3.LeaseID(lease)), revisionAt{key, modRev})
}

// Delete implements Store.
func (s *Etcd) Delete(ctx context.Context, key string, modRev int64) error {
	if s.closed() {
		return ErrClosed
	}
	if modRev <= 0 {
		return fmt.Errorf("%w: %s at revision %d", ErrConflict, key, modRev)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return s.fail("delete", key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s at revision %d", ErrConflict, key, modRev)
	}
	return nil
}

// Watch implements Store. "From now" (fromRev 0) is resolved before Watch
// returns, with one read of the current revision, so that no change made
// after the call can be missed. The watch requires a leader: a member cut off
// from its quorum ends the watch with an error rather than going quiet, and
// the watcher re-lists through a member that can answer.
func (s *Etcd) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	out := make(chan WatchResponse, 1)
	fail := func(err error) <-chan WatchResponse {
		out <- WatchResponse{Err: err}
		close(out)
		return out
	}
	if s.closed() {
		return fail(ErrClosed)
	}
	if fromRev <= 0 {
		resp, err := s.cli.Get(ctx, probeKey, clientv3.WithCountOnly())
		if err != nil {
			return fail(s.fail("watch", prefix, err))
		}
		fromRev = resp.Header.Revision + 1
	}
	if !s.spawn(func(life context.Context) { s.watch(ctx, life, prefix, fromRev, out) }) {
		return fail(ErrClosed)
	}
	return out
}

func (s *Etcd) watch(ctx, life context.Context, prefix string, fromRev int64, out chan<- WatchResponse) {
	defer close(out)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	defer context.AfterFunc(life, cancel)()

	opts := []clientv3.OpOption{clientv3.WithRev(fromRev)}
	key := prefix
	if prefix == "" {
		key = "\x00"
		opts = append(opts, clientv3.WithFromKey())
	} else {
		opts = append(opts, clientv3.WithPrefix())
	}
	in := s.cli.Watch(wctx, key, opts...)

	// The loop keeps draining etcd's channel into queue while the reader is
	// slow, because the etcd client would otherwise buffer without limit.
	// Past watchBacklog queued responses the watch ends with ErrCompacted,
	// as the in-memory store's does when its history moves past a reader:
	// the reader re-lists, which costs one List instead of unbounded memory.
	var queue []WatchResponse
	var final *WatchResponse // the last response to deliver once queue drains
	for in != nil || len(queue) > 0 {
		var outc chan<- WatchResponse
		var head WatchResponse
		if len(queue) > 0 {
			outc, head = out, queue[0]
		}
		select {
		case outc <- head:
			queue[0] = WatchResponse{}
			queue = queue[1:]
		case <-ctx.Done():
			return
		case <-life.Done():
			// Close must not wait for a reader that has gone.
			select {
			case out <- WatchResponse{Err: ErrClosed}:
			default:
			}
			return
		case resp, ok := <-in:
			switch {
			case !ok:
				in = nil
				final = s.watchEnded(ctx, prefix)
			case resp.CompactRevision != 0:
				in, final = nil, &WatchResponse{Err: fmt.Errorf("%w: watch %s from revision %d, compacted at %d",
					ErrCompacted, prefix, fromRev, resp.CompactRevision)}
			case resp.Err() != nil:
				in, final = nil, &WatchResponse{Err: s.fail("watch", prefix, resp.Err())}
			default:
				queue = appendByRevision(queue, resp.Events)
				if len(queue) > s.watchBacklog {
					queue, in = nil, nil
					final = &WatchResponse{Err: fmt.Errorf("%w: watch %s: reader fell more than %d responses behind",
						ErrCompacted, prefix, s.watchBacklog)}
				}
			}
			if in == nil {
				cancel() // stop etcd's stream; the queue still drains
			}
		}
	}
	if final != nil {
		if errors.Is(final.Err, ErrClosed) {
			// Close must not wait for a reader that has gone.
			select {
			case out <- *final:
			default:
			}
			return
		}
		select {
		case out <- *final:
		case <-ctx.Done():
		case <-life.Done():
		}
	}
}

// watchEnded says why etcd's watch channel closed without an error response:
// the caller's ctx (nothing more to say), the store's Close, or the client.
func (s *Etcd) watchEnded(ctx context.Context, prefix string) *WatchResponse {
	switch {
	case ctx.Err() != nil:
		return nil
	case s.closed():
		return &WatchResponse{Err: ErrClosed}
	default:
		return &WatchResponse{Err: fmt.Errorf("meta: watch %s: stream ended by the etcd client", prefix)}
	}
}

// appendByRevision appends etcd's events to queue, one response per revision:
// etcd may batch several revisions in one response, the Store contract has
// one revision per response.
func appendByRevision(queue []WatchResponse, evs []*clientv3.Event) []WatchResponse {
	for len(evs) > 0 {
		rev := evs[0].Kv.ModRevision
		n := 1
		for n < len(evs) && evs[n].Kv.ModRevision == rev {
			n++
		}
		r := WatchResponse{Revision: rev, Events: make([]Event, 0, n)}
		for _, ev := range evs[:n] {
			e := Event{Type: EventPut, KV: fromEtcd(ev.Kv)}
			if ev.Type == mvccpb.DELETE {
				e = Event{Type: EventDelete, KV: KV{Key: string(ev.Kv.Key), ModRevision: rev}}
			}
			r.Events = append(r.Events, e)
		}
		queue = append(queue, r)
		evs = evs[n:]
	}
	return queue
}

// etcdLease is a lease kept alive by the store. Its goroutine drains the
// keep-alive channel (clientv3 requires it) and closes done when the channel
// closes.
type etcdLease struct {
	s        *Etcd
	id       LeaseID
	stop     context.CancelFunc // ends the keep-alive
	done     chan struct{}
	doneOnce sync.Once
}

func (l *etcdLease) ID() LeaseID                      { return l.id }
func (l *etcdLease) Done() <-chan struct{}            { return l.done }
func (l *etcdLease) Revoke(ctx context.Context) error { return l.s.Revoke(ctx, l.id) }
func (l *etcdLease) end()                             { l.stop(); l.doneOnce.Do(func() { close(l.done) }) }

// Grant implements Store. etcd counts TTLs in whole seconds, so ttl is
// rounded up, and the server raises it to its own minimum (about 1.5 times
// the election timeout) if it is lower.
func (s *Etcd) Grant(ctx context.Context, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("meta: lease TTL must be positive, got %v", ttl)
	}
	if s.closed() {
		return nil, ErrClosed
	}
	resp, err := s.cli.Grant(ctx, int64(math.Ceil(ttl.Seconds())))
	if err != nil {
		return nil, s.fail("grant", fmt.Sprint(ttl), err)
	}
	id := LeaseID(resp.ID)
	kctx, stop := context.WithCancel(ctx)
	ka, err := s.cli.KeepAlive(kctx, resp.ID)
	if err != nil {
		stop()
		return nil, s.fail("keep alive lease", fmt.Sprintf("%x", int64(id)), err)
	}
	l := &etcdLease{s: s, id: id, stop: stop, done: make(chan struct{})}
	s.mu.Lock()
	s.mu.leases[id] = l
	s.mu.Unlock()
	ok := s.spawn(func(life context.Context) {
		defer l.end()
		defer func() {
			s.mu.Lock()
			delete(s.mu.leases, id)
			s.mu.Unlock()
		}()
		for {
			select {
			case _, open := <-ka:
				if !open {
					return
				}
			case <-life.Done():
				return
			}
		}
	})
	if !ok {
		l.end()
		return nil, ErrClosed
	}
	return l, nil
}

// TimeToLive implements Store. etcd counts whole seconds: a lease it says
// has TTL seconds left ends within TTL+1 seconds, which is what remaining
// reports.
func (s *Etcd) TimeToLive(ctx context.Context, id LeaseID) (remaining, granted time.Duration, err error) {
	if s.closed() {
		return 0, 0, ErrClosed
	}
	hex := fmt.Sprintf("%x", int64(id))
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, 0, s.fail("lease time to live", hex, err)
	}
	if resp.TTL < 0 { // etcd's answer for a lease it does not hold
		return 0, 0, fmt.Errorf("meta: lease time to live %s: %w", hex, ErrLeaseNotFound)
	}
	return time.Duration(resp.TTL+1) * time.Second, time.Duration(resp.GrantedTTL) * time.Second, nil
}

// Revoke implements Store.
func (s *Etcd) Revoke(ctx context.Context, id LeaseID) error {
	if s.closed() {
		return ErrClosed
	}
	_, err := s.cli.Revoke(ctx, clientv3.LeaseID(id))
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return s.fail("revoke lease", fmt.Sprintf("%x", int64(id)), err)
	}
	s.mu.Lock()
	l := s.mu.leases[id]
	s.mu.Unlock()
	if l != nil {
		l.end()
	}
	return nil
}

// Campaign implements Store.
func (s *Etcd) Campaign(ctx context.Context, prefix string, value []byte, lease Lease) (Leadership, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	return campaign(ctx, s, s.spawn, prefix, value, lease)
}

// spawn runs f in a goroutine the store owns, with a context that Close
// cancels; it reports false, running nothing, once the store is closed.
func (s *Etcd) spawn(f func(life context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.life)
	}()
	return true
}

// Close implements Store. Keep-alives stop, so every lease's Done closes;
// the leases themselves lapse on the server one TTL later.
func (s *Etcd) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	leases := make([]*etcdLease, 0, len(s.mu.leases))
	for _, l := range s.mu.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	for _, l := range leases {
		l.end()
	}
	if s.ownsCli {
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("meta: close etcd client: %w", err)
		}
	}
	return nil
}

func fromEtcd(kv *mvccpb.KeyValue) KV {
	return KV{
		Key:            string(kv.Key),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Lease:          LeaseID(kv.Lease),
	}
}
