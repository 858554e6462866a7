package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/telemetry"
	"github.com/meridian-mq/meridian/topology"
)

// ServiceConfig configures the topic service of one broker.
type ServiceConfig struct {
	// Region is the region (Pulsar cluster) the broker serves in.
	Region string
	// BrokerID names the broker within its region, stably across restarts
	// (its advertised host:port): a broker restarted with the same id
	// revokes the lease of its previous run before serving.
	BrokerID string
	// ServiceURL, ServiceURLTLS, WebURL and WebURLTLS are where clients
	// reach this broker; they are written into its registration, ownership
	// records and lookup answers, and the region's cluster record while the
	// region maintains it (clusterrecord.go).
	ServiceURL    string
	ServiceURLTLS string
	WebURL        string
	WebURLTLS     string
	// Listeners are the broker's advertised listeners by name (Pulsar's
	// advertisedListeners), the internal one, whose URLs ServiceURL and
	// ServiceURLTLS are, included. They go into its registration and
	// ownership records, so that whichever broker a client asks answers
	// with the owner's URLs of the listener the client names. Empty, the
	// default, the broker has no listener names and every lookup that
	// names one fails.
	Listeners map[string]loadmgr.Listener
	// OwnershipTTL is the lease under which the broker holds its bundles.
	// When the broker dies, its topics can be served elsewhere after at
	// most this long; shorter means faster takeover but more keep-alive
	// traffic and more spurious unloads when etcd is slow. Default 4s,
	// within DESIGN §8's 5 s takeover target; at least 1s.
	OwnershipTTL time.Duration
	// Lookup bounds a lookup's metadata calls and its probe of an owner
	// that may be dead (fast failover).
	Lookup loadmgr.LookupConfig
	// Policies are the broker-level policy defaults (Pulsar's broker.conf).
	Policies global.BrokerDefaults
	// Dispatch bounds consumer dispatch.
	Dispatch DispatchConfig
	// DedupSnapshotInterval is how many entries a topic appends between two
	// snapshots of its deduplication state (Pulsar's
	// brokerDeduplicationEntriesInterval, 1000): the most a reload replays.
	// At least 1.
	DedupSnapshotInterval int
	// DedupSnapshotTime is the longest a topic's deduplication state waits
	// for a snapshot once an entry is stored, when fewer than
	// DedupSnapshotInterval follow it (Pulsar's
	// brokerDeduplicationSnapshotIntervalSeconds, 120s; a topic's
	// deduplicationSnapshotInterval overrides it). The snapshot cursor holds
	// the topic's ledgers back from retention until a snapshot moves it. 0
	// snapshots by entries only.
	DedupSnapshotTime time.Duration
	// DedupSnapshotCheckInterval is how often loaded topics are checked
	// for such a snapshot (Pulsar's
	// brokerDeduplicationSnapshotFrequencyInSeconds, 120s). At least 1s.
	DedupSnapshotCheckInterval time.Duration
	// TopicLoadTimeout bounds loading a topic (fencing and recovering its
	// ledger). Default 30s (Pulsar's topicLoadTimeoutSeconds 60 is longer
	// than the client's 30s operation timeout; a load that outlives the
	// client's wait serves no one). It includes the wait for a load slot
	// (MaxConcurrentTopicLoads), as Pulsar's does.
	TopicLoadTimeout time.Duration
	// MaxConcurrentTopicLoads bounds the topics that load at once (Pulsar's
	// maxConcurrentTopicLoadRequest, 5000), and with them the metadata and
	// bookie requests of loads. A load past it waits for a slot, in
	// arrival order, and the PRODUCER and SUBSCRIBE requests for its topic
	// wait with it, their replies held (DESIGN §5). At least 1.
	MaxConcurrentTopicLoads int
	// MaxConcurrentLookups bounds the lookups the broker answers at once,
	// over the binary protocol (LOOKUP and PARTITIONED_METADATA, on every
	// connection) and HTTP (/lookup/v2 and the partitioned metadata an
	// HTTP client asks for before it produces): one bound shared by both
	// (Pulsar's maxConcurrentLookupRequest, 50000). One past it is
	// answered at once with TooManyRequests (HTTP 429), which the client
	// returns to its caller (and retries, for a producer or consumer it is
	// creating) without closing its connection. At least 1.
	MaxConcurrentLookups int
	// BacklogQuotaCheckInterval is how often loaded topics are checked
	// against their backlog quota (Pulsar's
	// backlogQuotaCheckIntervalInSeconds, 60s). At least 1s.
	BacklogQuotaCheckInterval time.Duration
	// MessageExpiryCheckInterval is how often the subscriptions of loaded
	// topics with a message TTL expire what is older than it (Pulsar's
	// messageExpiryCheckIntervalInMinutes, 5m; see expiry.go). At least 1s.
	MessageExpiryCheckInterval time.Duration
	// SubscriptionExpiryCheckInterval is how often durable subscriptions
	// that have gone without a consumer for longer than their namespace's
	// subscriptionExpirationTime are deleted (Pulsar's
	// subscriptionExpiryCheckIntervalInMinutes, 5m; see expiry.go). At
	// least 1s.
	SubscriptionExpiryCheckInterval time.Duration
	// ReplicationStartAt is where the replication cursor of a region added
	// to the clusters of a topic that already exists starts (Pulsar's
	// replicationStartAt, PIP-356): ReplicationStartLatest (the default)
	// replicates only what is published from then on, ReplicationStartEarliest
	// everything the topic still stores. A topic created by its load always
	// replicates from its first entry, whatever this says.
	ReplicationStartAt ReplicationStart
	// ReplicatedSubscriptions configures how replicated subscriptions'
	// states travel between regions (replsubs.go).
	ReplicatedSubscriptions ReplicatedSubscriptionsConfig
	// Failover configures automatic region failover (failover.go).
	Failover FailoverConfig
	// Tracing, when set, traces every entry whose metadata carries a W3C
	// traceparent (see trace.go); nil traces nothing and costs nothing.
	Tracing *telemetry.Tracing
	// Metrics says whether the broker records its metrics and how it
	// exposes its topics' (see PulsarCollector).
	Metrics telemetry.MetricsConfig
	// Registerer receives the broker's meridian_* metrics; nil registers
	// them nowhere. The Pulsar series are served by NewPulsarCollector,
	// which the caller registers.
	Registerer prometheus.Registerer
	// CloseTimeout bounds closing one topic (an admin unload, or the topic
	// lost to another owner) and one reader's subscription, whatever its
	// consumers do: its producers and consumers are told to go, its
	// dispatchers stopped and its managed ledger closed within it. Loss of
	// ownership closes every topic at once within one CloseTimeout; the
	// broker's shutdown is bounded by the context given to Close. Default
	// 5s; at least 100ms.
	CloseTimeout time.Duration
	// Clock is the Service's time: when delayed messages fall due, the
	// quota and expiry loops, the fence and replication-policy resyncs,
	// the waits of a producer or consumer moving to another region, and
	// the load manager's (LoadBalance) reports, shedding and hand-off
	// retries. Latency metrics and bounds on a store request stay on the
	// wall clock. Required: DefaultServiceConfig sets the wall clock, the
	// assembly hands the region's one clock, and tests inject a fake one.
	Clock clockwork.Clock
	// LoadBalance configures load reports, shedding and bundle split
	// (loadmgr.BalanceConfig).
	LoadBalance loadmgr.BalanceConfig
}

