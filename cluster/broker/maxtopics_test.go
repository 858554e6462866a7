package broker_test

import (
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/global"
)

// TestMaxTopicsPerNamespaceAutoCreation: the limit holds for the topics
// clients create: a consumer's non-partitioned topic, and a producer's
// partitioned one (auto-created with its partitions, which count) beyond
// it, both refused with NotAllowed.
func TestMaxTopicsPerNamespaceAutoCreation(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	const reason = "NotAllowedError: Exceed maximum number of topics in namespace."
	limit := global.Extra{global.ExtraMaxTopicsPerNamespace: []byte(`1`)}

	plain := createNamespace(t, r, "maxtopics-plain", global.Policies{Extra: limit})
	subscribe(t, c, pulsar.ConsumerOptions{Topic: "persistent://" + plain + "/first", SubscriptionName: "s"})
	_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://" + plain + "/second", SubscriptionName: "s"})
	if err == nil || !strings.Contains(err.Error(), reason) {
		t.Fatalf("a consumer on a 2nd topic: %v; want %q", err, reason)
	}

	two := 2
	partitioned := createNamespace(t, r, "maxtopics-partitioned", global.Policies{Extra: limit,
		AutoTopicCreationOverride: &global.AutoTopicCreation{Allow: true, Type: global.Partitioned, Partitions: &two}})
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + partitioned + "/t"})
	// pulsar-client-go shows a PARTITIONED_METADATA error's code alone.
	if err == nil || !strings.Contains(err.Error(), "NotAllowedError") {
		t.Fatalf("a producer auto-creating 2 partitions under a limit of 1: %v; want NotAllowedError", err)
	}
	if tp, ok := r.Service().Policies().Topic(mustTopic(t, "persistent://"+partitioned+"/t")); ok {
		t.Fatalf("the refused partitioned topic was created: %+v", tp)
	}
}
