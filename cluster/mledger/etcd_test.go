package mledger

import (
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

// newEtcdEnv is an env whose metadata store is a real (embedded) etcd, so
// that the CAS, watch and delete paths meet etcd's own semantics. Bookies
// stay in memory. The etcd is the test's own: the tests write the same
// bookies' registrations and the same topics.
func newEtcdEnv(t testing.TB) *env {
	t.Helper()
	cfg := metatest.FastEmbedConfig()
	cfg.Logger = testLogger(t)
	emb := metatest.Start(t, cfg)
	return newEnvOn(t, metatest.Dial(t, emb.Endpoints()), 3)
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