// DispatchConfig bounds what a subscription reads and holds.
type DispatchConfig struct {
	// MaxReadEntries is the most entries one dispatch round reads (Pulsar's
	// dispatcherMaxReadBatchSize, 100). 1..10000.
	MaxReadEntries int
	// MaxRedeliveries bounds the entries a subscription holds for
	// redelivery (nacked, or left by a departed consumer) before it stops
	// reading new ones. 1..1<<20.
	MaxRedeliveries int
	// MaxUnackedPerConsumer stops delivering to a Shared or Key_Shared
	// consumer holding this many unacked messages (Pulsar's
	// maxUnackedMessagesPerConsumer, 50000). At least 1.
	MaxUnackedPerConsumer int
	// MaxUnackedPerSubscription stops a Shared or Key_Shared subscription's
	// dispatch once its consumers hold this many unacked messages together,
	// until acks bring them down to half (Pulsar's
	// maxUnackedMessagesPerSubscription, 200000, and its dispatcher's
	// blockedDispatcherOnUnackedMsgs). A topic's
	// maxUnackedMessagesOnSubscription overrides it; 0 is no limit.
	MaxUnackedPerSubscription int
	// ReadRetryInitial is how long a subscription waits before it retries
	// a storage read that failed (a bookie that timed out, ledger metadata
	// that could not be read); each failure in a row doubles the wait, up
	// to ReadRetryMax, and a read that succeeds starts again from here
	// (Pulsar's dispatcherReadFailureBackoffInitialTimeInMs and
	// dispatcherReadFailureBackoffMaxTimeInMs). Without the retry, a
	// subscription of an idle topic whose read failed waited for the next
	// publish, and its consumers got nothing meanwhile. Shorter retries
	// sooner and asks more of a bookie in trouble. Default 1s (Pulsar's
	// is 15s); 1ms..ReadRetryMax.
	ReadRetryInitial time.Duration
	// ReadRetryMax is the longest wait between two retries of a failed
	// read. Default 60s, as Pulsar's; at most 10 minutes.
	ReadRetryMax time.Duration
}

// DefaultDispatchConfig returns the dispatch defaults.
func DefaultDispatchConfig() DispatchConfig {
	return DispatchConfig{MaxReadEntries: 100, MaxRedeliveries: 100_000, MaxUnackedPerConsumer: 50_000,
		MaxUnackedPerSubscription: 200_000, ReadRetryInitial: time.Second, ReadRetryMax: time.Minute}
}

