//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/global"
)

// TestGlobalStoreMemberPerRegion runs three regions (20 ms links, one
// broker each) whose global store has one member in each region
// (BedConfig.GlobalMembers), and loses r1 twice: a link cut
// (Bed.CutRegion), then a SIGKILL of every process of r1, its member
// included. Each time the other two members keep a quorum: a write
// through r2's member succeeds, and r3's broker serves it (r1's member is
// made the leader first, so the two must elect one). r1's member is
// out while cut (a quorum read through it alone fails), and once r1 is
// back it rejoins: a linearizable read through it, and r1's broker, see
// what was written without it.
func TestGlobalStoreMemberPerRegion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	var regions []RegionConfig
	for _, name := range []string{"r1", "r2", "r3"} {
		regions = append(regions, RegionConfig{Name: name, EtcdMembers: 1, Bookies: 1, Brokers: 1})
	}
	bed := StartBed(t, BedConfig{Binary: meridianBin, Regions: regions, GlobalEtcd: true, GlobalMembers: 3})
	for _, r := range bed.Regions {
		for _, l := range r.InboundLinks() {
			if err := l.SetShape(Shape{Latency: wanLatency}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The members talk to each other through the links, both ways: each
	// member's peer link carries the other two's raft messages.
	for _, r := range bed.Regions {
		waitUntil(ctx, t, time.Minute, r.GlobalPeerLink.Name()+" to carry raft traffic both ways", func() bool {
			b := r.GlobalPeerLink.Bytes()
			return b.Up > 0 && b.Down > 0
		})
	}
	r1, r2, r3 := bed.Region("r1"), bed.Region("r2"), bed.Region("r3")
	admin := func(r *Region) pulsaradmin.Client {
		a, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: r.Brokers[0].WebURL()})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// served waits until r's broker lists tenant, read from its watched
	// copy of the global store.
	served := func(r *Region, tenant, when string) time.Duration {
		a := admin(r)
		return waitUntil(ctx, t, 2*time.Minute, fmt.Sprintf("%s's broker to list tenant %s %s", r.Name, tenant, when), func() bool {
			ts, err := a.Tenants().List()
			return err == nil && slices.Contains(ts, tenant)
		})
	}
	r1Processes := func() []*Process {
		out := append([]*Process{}, r1.Etcd...)
		out = append(out, r1.GlobalMember)
		out = append(out, r1.Bookies...)
		return append(out, r1.Brokers[0].Process)
	}
	faults := []struct {
		name, tenant string
		fault, heal  func()
	}{
		{"r1 cut off", "during-cut", func() { bed.CutRegion("r1") }, func() { bed.RestoreRegion("r1") }},
		{"r1 SIGKILLed", "during-kill", func() {
			for _, p := range r1Processes() {
				p.Kill()
			}
		}, func() {
			for _, p := range r1Processes() {
				p.Restart(ctx)
			}
		}},
	}
	storeCfg := global.DefaultConfig()
	members := map[string]*meta.Etcd{}
	for _, r := range bed.Regions {
		members[r.Name] = bed.Dial(ctx, []string{r.GlobalMember.ClientURL})
	}
	for _, f := range faults {
		// r1's member leads: the two others must elect a leader before
		// they take a write, the hardest loss.
		leadGlobalStore(ctx, t, members, "r1")
		f.fault()
		began := time.Now()
		gs, err := global.NewStore(bed.Dial(ctx, []string{r2.GlobalMember.ClientURL}), storeCfg)
		if err != nil {
			t.Fatal(err)
		}
		for {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := gs.CreateTenant(actx, f.tenant, global.TenantInfo{AllowedClusters: []string{"r1", "r2", "r3"}})
			acancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			// A retry after a lost reply finds the tenant made by the attempt before.
			if _, gerr := gs.Tenant(ctx, f.tenant); gerr == nil {
				break
			}
			select {
			case <-time.After(100 * time.Millisecond): // the two members may be electing a leader
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: no write through r2's member: %v", f.name, ctx.Err())
		}
		wrote := time.Since(began)
		in3 := served(r3, f.tenant, "after: "+f.name)
		t.Logf("%s: a write through r2's member committed %v after the fault; r3's broker served it %v later",
			f.name, wrote.Round(time.Millisecond), in3.Round(time.Millisecond))
		if f.tenant == "during-cut" {
			// Cut off, r1's member has no quorum: it serves no quorum read.
			cfg := meta.DefaultEtcdConfig()
			cfg.Logger, cfg.DialTimeout = nil, 3*time.Second
			if s, err := meta.Dial(ctx, []string{r1.GlobalMember.ClientURL}, cfg); err == nil {
				s.Close()
				t.Fatalf("%s: r1's member served a quorum read while cut off", f.name)
			}
		}

		f.heal()
		began = time.Now()
		g1, err := global.NewStore(bed.Dial(ctx, []string{r1.GlobalMember.ClientURL}), storeCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g1.Tenant(ctx, f.tenant); err != nil {
			t.Fatalf("%s: r1's member, back, does not serve what was written without it: %v", f.name, err)
		}
		rejoined := time.Since(began)
		in1 := served(r1, f.tenant, "after: "+f.name+", healed")
		t.Logf("%s, healed: r1's member served the write %v after the heal, r1's broker %v later",
			f.name, rejoined.Round(time.Millisecond), in1.Round(time.Millisecond))
	}
}
