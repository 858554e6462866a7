package auth

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
)

// TestMain fails the package's tests if any goroutine outlives them (the TLS
// tests run a server side per handshake).
func TestMain(m *testing.M) { testkit.Main(m) }