// DefaultServiceConfig returns the defaults for a broker of region.
func DefaultServiceConfig(region, brokerID, serviceURL string) ServiceConfig {
	return ServiceConfig{
		Region:                  region,
		BrokerID:                brokerID,
		ServiceURL:              serviceURL,
		OwnershipTTL:            4 * time.Second,
		Lookup:                  loadmgr.DefaultLookupConfig(),
		Policies:                global.DefaultBrokerDefaults(),
		Dispatch:                DefaultDispatchConfig(),
		DedupSnapshotInterval:   1000,
		DedupSnapshotTime:       2 * time.Minute,
		ReplicatedSubscriptions: DefaultReplicatedSubscriptionsConfig(),
		Failover:                DefaultFailoverConfig(),
		TopicLoadTimeout:        30 * time.Second,

		MaxConcurrentTopicLoads: 5000,
		MaxConcurrentLookups:    50_000,

		BacklogQuotaCheckInterval:       time.Minute,
		DedupSnapshotCheckInterval:      2 * time.Minute,
		MessageExpiryCheckInterval:      5 * time.Minute,
		SubscriptionExpiryCheckInterval: 5 * time.Minute,
		ReplicationStartAt:              ReplicationStartLatest,
		CloseTimeout:                    5 * time.Second,
		LoadBalance:                     loadmgr.DefaultBalanceConfig(),
		Clock:                           clockwork.NewRealClock(),
	}
}

// Validate checks every field against its bounds.
func (c ServiceConfig) Validate() error {
	switch {
	case c.Region == "" || c.BrokerID == "" || c.ServiceURL == "":
		return fmt.Errorf("%w: Region, BrokerID and ServiceURL are required", ErrInvalidConfig)
	case c.Clock == nil:
		return fmt.Errorf("%w: Clock is required (DefaultServiceConfig sets the wall clock)", ErrInvalidConfig)
	case c.Dispatch.MaxReadEntries < 1 || c.Dispatch.MaxReadEntries > 10000:
		return fmt.Errorf("%w: Dispatch.MaxReadEntries %d, want 1..10000", ErrInvalidConfig, c.Dispatch.MaxReadEntries)
	case c.Dispatch.MaxRedeliveries < 1 || c.Dispatch.MaxRedeliveries > 1<<20:
		return fmt.Errorf("%w: Dispatch.MaxRedeliveries %d, want 1..%d", ErrInvalidConfig, c.Dispatch.MaxRedeliveries, 1<<20)
	case c.Dispatch.MaxUnackedPerSubscription < 0:
		return fmt.Errorf("%w: Dispatch.MaxUnackedPerSubscription %d, want 0 or more", ErrInvalidConfig, c.Dispatch.MaxUnackedPerSubscription)
	case c.Dispatch.MaxUnackedPerConsumer < 1:
		return fmt.Errorf("%w: Dispatch.MaxUnackedPerConsumer %d, want at least 1", ErrInvalidConfig, c.Dispatch.MaxUnackedPerConsumer)
	case c.Dispatch.ReadRetryMax > 10*time.Minute || c.Dispatch.ReadRetryInitial < time.Millisecond || c.Dispatch.ReadRetryInitial > c.Dispatch.ReadRetryMax:
		return fmt.Errorf("%w: Dispatch.ReadRetryInitial %v and ReadRetryMax %v, want 1ms <= initial <= max <= 10m",
			ErrInvalidConfig, c.Dispatch.ReadRetryInitial, c.Dispatch.ReadRetryMax)
	case c.ReplicatedSubscriptions.validate() != nil:
		return c.ReplicatedSubscriptions.validate()
	case c.Failover.validate() != nil:
		return c.Failover.validate()
	case c.DedupSnapshotInterval < 1:
		return fmt.Errorf("%w: DedupSnapshotInterval %d, want at least 1", ErrInvalidConfig, c.DedupSnapshotInterval)
	case c.DedupSnapshotTime < 0:
		return fmt.Errorf("%w: DedupSnapshotTime %v, want 0 or more", ErrInvalidConfig, c.DedupSnapshotTime)
	case c.DedupSnapshotCheckInterval < time.Second:
		return fmt.Errorf("%w: DedupSnapshotCheckInterval %v, want at least 1s", ErrInvalidConfig, c.DedupSnapshotCheckInterval)
	case c.BacklogQuotaCheckInterval < time.Second:
		return fmt.Errorf("%w: BacklogQuotaCheckInterval %v, want at least 1s", ErrInvalidConfig, c.BacklogQuotaCheckInterval)
	case c.MessageExpiryCheckInterval < time.Second:
		return fmt.Errorf("%w: MessageExpiryCheckInterval %v, want at least 1s", ErrInvalidConfig, c.MessageExpiryCheckInterval)
	case c.SubscriptionExpiryCheckInterval < time.Second:
		return fmt.Errorf("%w: SubscriptionExpiryCheckInterval %v, want at least 1s", ErrInvalidConfig, c.SubscriptionExpiryCheckInterval)
	case c.TopicLoadTimeout < time.Second:
		return fmt.Errorf("%w: TopicLoadTimeout %v, want at least 1s", ErrInvalidConfig, c.TopicLoadTimeout)
	case c.MaxConcurrentTopicLoads < 1:
		return fmt.Errorf("%w: MaxConcurrentTopicLoads %d, want at least 1", ErrInvalidConfig, c.MaxConcurrentTopicLoads)
	case c.MaxConcurrentLookups < 1:
		return fmt.Errorf("%w: MaxConcurrentLookups %d, want at least 1", ErrInvalidConfig, c.MaxConcurrentLookups)
	case c.CloseTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: CloseTimeout %v, want at least 100ms", ErrInvalidConfig, c.CloseTimeout)
	case c.ReplicationStartAt != ReplicationStartLatest && c.ReplicationStartAt != ReplicationStartEarliest:
		return fmt.Errorf("%w: ReplicationStartAt %q, want %s or %s", ErrInvalidConfig, c.ReplicationStartAt, ReplicationStartLatest, ReplicationStartEarliest)
	}
	if err := c.Metrics.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.loadManager().Validate(); err != nil {
		return err
	}
	return c.Policies.Validate()
}

