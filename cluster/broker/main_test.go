package broker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests. The broker's
// own goroutines all have owners; pulsar-client-go's producers keep a send
// timeout timer for up to SendTimeout after Close, which is the client's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"))
}
