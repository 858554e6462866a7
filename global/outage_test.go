package global

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
)

// DESIGN §3: the data path never waits on the global etcd. With the etcd
// server stopped, the cache still answers (it is all the data path reads),
// admin writes fail with ErrUnavailable; once the server is back on the same
// data, the cache converges on writes made through another client.
func TestCacheSurvivesEtcdOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cfg := metatest.FastEmbedConfig()
	cfg.DataDir = t.TempDir()
	e := metatest.Start(t, cfg)
	st := metatest.Dial(t, e.Endpoints())
	s := newStore(t, st, DefaultConfig().Prefix)
	if err := s.Ensure(ctx, Bootstrap{Clusters: map[string]ClusterData{"standalone": east}}); err != nil {
		t.Fatal(err)
	}
	c := startCache(t, s)
	r := must(s.CreateTopic(ctx, topic(t, "public/default/orders"), TopicPolicies{Partitions: 2, MessageTTLInSeconds: ptr(11)})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}

	phase := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd stopped in %v", time.Since(phase).Round(time.Millisecond))
	eff, err := c.Resolve(topic(t, "public/default/orders-partition-1"), DefaultBrokerDefaults())
	if err != nil || eff.Partitions != 2 || eff.MessageTTLInSeconds != 11 || !slices.Equal(eff.ReplicationClusters, []string{"standalone"}) {
		t.Fatalf("Resolve with etcd down = %+v, %v", eff, err)
	}
	if got := c.Namespaces("public"); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("Namespaces with etcd down = %v", got)
	}
	testkit.WaitFor(t, "the cache reporting the store unreachable", func() bool { return errors.Is(c.Err(), ErrUnavailable) })
	start := time.Now()
	_, err = s.CreateNamespace(ctx, "public", "during", Policies{})
	wantErr(t, "write with etcd down", err, ErrUnavailable)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a write with etcd down took %v; RequestTimeout is %v", took, s.cfg.RequestTimeout)
	}
	t.Logf("write with etcd down failed after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// Same data, same ports (the member's peer URL is in its data).
	cfg.ListenClientURLs, cfg.ListenPeerURLs = e.Endpoints(), e.PeerURLs()
	phase = time.Now()
	e2 := metatest.Start(t, cfg)
	s2 := newStore(t, metatest.Dial(t, e2.Endpoints()), DefaultConfig().Prefix)
	r = must(s2.CreateNamespace(ctx, "public", "after", Policies{MessageTTLInSeconds: ptr(3)})).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatalf("cache did not converge after the restart: %v (cache Err %v)", err, c.Err())
	}
	t.Logf("cache converged %v after the restart began", time.Since(phase).Round(time.Millisecond))
	testkit.WaitFor(t, "the cache reporting the store reachable", func() bool { return c.Err() == nil })
	if p, ok := c.Namespace("public", "after"); !ok || *p.MessageTTLInSeconds != 3 {
		t.Fatalf("cache after restart: %+v, %v", p, ok)
	}
	r = must(s2.DeleteTopic(ctx, topic(t, "public/default/orders"))).ok(t)
	if err := c.Await(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Topic(topic(t, "public/default/orders")); ok {
		t.Fatal("cache kept a topic deleted after the restart")
	}
}

// unreachableGets fails every Get while cut is set, as a store that no
// longer answers would; everything else passes through.
type unreachableGets struct {
	meta.Store
	cut atomic.Bool
}

func (u *unreachableGets) Get(ctx context.Context, key string) (meta.KV, error) {
	if u.cut.Load() {
		return meta.KV{}, errors.New("unreachable")
	}
	return u.Store.Get(ctx, key)
}

// TestCacheProbesOnItsClock: the probe that tells a quiet watch from an
// unreachable store runs on CacheConfig.Clock: a store that stops
// answering shows in Err only once the clock passes ProbeInterval, and so
// does its return.
func TestCacheProbesOnItsClock(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	st := &unreachableGets{Store: mem}
	clock := clockwork.NewFakeClock()
	c := startCache(t, newStore(t, st, DefaultConfig().Prefix), func(cfg *CacheConfig) { cfg.Clock = clock })
	ctx := ctxT(t)
	select {
	case <-c.Ready():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // the probe's ticker
		t.Fatal(err)
	}

	st.cut.Store(true)
	if err := c.Err(); err != nil {
		t.Fatalf("Err = %v before any probe", err)
	}
	clock.Advance(c.cfg.ProbeInterval)
	testkit.WaitFor(t, "the probe finding the store unreachable", func() bool { return errors.Is(c.Err(), ErrUnavailable) })

	st.cut.Store(false)
	clock.Advance(c.cfg.ProbeInterval)
	testkit.WaitFor(t, "the probe finding the store back", func() bool { return c.Err() == nil })
}
