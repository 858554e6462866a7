package loadmgr

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Topics is the broker as its load manager drives it: what it has loaded,
// and letting go of it. The load manager never holds a topic; it reaches
// the broker's through this interface alone, as etcd's lessor reaches its
// server's keys through a RangeDeleter. The broker implements it.
type Topics interface {
	// Sample returns the loaded topics' cumulative traffic and clients,
	// for the load report.
	Sample() Sample
	// HandOff lets go of the topics of tenant/ns's bundle b loaded on
	// this broker, within ctx (steps 2 and 4 of handoff.go): it fences
	// them (no SEND taken, the taken ones receipted, dispatch stopped),
	// persists and closes their storage, and forgets them; then it calls
	// move, which moves the bundle's key (step 3) and returns the new
	// owner, or nil when there is none; then it closes them, telling their
	// clients to go to that owner (or to look the topic up again). It
	// returns how many topics it let go of.
	HandOff(ctx context.Context, tenant, ns string, b topology.Bundle, move func(context.Context) *Owner) int
	// UnloadAll closes every loaded topic, within ctx: the session lease
	// ended, and nothing loaded under it may serve on (ownership's
	// invariant).
	UnloadAll(ctx context.Context)
}

// Sample is what the broker reports of its loaded topics.
type Sample struct {
	Topics []TopicSample
	// Connections is the number of distinct client connections of those
	// topics' producers and consumers.
	Connections int
}

// TopicSample is one loaded topic's traffic so far and its clients.
type TopicSample struct {
	Name                 topology.TopicName
	Counters             Counters
	Producers, Consumers int
}

// Counters are a topic's cumulative message counts, in and out, since it
// loaded.
type Counters struct {
	InMsgs, InBytes, OutMsgs, OutBytes int64
}

// Manager is one broker's load manager: its session and the bundles it
// owns (ownership.go), the placement of bundles nobody owns
// (placement.go), its load reports and bundle splits (loadreport.go,
// split.go), the hand-off of bundles between brokers (handoff.go), and,
// while the broker is its region's leader, the shedder and the region's
// cluster record (leader.go). The broker asks it who owns a bundle before
// it loads a topic, and it drives the broker's topics through Topics.
//
// Its goroutines (the leader's campaign, the load reports, the watch of
// unload requests, and each hand-off) run from Start until Close, which
// stops and waits for them and then gives up the session.
type Manager struct {
	cfg      Config
	store    meta.Store
	policies *global.Cache
	gstore   *global.Store
	topics   Topics
	log      *slog.Logger
	own      *ownership
	metrics  *metrics // nil when metrics are disabled

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loops and the hand-offs

	loadState loadState // load reports (loadreport.go)

	// handoffs are the ownership keys of the bundles being handed over
	// (handoff.go), so that one bundle has one hand-off at a time.
	handoffs struct {
		sync.Mutex
		keys map[string]struct{}
	}
}

// New returns the load manager of the broker cfg.Self, over the region's
// metadata store, the global policy cache and store, and the broker's
// topics. rnd must be non-nil: it breaks ties between the brokers a bundle
// may be placed on, under a lock of the manager's own. Start must be called
// before it serves.
func New(cfg Config, store meta.Store, policies *global.Cache, gstore *global.Store, topics Topics, log *slog.Logger,
	rnd *rand.Rand) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rnd == nil {
		return nil, fmt.Errorf("%w: rnd is required", ErrInvalidConfig)
	}
	m := &Manager{cfg: cfg, store: store, policies: policies, gstore: gstore, topics: topics, log: log}
	met, err := newMetrics(cfg, m.LoadReport)
	if err != nil {
		return nil, err
	}
	m.metrics = met
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.own = newOwnership(store, cfg.Region, cfg.Self, cfg.OwnershipTTL, cfg.Lookup, cfg.Clock, rnd, log, func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.CloseTimeout)
		defer cancel()
		topics.UnloadAll(ctx)
	})
	m.own.metrics = met
	return m, nil
}

// Start removes the previous run's claims, registers the broker and starts
// the watch for unload requests, the load reports and the campaign for
// region leader.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.own.start(ctx); err != nil {
		return err
	}
	m.wg.Go(m.leaderLoop)
	m.wg.Go(m.loadLoop)
	m.wg.Go(m.watchUnloads)
	return nil
}

// Close stops the load manager's goroutines and waits for them, then gives
// up the session, and with it every claim. The broker calls it once its
// topics are unloaded.
func (m *Manager) Close(ctx context.Context) {
	m.cancel()
	m.wg.Wait()
	m.own.release(ctx)
}

// Self is this broker's ownership record: its id and URLs.
func (m *Manager) Self() Owner { return m.own.self }

// Brokers returns the live brokers of this region, in registration key
// order.
func (m *Manager) Brokers(ctx context.Context) ([]LiveBroker, error) {
	return liveBrokers(ctx, m.store, m.cfg.Region)
}

// BundleOwner returns the broker of this region that owns tenant/ns's
// bundle b, placed on the least-loaded live broker when nobody holds it
// and taken from an owner that a probe finds dead, as a lookup of one of
// its topics does (see ownership); mine reports whether it is this broker.
// Every failure to reach the metadata store is wire.ErrServiceNotReady,
// never a guessed owner.
func (m *Manager) BundleOwner(ctx context.Context, tenant, ns string, b topology.Bundle) (owner Owner, mine bool, err error) {
	return m.own.acquire(ctx, tenant, ns, b, placeLeastLoaded)
}

// ClaimBundle is BundleOwner, but a bundle nobody holds is claimed for this
// broker: a client reached it for one of the bundle's topics.
func (m *Manager) ClaimBundle(ctx context.Context, tenant, ns string, b topology.Bundle) (owner Owner, mine bool, err error) {
	return m.own.acquire(ctx, tenant, ns, b, placeHere)
}

// NamespaceBundles returns the bundles of tenant/ns, or
// wire.ErrTopicNotFound when the namespace does not exist.
func (m *Manager) NamespaceBundles(tenant, ns string) ([]topology.Bundle, error) {
	p, ok := m.policies.Namespace(tenant, ns)
	if !ok {
		return nil, fmt.Errorf("%w: namespace %s/%s does not exist", wire.ErrTopicNotFound, tenant, ns)
	}
	return namespaceBundles(p)
}

// BundleOf returns the bundle topic t falls in, given its effective
// policies: the namespace's bundles, or the default ones of a namespace
// that has none.
func BundleOf(t topology.TopicName, eff global.Effective) (topology.Bundle, error) {
	bundles := eff.Bundles
	if len(bundles) == 0 {
		bundles, _ = topology.EvenBundles(topology.DefaultBundleCount)
	}
	return topology.BundleOf(t, bundles)
}
