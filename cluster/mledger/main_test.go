package mledger

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
)

// TestMain fails the run if any goroutine outlives the tests: every
// goroutine has an owner that stops it and waits for it.
func TestMain(m *testing.M) { testkit.Main(m) }