// self is this broker's ownership record: its id and URLs.
func (c ServiceConfig) self() loadmgr.Owner {
	return loadmgr.Owner{BrokerID: c.BrokerID, ServiceURL: c.ServiceURL, ServiceURLTLS: c.ServiceURLTLS,
		WebURL: c.WebURL, WebURLTLS: c.WebURLTLS, Listeners: c.Listeners}
}

// loadManager is the configuration of the broker's load manager: the
// operator's settings above, and the rest from the broker's own.
func (c ServiceConfig) loadManager() loadmgr.Config {
	return loadmgr.Config{Region: c.Region, Self: c.self(), OwnershipTTL: c.OwnershipTTL, Lookup: c.Lookup,
		LoadBalance: c.LoadBalance, CloseTimeout: c.CloseTimeout, TopicLoadTimeout: c.TopicLoadTimeout,
		Clock: c.Clock, Metrics: c.Metrics, Registerer: c.Registerer}
}

// Service is a broker's topics: it answers lookups from bundle ownership,
// which its load manager (loadmgr.Manager) keeps, loads the topics this
// broker owns onto managed ledgers, and lets go of them when the load
// manager hands their bundle to another broker or loses its session
// (managedTopics). It implements Topics for the protocol Server.
//
// Loading: the first request for a topic starts its load in a goroutine
// owned by the Service; every request for it meanwhile waits on the same
// load (so PRODUCER and SUBSCRIBE replies are held, not refused, while a
// topic recovers: DESIGN §5).
type Service struct {
	cfg      ServiceConfig
	store    meta.Store
	policies *global.Cache
	gstore   *global.Store
	ledgers  *mledger.Factory
	schemas  *schema.Registry
	log      *slog.Logger
	lm       *loadmgr.Manager
	traces   *traceHooks     // nil: not tracing
	metrics  *brokerMetrics  // nil when metrics are disabled
	clock    clockwork.Clock // ServiceConfig.Clock

	metricsState topicMetricsState

	// bootID makes generated producer names unique across runs and
	// brokers. It is drawn from the global source, not from an injected
	// one: an identifier must differ between brokers, and two brokers a
	// test gave the same seed would name their producers alike.
	bootID    string
	names     atomic.Int64  // generated producer names so far
	redirects atomic.Uint64 // active-region redirects so far: which host of the record (Lookup)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // loads and topic watchers

	failover *regionFailover // automatic region failover (failover.go)
	fences   *fences         // drills' fences (fence.go); nil without a global store

	loads   loadSlots      // MaxConcurrentTopicLoads (limits.go)
	lookups *LookupPermits // MaxConcurrentLookups (limits.go)

	mu struct {
		sync.Mutex
		closed bool
		topics map[string]*topicLoad
	}
}

// topicLoad is a topic being loaded or loaded: done is closed when topic or
// err is set.
type topicLoad struct {
	done   chan struct{}
	create creation // what the load may do when the topic does not exist
	topic  *Topic
	err    error
}

