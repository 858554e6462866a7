package meta

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
)

// TestMain closes the shared etcd server (sharedEtcd), which outlives the
// tests that use it, then fails the run if a goroutine outlives them.
func TestMain(m *testing.M) { testkit.Main(m) }
