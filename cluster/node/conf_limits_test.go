package node_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/global"
)

// TestApplyPulsarConfBounds: Pulsar's settings for the broker's bounds on
// work set their Config fields, and a value out of range is an error.
func TestApplyPulsarConfBounds(t *testing.T) {
	_, cfg, ignored, err := applyConf(t, `
maxConcurrentLookupRequest=100
maxConcurrentTopicLoadRequest=7
brokerMaxConnections=5000
brokerMaxConnectionsPerIp=50
maxPendingPublishRequestsPerConnection=0
maxNumPartitionsPerPartitionedTopic=64
maxHttpServerConnections=100
maxProducersPerTopic=3
maxConsumersPerTopic=4
maxConsumersPerSubscription=5
subscribeThrottlingRatePerConsumer=6
subscribeRatePeriodPerConsumerInSecond=20
maxTopicsPerNamespace=9
`)
	if err != nil || len(ignored) != 0 {
		t.Fatalf("%v, ignored %v", err, ignored)
	}
	b := cfg.Broker
	got := [5]int{cfg.Service.MaxConcurrentLookups, cfg.Service.MaxConcurrentTopicLoads, b.MaxConnections, b.MaxConnectionsPerIP, b.MaxPendingPublishes}
	if want := [5]int{100, 7, 5000, 50, 0}; got != want {
		t.Fatalf("lookups, topic loads, connections, per IP, pending publishes = %v, want %v", got, want)
	}
	if n, h := cfg.Service.Policies.MaxNumPartitions, cfg.Web.MaxConnections; n != 64 || h != 100 {
		t.Fatalf("maxNumPartitionsPerPartitionedTopic, maxHttpServerConnections: %d, %d, want 64, 100", n, h)
	}
	if p := cfg.Service.Policies; p.MaxProducersPerTopic != 3 || p.MaxConsumersPerTopic != 4 || p.MaxConsumersPerSubscription != 5 {
		t.Fatalf("maxProducersPerTopic, maxConsumersPerTopic, maxConsumersPerSubscription: %+v, want 3, 4, 5", p)
	}
	if r := cfg.Service.Policies.SubscribeRate; r != (global.SubscribeRate{SubscribeThrottlingRatePerConsumer: 6, RatePeriodInSecond: 20}) {
		t.Fatalf("subscribeThrottlingRatePerConsumer, subscribeRatePeriodPerConsumerInSecond: %+v, want 6 per 20", r)
	}
	if n := cfg.Service.Policies.MaxTopicsPerNamespace; n != 9 {
		t.Fatalf("maxTopicsPerNamespace: %d, want 9", n)
	}
	def := node.DefaultBrokerConfig("localhost")
	if d := def.Broker; def.Service.MaxConcurrentLookups != 50_000 || def.Service.MaxConcurrentTopicLoads != 5000 ||
		d.MaxConnections != 10000 || d.MaxConnectionsPerIP != 2000 || d.MaxPendingPublishes != 1000 ||
		def.Service.Policies.MaxNumPartitions != 1000 {
		t.Fatalf("defaults %+v, %d: want Pulsar's, and connection bounds on", d, def.Service.MaxConcurrentTopicLoads)
	}
	for _, text := range []string{"maxConcurrentLookupRequest=0", "maxConcurrentTopicLoadRequest=0", "brokerMaxConnections=-1",
		"brokerMaxConnectionsPerIp=x", "maxPendingPublishRequestsPerConnection=-5", "maxNumPartitionsPerPartitionedTopic=-1",
		"maxHttpServerConnections=-1", "maxProducersPerTopic=-1", "maxConsumersPerSubscription=x",
		"subscribeThrottlingRatePerConsumer=-1", "subscribeRatePeriodPerConsumerInSecond=0", "maxTopicsPerNamespace=-1"} {
		if _, _, _, err := applyConf(t, text); !errors.Is(err, node.ErrConf) || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want ErrConf naming it", text, err)
		}
	}
}