// NewService returns a Service over its dependencies: the region's metadata
// store, the global policy cache and store, and the managed-ledger factory.
// rnd must be non-nil: it is the load manager's (loadmgr.New). Start must be
// called before it serves.
func NewService(cfg ServiceConfig, store meta.Store, policies *global.Cache, gstore *global.Store,
	ledgers *mledger.Factory, log *slog.Logger, rnd *rand.Rand) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = log.With("broker", cfg.BrokerID)
	clock := cfg.Clock
	scfg := schema.DefaultConfig()
	scfg.Logger, scfg.Now = log, clock.Now
	schemas, err := schema.New(store, cfg.Region, scfg)
	if err != nil {
		return nil, err
	}
	metrics, err := newBrokerMetrics(cfg, policies)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, store: store, policies: policies, gstore: gstore, ledgers: ledgers, schemas: schemas, log: log,
		metrics: metrics, clock: clock}
	s.traces = newTraceHooks(cfg.Tracing, cfg.Region, log)
	s.bootID = fmt.Sprintf("%x", rand.Uint32())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.topics = make(map[string]*topicLoad)
	s.loads = newLoadSlots(cfg.MaxConcurrentTopicLoads)
	s.lookups = NewLookupPermits(cfg.MaxConcurrentLookups)
	s.failover = newRegionFailover(s, cfg.Failover)
	if gstore != nil {
		s.fences = &fences{s: s}
	}
	lcfg := cfg.loadManager()
	lcfg.Clock = s.clock
	if s.lm, err = loadmgr.New(lcfg, store, policies, gstore, managedTopics{s}, log, rnd); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the load manager (which removes the previous run's claims
// and registers the broker), the backlog quota checks, message and
// subscription expiry, deduplication snapshots by time, the replication
// cursors' upkeep, the moving of clients of namespaces active elsewhere
// (migrate.go) and automatic region failover (failover.go).
func (s *Service) Start(ctx context.Context) error {
	if err := s.lm.Start(ctx); err != nil {
		return err
	}
	s.wg.Add(7)
	go s.eachLoadedTopic(s.cfg.BacklogQuotaCheckInterval, func(t *Topic) { t.enforceQuota(s.ctx) })
	go s.eachLoadedTopic(s.cfg.DedupSnapshotCheckInterval, (*Topic).snapshotDedupIfOlder)
	go s.eachLoadedTopic(s.cfg.MessageExpiryCheckInterval, func(t *Topic) { t.expireByTTL(s.ctx) })
	go s.eachLoadedTopic(s.cfg.SubscriptionExpiryCheckInterval, func(t *Topic) { t.expireInactiveSubscriptions(s.ctx) })
	go s.replicationLoop()
	go s.migrationLoop()
	go s.failover.loop()
	if s.failover.cfg.Probe != nil {
		s.wg.Add(1)
		go s.failover.probeLoop()
	}
	if s.fences != nil {
		s.wg.Add(1)
		go s.fences.run()
	}
	return nil
}

// Close hands every bundle to the other brokers (Drain: the registration
// is marked Draining first), then unloads every topic left (closing their
// producers and consumers, so clients reconnect elsewhere), then gives up
// ownership. The hand-offs and unloads end by ctx's deadline whatever the
// clients do, each topic within CloseTimeout.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	// Half of what is left for the hand-offs, so that a drain held up (etcd
	// unreachable) leaves the unloads their time.
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		dctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
	}
	s.lm.Drain(dctx)
	cancel()
	s.unloadAll(ctx)
	s.cancel()
	s.wg.Wait()
	s.lm.Close(ctx)
	return nil
}

// Effective returns topic's effective policies (see resolve).
func (s *Service) Effective(t topology.TopicName) (global.Effective, error) { return s.resolve(t) }

