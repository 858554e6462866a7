//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/global"
)

// upgradeFromEnv names the environment variable that gives the revision
// TestRollingUpgrade upgrades from (a commit or a tag); upgradeFrom is its
// default.
const upgradeFromEnv = "MERIDIAN_E2E_UPGRADE_FROM"

// upgradeFrom stands for the previous release until Meridian tags
// releases: main on 5 December, before the dispatcher's rewrite (cursors
// and acks), the bookie's new add path (the journal) and the clock's
// wiring, so that what the old version stored is read by the new one.
// Move it to each release's tag.
const upgradeFrom = "2c616a6"

// TestRollingUpgrade is docs/operations.md's rolling upgrade, with
// processes in place of pods: two regions (1 etcd, 3 bookies, 2 brokers,
// 1 replicator each; a global etcd) run the binary of upgradeFrom with
// both regions publishing 150 msg/s on each of two topics replicated to
// the other, and every process is replaced by this build, one at a time,
// in the guide's order: auto-recovery paused, the etcd members, the
// bookies, the brokers (SIGTERM: each hands its bundles over first), the
// replicators, auto-recovery resumed. After each, the test waits until
// more sends are acknowledged. No send may fail, and the checker finds
// every acknowledged message once, in order, in both regions.
func TestRollingUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	rev := cmp.Or(os.Getenv(upgradeFromEnv), upgradeFrom)
	began := time.Now()
	old, err := BuildMeridianAt(t.TempDir(), rev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built meridian at %s in %v", rev, time.Since(began).Round(time.Millisecond))

	var regions []RegionConfig
	for _, name := range []string{"r1", "r2"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 3, Brokers: 2, Replicators: 1})
	}
	bed := StartBed(t, BedConfig{Binary: old, Regions: regions, GlobalEtcd: true, LocalClients: true})
	g := &geoBed{Bed: bed, clients: map[string]pulsar.Client{}}
	for _, r := range bed.Regions {
		// Every broker of the region in the URL: a client's lookup goes
		// on while one of them restarts.
		g.clients[r.Name] = NewClient(t, r.AllBrokersURL())
	}
	gs := bed.GlobalStore(ctx)
	if _, err := gs.CreateTenant(ctx, geoTenant, global.TenantInfo{AllowedClusters: geoNamespaces["pair"]}); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.CreateNamespace(ctx, geoTenant, "pair", global.Policies{ReplicationClusters: geoNamespaces["pair"]}); err != nil {
		t.Fatal(err)
	}
	rec := bed.Recorder()
	var topics []string
	var producers []*Producer
	var dest []*arrivals
	for _, from := range []string{"r1", "r2"} {
		to := map[string]string{"r1": "r2", "r2": "r1"}[from]
		for i := range 2 {
			topic := fmt.Sprintf("persistent://%s/pair/upgrade-%s-%d", geoTenant, from, i)
			waitProducer(ctx, t, g.clients[from], topic)
			KeepForReadBack(ctx, t, g.clients[from], topic) // and the arrivals keep it in to
			topics = append(topics, topic)
			dest = append(dest, g.startArrivals(ctx, t, to, topic))
			producers = append(producers, g.startRate(ctx, t, rec, from, topic, fmt.Sprintf("%s-upgrade-%d", from, i), 150)...)
		}
	}
	rec.WaitAcknowledged(ctx, t, 2000, "before the upgrade")

	// The guide's order.
	for _, r := range bed.Regions {
		admin(ctx, t, r.Brokers[0], "bookies", "autorecovery", "disable")
	}
	steps := []*Process{bed.Global}
	for _, r := range bed.Regions {
		steps = append(steps, r.Etcd...)
	}
	for _, r := range bed.Regions {
		steps = append(steps, r.Bookies...)
	}
	for _, r := range bed.Regions {
		for _, b := range r.Brokers {
			steps = append(steps, b.Process)
		}
	}
	for _, r := range bed.Regions {
		steps = append(steps, r.Replicators...)
	}
	for _, p := range steps {
		start := time.Now()
		p.Upgrade(ctx, meridianBin)
		ready := time.Now()
		// Flow goes on: every producer's next 100 messages or so.
		rec.WaitAcknowledged(ctx, t, rec.Acknowledged()+4*100, "after upgrading "+p.Name)
		t.Logf("%s upgraded: stopped and ready again in %v, sends flowing %v later",
			p.Name, ready.Sub(start).Round(time.Millisecond), time.Since(ready).Round(time.Millisecond))
	}
	for _, r := range bed.Regions {
		admin(ctx, t, r.Brokers[0], "bookies", "autorecovery", "enable")
	}
	t.Logf("every process upgraded from %s in %v", rev, time.Since(began).Round(time.Second))

	stopProducers(ctx, t, producers)
	for i, a := range dest {
		waitArrived(ctx, t, a, messages(ackedSends(rec, topics[i])), "at the end")
	}
	h := rec.History()
	sendErrors(t, h)
	g.verify(ctx, t, rec, topics...)
	t.Logf("%d messages acknowledged, none lost or stored twice", len(ackedSends(rec, "")))
}
