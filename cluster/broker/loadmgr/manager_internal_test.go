package loadmgr

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// noTopics is a broker with no topics loaded: the load manager's own tests
// drive its metadata without a topic service.
type noTopics struct{}

func (noTopics) Sample() Sample { return Sample{} }

func (noTopics) HandOff(ctx context.Context, _, _ string, _ topology.Bundle, move func(context.Context) *Owner) int {
	move(ctx)
	return 0
}

func (noTopics) UnloadAll(context.Context) {}

// testGlobal is the global configuration over store, with its watched
// cache.
func testGlobal(t *testing.T, store meta.Store) (*global.Store, *global.Cache) {
	t.Helper()
	scfg := global.DefaultConfig()
	scfg.Logger = nil
	gs, err := global.NewStore(store, scfg)
	if err != nil {
		t.Fatal(err)
	}
	ccfg := global.DefaultCacheConfig()
	ccfg.Logger = nil
	cache, err := global.StartCache(gs, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	return gs, cache
}

// testRand is a source with a fixed seed, so that a test's tie-breaks
// repeat from run to run.
func testRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// testConfig is the configuration of broker id's load manager in the tests.
func testConfig(id string) Config {
	return Config{Region: testRegion, Self: Owner{BrokerID: id, ServiceURL: "pulsar://" + id + ":6650", WebURL: "http://" + id + ":8080"},
		OwnershipTTL: 30 * time.Second, Lookup: DefaultLookupConfig(), LoadBalance: DefaultBalanceConfig(),
		CloseTimeout: 5 * time.Second, TopicLoadTimeout: 30 * time.Second, Clock: clockwork.NewRealClock()}
}

func TestConfigValidate(t *testing.T) {
	if err := testConfig("b").Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("b")
	cfg.Clock = nil
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no clock: Validate() = %v", err)
	}
}

// testManager is a registered load manager of broker id over store, with
// no loops running (Start's campaign, reports and watch), closed at the end
// of the test.
func testManager(t *testing.T, store meta.Store, gs *global.Store, cache *global.Cache, id string) *Manager {
	t.Helper()
	m, err := New(testConfig(id), store, cache, gs, noTopics{}, discardLogger(), testRand())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.own.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// TestClusterRecordUpkeep: the leader rewrites a cluster record the region
// maintains to name its live brokers, and leaves one the operator wrote (no
// MaintainedByRegion mark) as it is.
func TestClusterRecordUpkeep(t *testing.T) {
	store := metatest.Memory(t)
	gs, cache := testGlobal(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := testManager(t, store, gs, cache, "b1")
	for _, tc := range []struct {
		name, want string
		record     global.ClusterData
	}{
		{"maintained by the region", "pulsar://b1:6650",
			global.ClusterData{BrokerServiceURL: "pulsar://gone:6650", MaintainedByRegion: true}},
		{"the operator's", "pulsar://balancer.example:6650",
			global.ClusterData{BrokerServiceURL: "pulsar://balancer.example:6650"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rc, err := gs.UpdateCluster(ctx, testRegion, func(d *global.ClusterData) error { *d = tc.record; return nil })
			if err != nil {
				if rc, err = gs.CreateCluster(ctx, testRegion, tc.record); err != nil {
					t.Fatal(err)
				}
			}
			if err := cache.Await(ctx, rc); err != nil {
				t.Fatal(err)
			}
			if err := m.maintainClusterRecord(ctx); err != nil {
				t.Fatal(err)
			}
			d, err := gs.Cluster(ctx, testRegion)
			if err != nil || d.BrokerServiceURL != tc.want || d.MaintainedByRegion != tc.record.MaintainedByRegion {
				t.Fatalf("record %+v (%v), want brokerServiceUrl %s", d, err, tc.want)
			}
		})
	}
}