// Owner returns the broker of this region that owns t's bundle, claiming
// it for this broker when nobody holds it (Lookup places it instead);
// unlike Lookup it ignores the namespace's active region. It is bounded by
// Lookup.MetadataTimeout.
func (s *Service) Owner(ctx context.Context, t topology.TopicName) (owner loadmgr.Owner, mine bool, err error) {
	b, err := s.Bundle(t)
	if err != nil {
		return loadmgr.Owner{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Lookup.MetadataTimeout)
	defer cancel()
	return s.lm.ClaimBundle(ctx, t.Tenant, t.Namespace, b)
}

// resolve returns topic's effective policies from the watched cache, which
// serves even while the global store is unreachable.
func (s *Service) resolve(t topology.TopicName) (global.Effective, error) {
	eff, err := s.policies.Resolve(t, s.cfg.Policies)
	if errors.Is(err, global.ErrNotFound) {
		return eff, fmt.Errorf("%w: %v", wire.ErrTopicNotFound, err)
	}
	return eff, err
}

// Lookup implements Topics: the broker that owns t's bundle, placed on the
// region's least-loaded live broker when nobody holds it, and taken from
// an owner that a probe finds dead (see ownership). A namespace whose
// active region is elsewhere (DESIGN §6) redirects a client's lookup to
// that region; a replicator's (opts.Replication) is answered here, so
// that replication into this region does not land in the active one.
// While the metadata store does not answer within Lookup.MetadataTimeout
// the lookup fails with ServiceNotReady, never a guessed owner.
func (s *Service) Lookup(ctx context.Context, t topology.TopicName, opts LookupOptions) (Location, error) {
	defer s.metrics.lookedUp(time.Now())
	if err := s.refuseFenced(t); err != nil {
		return Location{}, err
	}
	eff, err := s.resolve(t)
	if err != nil {
		return Location{}, err
	}
	active := eff.ActiveRegion
	if r := s.failover.lookupElsewhere(t, eff); r != "" {
		active = r
	}
	if active != "" && active != s.cfg.Region && !opts.Replication {
		c, ok := s.policies.Cluster(active)
		if !ok {
			return Location{}, fmt.Errorf("%w: active region %s has no cluster record", wire.ErrServiceNotReady, active)
		}
		// One broker of the record's hosts, a different one each time: a
		// client dials the URL of a redirect as it is.
		i := s.redirects.Add(1)
		return Location{ServiceURL: global.OneHost(c.BrokerServiceURL, i), ServiceURLTLS: global.OneHost(c.BrokerServiceURLTLS, i),
			WebURL: global.OneHost(c.ServiceURL, i), Redirect: true}, nil
	}
	b, err := loadmgr.BundleOf(t, eff)
	if err != nil {
		return Location{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Lookup.MetadataTimeout)
	defer cancel()
	owner, _, err := s.lm.BundleOwner(ctx, t.Tenant, t.Namespace, b)
	if err != nil {
		return Location{}, err
	}
	l, err := owner.Listener(opts.Listener)
	if err != nil {
		return Location{}, err
	}
	return Location{ServiceURL: l.ServiceURL, ServiceURLTLS: l.ServiceURLTLS, WebURL: owner.WebURL}, nil
}

// Partitions implements Topics. A topic with no partitioned metadata is
// created partitioned when the auto-creation policy says so and it does
// not exist yet as a plain topic.
func (s *Service) Partitions(ctx context.Context, t topology.TopicName) (int, error) {
	if t.IsPartition() {
		return 0, nil
	}
	eff, err := s.resolve(t)
	if err != nil {
		return 0, err
	}
	if eff.Partitions > 0 {
		return eff.Partitions, nil
	}
	auto := eff.AutoTopicCreation
	if !auto.Allow || auto.Type != global.Partitioned || auto.Partitions == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Lookup.MetadataTimeout)
	defer cancel()
	exists, err := s.exists(ctx, t)
	if err != nil {
		// The lookup error on which clients retry (DESIGN §5).
		return 0, fmt.Errorf("%w: %v", wire.ErrServiceNotReady, err)
	}
	if exists {
		return 0, nil
	}
	n := *auto.Partitions
	if err := s.cfg.Policies.PartitionsAllowed(n); err != nil {
		return 0, fmt.Errorf("%w: auto-create partitioned topic %s: %w", wire.ErrNotAllowed, t, err)
	}
	if err := s.AdmitTopics(ctx, t, n); err != nil {
		return 0, err
	}
	r, err := s.gstore.CreateTopic(ctx, t, global.TopicPolicies{Partitions: n, Created: s.clock.Now().UnixMilli()})
	if err != nil && !errors.Is(err, global.ErrExists) {
		return 0, fmt.Errorf("%w: auto-create partitioned topic %s: %v", wire.ErrMetadata, t, err)
	}
	if err == nil {
		// Answer only once the cache shows it, so that this broker agrees
		// with itself on the next request.
		if err := s.policies.Await(ctx, r); err != nil {
			return 0, err
		}
	}
	tp, _ := s.policies.Topic(t)
	return tp.Partitions, nil
}

// exists reports whether t has a managed ledger in this region.
func (s *Service) exists(ctx context.Context, t topology.TopicName) (bool, error) {
	_, err := s.store.Get(ctx, mledger.ListKey(s.cfg.Region, t.String()))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, meta.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("%w: %v", wire.ErrMetadata, err)
	}
}

// TopicsOfNamespace implements Topics: the persistent topics of
// tenant/ns that exist in this region, partitions listed one by one, as
// GET_TOPICS_OF_NAMESPACE answers; every partition of a partitioned topic
// is listed, created yet or not (declaredPartitions).
func (s *Service) TopicsOfNamespace(ctx context.Context, tenant, ns string) ([]string, error) {
	if _, ok := s.policies.Namespace(tenant, ns); !ok {
		return nil, nil // Pulsar lists no topics for a namespace that does not exist
	}
	prefix := meta.Prefix(meta.RegionKey(s.cfg.Region, "mledgers"))
	kvs, _, err := s.store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", wire.ErrMetadata, err)
	}
	var names []string
	for _, kv := range kvs {
		name, err := meta.Name(kv.Key)
		if err != nil {
			continue
		}
		t, err := topology.ParseTopicName(name)
		if err == nil && t.Tenant == tenant && t.Namespace == ns && t.Domain == topology.Persistent {
			names = append(names, t.String())
		}
	}
	names = append(names, s.declaredPartitions(tenant, ns)...)
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Topic implements Topics: the loaded topic t, loading it if this broker
// owns its bundle. A topic that does not exist is created only when create
// is set and the namespace's auto-creation policy allows it.
func (s *Service) Topic(ctx context.Context, t topology.TopicName, create bool) (*Topic, error) {
	if err := s.refuseFenced(t); err != nil {
		return nil, err
	}
	c := mustExist
	if create {
		c = autoCreate
	}
	return s.topic(ctx, t, c)
}

