package remote

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
