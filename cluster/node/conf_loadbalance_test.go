package node_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/node"
)

// TestApplyPulsarConfLoadBalance: Pulsar's load balancer settings set the
// broker's LoadBalance fields, in Pulsar's units, and a value out of range
// is an error.
func TestApplyPulsarConfLoadBalance(t *testing.T) {
	_, cfg, ignored, err := applyConf(t, `
loadBalancerReportUpdateMinIntervalMillis=2000
loadBalancerSheddingEnabled=false
loadBalancerSheddingIntervalMinutes=3
loadBalancerBrokerThresholdShedderPercentage=15
loadBalancerSheddingGracePeriodMinutes=0
loadBalancerBundleUnloadMinThroughputThreshold=0.5
loadBalancerAutoBundleSplitEnabled=false
loadBalancerNamespaceBundleMaxTopics=10
loadBalancerNamespaceBundleMaxSessions=20
loadBalancerNamespaceBundleMaxMsgRate=300
loadBalancerNamespaceBundleMaxBandwidthMbytes=2
loadBalancerNamespaceMaximumBundles=16
`)
	if err != nil || len(ignored) != 0 {
		t.Fatalf("%v, ignored %v", err, ignored)
	}
	want := loadmgr.BalanceConfig{
		ReportInterval: 2 * time.Second, SheddingEnabled: false, SheddingInterval: 3 * time.Minute,
		SheddingThreshold: 15, SheddingGracePeriod: 0, MinSheddingThroughput: 0.5 * (1 << 20),
		AutoBundleSplit: false, BundleMaxTopics: 10, BundleMaxSessions: 20, BundleMaxMsgRate: 300,
		BundleMaxThroughput: 2 << 20, MaxBundles: 16,
	}
	if got := cfg.Service.LoadBalance; !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadBalance %+v, want %+v", got, want)
	}
	if err := cfg.Service.LoadBalance.Validate(); err != nil {
		t.Fatal(err)
	}
	if def := node.DefaultBrokerConfig("localhost").Service.LoadBalance; !reflect.DeepEqual(def, loadmgr.DefaultBalanceConfig()) {
		t.Fatalf("default LoadBalance %+v", def)
	}
	for _, text := range []string{"loadBalancerReportUpdateMinIntervalMillis=10", "loadBalancerSheddingIntervalMinutes=0",
		"loadBalancerBrokerThresholdShedderPercentage=0", "loadBalancerBundleUnloadMinThroughputThreshold=-1",
		"loadBalancerNamespaceBundleMaxMsgRate=fast", "loadBalancerNamespaceMaximumBundles=2000", "loadBalancerSheddingEnabled=yes"} {
		if _, _, _, err := applyConf(t, text); !errors.Is(err, node.ErrConf) || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want ErrConf naming it", text, err)
		}
	}
}