// CreateTopic creates (and loads) a non-partitioned topic whatever the
// namespace's auto-creation policy says, as an admin's create does. An
// existing topic is wire.ErrNotAllowed.
func (s *Service) CreateTopic(ctx context.Context, t topology.TopicName) error {
	exists, err := s.exists(ctx, t)
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("%w: topic %s already exists", wire.ErrNotAllowed, t)
	}
	_, err = s.topic(ctx, t, forceCreate)
	return err
}

// creation says whether loading a topic may create it.
type creation int

const (
	mustExist   creation = iota
	autoCreate           // when the auto-creation policy allows
	forceCreate          // always (admin)
)

// topic returns the loaded topic, loading it (and creating it, as create
// allows) once for all its concurrent callers. A caller that joined a load
// that could not create the topic (a stats request's beside a PRODUCER's)
// and found it missing loads again with its own creation: the failed load
// has left the map by then.
func (s *Service) topic(ctx context.Context, t topology.TopicName, create creation) (*Topic, error) {
	name := t.String()
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: broker is shutting down", wire.ErrServiceNotReady)
		}
		l, ok := s.mu.topics[name]
		if !ok {
			l = &topicLoad{done: make(chan struct{}), create: create}
			s.mu.topics[name] = l
			s.wg.Add(1)
			go s.load(l, t, create)
		}
		s.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: topic %s is still loading", wire.ErrServiceNotReady, name)
		}
		if l.err != nil && l.create < create && errors.Is(l.err, wire.ErrTopicNotFound) {
			continue
		}
		if l.err != nil {
			return nil, l.err
		}
		return l.topic, nil
	}
}

// load loads one topic; a failed load is forgotten so the next request
// tries again.
func (s *Service) load(l *topicLoad, t topology.TopicName, create creation) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.TopicLoadTimeout)
	defer cancel()
	l.topic, l.err = s.loadTopic(ctx, t, create)
	s.mu.Lock()
	current := s.mu.topics[t.String()] == l
	if l.err != nil && current {
		delete(s.mu.topics, t.String())
	}
	s.mu.Unlock()
	if l.err == nil && !current {
		// Every topic was unloaded while this one loaded (the session lease
		// ended, and the unload stopped waiting for it at CloseTimeout): it
		// was claimed under the lost lease, and must not serve beside a
		// load under the next one (see ownership).
		// Closed before its waiters hear, so that their retry finds the
		// managed ledger free to open again.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CloseTimeout)
		defer cancel()
		l.topic.close(cctx)
		l.topic, l.err = nil, fmt.Errorf("%w: %s was unloaded while it loaded", wire.ErrServiceNotReady, t)
		close(l.done)
		return
	}
	if l.err != nil {
		s.log.Info("topic not loaded", "topic", t.String(), "err", l.err)
		close(l.done)
		return
	}
	close(l.done)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-l.topic.ml.Lost():
			if errors.Is(l.topic.ml.Err(), mledger.ErrClosed) {
				return // closed here: an unload or shutdown is under way
			}
			s.log.Warn("topic lost to another owner: unloading", "topic", t.String(), "err", l.topic.ml.Err())
			s.unload(t.String(), l)
		case <-l.topic.closed:
		}
	}()
}

func (s *Service) loadTopic(ctx context.Context, t topology.TopicName, create creation) (*Topic, error) {
	release, err := s.loads.acquire(ctx, t)
	if err != nil {
		return nil, err
	}
	defer release()
	eff, err := s.resolve(t)
	if err != nil {
		return nil, err
	}
	if !t.IsPartition() && eff.Partitions > 0 {
		return nil, fmt.Errorf("%w: %s is a partitioned topic: use its partitions", wire.ErrNotAllowed, t)
	}
	b, err := loadmgr.BundleOf(t, eff)
	if err != nil {
		return nil, err
	}
	// A client that reached this broker for the topic is served here when
	// the bundle is free: it was placed here, or came loose since.
	owner, mine, err := s.lm.ClaimBundle(ctx, t.Tenant, t.Namespace, b)
	if err != nil {
		return nil, err
	}
	if !mine {
		return nil, fmt.Errorf("%w: %s is served by %s", wire.ErrServiceNotReady, t, owner.ServiceURL)
	}
	exists, err := s.exists(ctx, t)
	if err != nil {
		return nil, err
	}
	if !exists && t.IsPartition() && eff.Partitions > 0 && t.Partition >= eff.Partitions {
		// Created, it would be a topic of its own that the partitioned
		// topic's clients never read, and that an increase of the
		// partitions would later adopt with whatever it holds.
		return nil, fmt.Errorf("%w: %s is beyond the %d partitions of %s", wire.ErrNotAllowed, t, eff.Partitions, t.Base())
	}
	// A partition of a partitioned topic exists once its metadata does.
	partition := t.IsPartition() && t.Partition < eff.Partitions
	allowed := create == forceCreate || (create == autoCreate && eff.AutoTopicCreation.Allow)
	if !exists && !partition && !allowed {
		return nil, fmt.Errorf("%w: topic %s does not exist", wire.ErrTopicNotFound, t)
	}
	if !exists && !partition {
		if err := s.AdmitTopics(ctx, t, 1); err != nil {
			return nil, err
		}
	}
	var repl []string
	if !exists {
		// Before the topic has a record, and so before any entry: it
		// replicates from its first entry, and a failure here leaves it
		// new for the next load.
		if repl, err = s.syncReplicationCursors(ctx, t, eff, nil, func() mledger.Position { return mledger.Position{} }); err != nil {
			return nil, fmt.Errorf("%w: load %s: %v", wire.ErrServiceNotReady, t, err)
		}
	}
	ml, err := s.ledgers.Open(ctx, t.String(), mledger.WithQuorums(s.quorumsOf(eff)), mledger.WithBookieGroups(eff.BookieGroups))
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", wire.ErrServiceNotReady, t, err)
	}
	topic, err := newTopic(ctx, s, t, ml, eff)
	if err == nil && exists {
		repl, err = s.syncReplicationCursors(ctx, t, eff, nil, topic.replicationStart)
	}
	if err != nil {
		if topic != nil {
			_ = topic.dd.stopRecording(ctx) // nothing was appended: at once
		}
		_ = ml.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: load %s: %v", wire.ErrServiceNotReady, t, err)
	}
	topic.repl = repl
	topic.applyPolicies(eff)
	s.log.Info("topic loaded", "topic", t.String())
	return topic, nil
}

