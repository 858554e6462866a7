//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestEtcdCluster runs three `meridian etcd` processes as one cluster, writes
// through one member and reads through another, kills the raft leader by PID
// and shows that the two survivors elect a new leader and keep serving
// writes. The killed member then restarts on its data and catches up, and
// SIGTERM stops every member cleanly.
func TestEtcdCluster(t *testing.T) {
	bed := StartBed(t, BedConfig{Binary: meridianBin,
		Regions: []RegionConfig{{Name: "r1", EtcdMembers: 3}}})
	members := bed.Region("r1").Etcd
	t.Logf("three members ready in %v", bed.StartedIn.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The cluster is up when a quorum read through a member succeeds.
	began := time.Now()
	s1 := bed.Dial(ctx, []string{members[0].ClientURL})
	s2 := bed.Dial(ctx, []string{members[1].ClientURL})
	t.Logf("cluster serving %v after the members were ready", time.Since(began).Round(time.Millisecond))
	key := meta.GlobalKey("clusters", "us-east")
	if _, err := s1.Create(ctx, key, []byte(`{"v":1}`), meta.NoLease); err != nil {
		t.Fatalf("write through %s: %v", members[0].Name, err)
	}
	kv, err := s2.Get(ctx, key)
	if err != nil || string(kv.Value) != `{"v":1}` {
		t.Fatalf("read through %s: %+v, %v", members[1].Name, kv, err)
	}

	// Kill the leader: the hardest single failure, since the survivors must
	// elect a new one before they can serve writes again.
	killed, survivors := etcdLeader(ctx, t, s1, members)
	t.Logf("killing leader %s (pid %d)", killed.Name, killed.PID())
	killed.Kill()
	began = time.Now()

	w := bed.Dial(ctx, []string{survivors[0].ClientURL})
	r := bed.Dial(ctx, []string{survivors[1].ClientURL})
	key2 := meta.GlobalKey("clusters", "eu-west")
	if err := createRetrying(ctx, w, key2, "after failover"); err != nil {
		t.Fatalf("write after killing the leader: %v", err)
	}
	t.Logf("write committed %v after the leader was killed", time.Since(began).Round(time.Millisecond))
	if kv, err := r.Get(ctx, key2); err != nil || string(kv.Value) != "after failover" {
		t.Fatalf("read after killing the leader: %+v, %v", kv, err)
	}
	if kv, err := r.Get(ctx, key); err != nil || string(kv.Value) != `{"v":1}` {
		t.Fatalf("earlier write lost after failover: %+v, %v", kv, err)
	}

	// The killed member restarts on its own data and serves what was written
	// while it was down (a linearizable read waits until it has caught up).
	began = time.Now()
	killed.Restart(ctx)
	k := bed.Dial(ctx, []string{killed.ClientURL})
	if kv, err := k.Get(ctx, key2); err != nil || string(kv.Value) != "after failover" {
		t.Fatalf("read through the restarted %s: %+v, %v", killed.Name, kv, err)
	}
	t.Logf("restarted %s served the failover write %v after its start", killed.Name, time.Since(began).Round(time.Millisecond))

	// SIGTERM shuts every member down cleanly: exit status 0.
	began = time.Now()
	for _, m := range members {
		m.Terminate()
	}
	for _, m := range members {
		if err := m.Wait(ctx); err != nil {
			t.Errorf("%s after SIGTERM: %v", m.Name, err)
		}
	}
	t.Logf("all members exited %v after SIGTERM", time.Since(began).Round(time.Millisecond))
}

// createRetrying creates key, retrying while the cluster elects a leader. A
// retry after a lost reply may find the key already written by the attempt
// before: that counts as success if the value is ours.
func createRetrying(ctx context.Context, s meta.Store, key, value string) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Create(actx, key, []byte(value), meta.NoLease)
		cancel()
		if errors.Is(err, meta.ErrExists) {
			kv, gerr := s.Get(ctx, key)
			if gerr == nil && bytes.Equal(kv.Value, []byte(value)) {
				return nil
			}
			return err
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Until a leader is elected, attempts fail fast; pace them.
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}
