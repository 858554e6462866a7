package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them (the TLS
// tests run a server side per handshake).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