// unload closes one loaded topic, if it is still the one registered,
// within CloseTimeout.
func (s *Service) unload(name string, l *topicLoad) {
	s.mu.Lock()
	if s.mu.topics[name] == l {
		delete(s.mu.topics, name)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
	defer cancel()
	l.topic.close(ctx)
}

// unloadAll closes every loaded topic (ownership lost, or shutdown), all at
// once, each within CloseTimeout and all by ctx's deadline.
func (s *Service) unloadAll(ctx context.Context) {
	s.mu.Lock()
	loads := s.mu.topics
	s.mu.topics = make(map[string]*topicLoad)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Go(func() {
			select {
			case <-l.done:
			case <-ctx.Done():
				return // a load still under way ends with the Service's ctx
			}
			if l.topic != nil {
				tctx, cancel := context.WithTimeout(ctx, s.cfg.CloseTimeout)
				defer cancel()
				l.topic.close(tctx)
			}
		})
	}
	wg.Wait()
}

// Loaded returns the names of the topics loaded on this broker.
func (s *Service) Loaded() []string {
	var names []string
	for _, t := range s.loadedTopics() {
		names = append(names, t.Name())
	}
	slices.Sort(names)
	return names
}

// producerName generates a name for a producer that did not choose one,
// unique across brokers and restarts (deduplication keys on it):
// <region>-<broker boot id>-<n>, after Pulsar's <cluster>-<id>-<n>.
func (s *Service) producerName() string {
	return fmt.Sprintf("%s-%s-%d", s.cfg.Region, s.bootID, s.names.Add(1)-1)
}

// Global returns the global configuration store the service resolves
// policies from (for the admin API and tests).
func (s *Service) Global() *global.Store { return s.gstore }

// Policies returns the watched cache of the global configuration.
func (s *Service) Policies() *global.Cache { return s.policies }

// LoadManager returns the broker's load manager: bundle ownership,
// placement, load reports, hand-offs and splits, and the region's leader.
func (s *Service) LoadManager() *loadmgr.Manager { return s.lm }

// LookupPermits is the Service's bound on the lookups answered at once
// (ServiceConfig.MaxConcurrentLookups).
func (s *Service) LookupPermits() *LookupPermits { return s.lookups }

// TopicLoadsQueued is how many topic loads have had to wait for a slot
// (MaxConcurrentTopicLoads) since the Service started.
func (s *Service) TopicLoadsQueued() int64 { return s.loads.queued.Load() }

// loadedTopics returns the topics loaded here.
// eachLoadedTopic calls f for every loaded topic each interval, on the
// service's clock, until the service stops (the backlog quota checks,
// message expiry).
func (s *Service) eachLoadedTopic(interval time.Duration, f func(*Topic)) {
	defer s.wg.Done()
	tick := s.clock.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.Chan():
		}
		for _, t := range s.loadedTopics() {
			f(t)
		}
	}
}

func (s *Service) loadedTopics() []*Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Topic
	for _, l := range s.mu.topics {
		select {
		case <-l.done:
			if l.topic != nil {
				out = append(out, l.topic)
			}
		default:
		}
	}
	return out
}

// LoadedTopics returns the topics loaded on this broker, sorted by name.
func (s *Service) LoadedTopics() []*Topic {
	topics := s.loadedTopics()
	slices.SortFunc(topics, func(a, b *Topic) int { return strings.Compare(a.Name(), b.Name()) })
	return topics
}

// Bundle returns the bundle t falls in.
func (s *Service) Bundle(t topology.TopicName) (topology.Bundle, error) {
	eff, err := s.resolve(t)
	if err != nil {
		return topology.Bundle{}, err
	}
	return loadmgr.BundleOf(t, eff)
}
