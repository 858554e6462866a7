package mledger

import (
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// newEtcdEnv is an env whose metadata store is a real (embedded) etcd, so
// that the CAS, watch and delete paths meet etcd's own semantics. Bookies
// stay in memory.
func newEtcdEnv(t testing.TB) *env {
	t.Helper()
	cfg := meta.DefaultEmbedConfig()
	cfg.DataDir = t.TempDir()
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.Logger = testLogger(t)
	emb, err := meta.StartEmbed(t.Context(), cfg)
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(func() { emb.Close() })
	dcfg := meta.DefaultEtcdConfig()
	dcfg.Logger = testLogger(t)
	store, err := meta.Dial(t.Context(), emb.Endpoints(), dcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return newEnvOn(t, store, 3)
}

// TestOnEtcd runs the ownership, crash, retention and deletion tests with
// etcd as the metadata store.
func TestOnEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts embedded etcd")
	}
	t.Run("SplitBrain", func(t *testing.T) { testSplitBrain(t, newEtcdEnv) })
	t.Run("CrashRecovery", func(t *testing.T) { testCrashRecovery(t, newEtcdEnv, 1) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, newEtcdEnv) })
	t.Run("CursorOwnershipLost", func(t *testing.T) { testCursorOwnershipLost(t, newEtcdEnv) })
	t.Run("Terminate", func(t *testing.T) { testTerminate(t, newEtcdEnv) })
	t.Run("DeleteTopic", func(t *testing.T) { testDeleteTopic(t, newEtcdEnv) })
	t.Run("TailerAcrossRollovers", func(t *testing.T) { testTailerAcrossRollovers(t, newEtcdEnv) })
}
