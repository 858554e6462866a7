package broker_test

import (
	"testing"

	"github.com/meridian-mq/meridian/testkit"
	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine outlives the tests. The broker's
// own goroutines all have owners. Three of pulsar-client-go's outlive its
// Close, and are the client's: a producer's send-timeout timer, for up to
// SendTimeout; a reconnecting producer's lookup, which retries on a
// context of its own for up to the client's OperationTimeout
// (rpcClient.requestToHost uses context.Background()); and, for good, a
// consumer's "connected" notice when the consumer is closed while it
// reconnects (partitionConsumer.grabConn sends on connectedCh from a
// goroutine that nothing else selects on, once the dispatcher has gone).
func TestMain(m *testing.M) {
	testkit.Main(m,
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionProducer).failTimeoutMessages"),
		goleak.IgnoreAnyFunction("github.com/apache/pulsar-client-go/pulsar/internal.(*rpcClient).requestToHost"),
		goleak.IgnoreTopFunction("github.com/apache/pulsar-client-go/pulsar.(*partitionConsumer).grabConn.func1"))
}
