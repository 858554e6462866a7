package loadmgr

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
)

// TestMain fails the run if a goroutine outlives the tests.
func TestMain(m *testing.M) { testkit.Main(m) }
