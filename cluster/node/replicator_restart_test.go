package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/replicator"
)

// TestReplicatorRestartedUnderItsIDWaitsOutTheDeadRun: a replicator
// restarted at once after a SIGKILL, under the same --worker-id, finds its
// previous run's registration alive for up to the lease's TTL. It waits
// for that lease to lapse and starts, rather than exiting; a second live
// worker under the same id is still refused with ErrWorkerExists.
func TestReplicatorRestartedUnderItsIDWaitsOutTheDeadRun(t *testing.T) {
	etcd := startStandalone(t, func(*node.BrokerConfig) {})
	const region, id = "rr", "replicator-stable"
	const ttl = 3 * time.Second

	// The dead run: its registration under a lease nobody renews, as a
	// SIGKILL leaves it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.EtcdEndpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	grant, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, meta.RegionKey(region, "replicator-workers", id), id, clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	cli.Close()

	rep := replicator.DefaultConfig("")
	rep.WorkerID, rep.LeaseTTL = id, ttl
	cfg := node.Config{Etcd: etcd.EtcdEndpoints(), Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: region, Replicator: &rep}}}
	n := startNode(t, cfg) // fails the test if Start returns ErrWorkerExists
	if !n.Regions()[0].Replicator().Ready() {
		t.Fatal("the restarted worker is not registered")
	}

	startCtx, cancelStart := context.WithTimeout(context.Background(), time.Minute)
	defer cancelStart()
	dup, err := node.Start(startCtx, cfg)
	if err == nil {
		dup.Close()
		t.Fatal("a second live worker under the same id started")
	}
	if !errors.Is(err, replicator.ErrWorkerExists) {
		t.Fatalf("a second live worker under the same id: %v, want ErrWorkerExists", err)
	}
}
