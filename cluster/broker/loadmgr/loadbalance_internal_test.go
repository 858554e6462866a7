package loadmgr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

func TestBalanceConfigValidate(t *testing.T) {
	if err := DefaultBalanceConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(*BalanceConfig){
		"report interval too short":         func(c *BalanceConfig) { c.ReportInterval = time.Millisecond },
		"shedding faster than reports":      func(c *BalanceConfig) { c.SheddingInterval = c.ReportInterval / 2 },
		"threshold zero":                    func(c *BalanceConfig) { c.SheddingThreshold = 0 },
		"threshold over 100":                func(c *BalanceConfig) { c.SheddingThreshold = 101 },
		"negative grace period":             func(c *BalanceConfig) { c.SheddingGracePeriod = -time.Second },
		"negative minimum throughput":       func(c *BalanceConfig) { c.MinSheddingThroughput = -1 },
		"no topics per bundle":              func(c *BalanceConfig) { c.BundleMaxTopics = 0 },
		"no sessions per bundle":            func(c *BalanceConfig) { c.BundleMaxSessions = 0 },
		"no message rate per bundle":        func(c *BalanceConfig) { c.BundleMaxMsgRate = 0 },
		"no throughput per bundle":          func(c *BalanceConfig) { c.BundleMaxThroughput = 0 },
		"no bundles":                        func(c *BalanceConfig) { c.MaxBundles = 0 },
		"more bundles than a namespace has": func(c *BalanceConfig) { c.MaxBundles = 1025 },
	} {
		c := DefaultBalanceConfig()
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestParseBundleName(t *testing.T) {
	tenant, ns, b, err := parseBundleName("public/default/0x00000000_0x40000000")
	if err != nil || tenant != "public" || ns != "default" || b.Lower != 0 || b.Upper != 0x40000000 {
		t.Fatalf("parse: %s %s %v %v", tenant, ns, b, err)
	}
	for _, bad := range []string{"public/default", "public/default/0x1", "a/b/c/0x0_0x1", "public/default/0x2_0x1"} {
		if _, _, _, err := parseBundleName(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}

// TestUpdateRecordAfterLostAnswer: a registration write that landed though
// its caller gave up on it (a timeout) does not stop later writes.
func TestUpdateRecordAfterLostAnswer(t *testing.T) {
	store := metatest.Memory(t)
	ctx := context.Background()
	o := testOwnership(t, store, "b1", func() {})
	// A write of ours lands, but we never learn its revision.
	kv, err := store.Get(ctx, o.brokerKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(ctx, o.brokerKey(), kv.Value, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if err := o.updateRecord(ctx, func(r *BrokerRecord) { r.Draining = true }); err != nil {
		t.Fatal(err)
	}
	brokers, err := liveBrokers(ctx, store, testRegion)
	if err != nil || len(brokers) != 1 || !brokers[0].Draining {
		t.Fatalf("registration %+v, %v: want the update written", brokers, err)
	}
}
