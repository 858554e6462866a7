package broker_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/testkit"
)

// TestClusterRecordNamesLiveBrokers: the region's leader keeps the cluster
// record its first broker created naming every live broker, so that the
// other regions reach the region while any one of them is down; once an
// operator has written the record, it is theirs and stays as they wrote it
// (loadmgr's TestClusterRecordUpkeep).
func TestClusterRecordNamesLiveBrokers(t *testing.T) {
	storage := newStorage(t)
	a, b := startBroker(t, storage), startBroker(t, storage)
	gs := a.Service().Global()
	names := func(want ...*brokertest.Broker) {
		t.Helper()
		slices.SortFunc(want, func(x, y *brokertest.Broker) int { return strings.Compare(x.ID(), y.ID()) })
		var hosts []string
		for _, r := range want {
			hosts = append(hosts, brokerAddr(r))
		}
		url := "pulsar://" + strings.Join(hosts, ",")
		testkit.WaitFor(t, "the cluster record naming "+url, func() bool {
			d, err := gs.Cluster(context.Background(), brokertest.Region)
			return err == nil && d.BrokerServiceURL == url && d.MaintainedByRegion
		})
	}
	names(a, b)
	b.Close()
	names(a)
}

// addRegion records a region name, of brokers e1 and e2 that nothing
// serves, and lets tenant public use it.
func addRegion(t *testing.T, r *brokertest.Broker, name string) {
	t.Helper()
	gs := r.Service().Global()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := gs.CreateCluster(ctx, name, global.ClusterData{
		ServiceURL: "http://e1:8080", BrokerServiceURL: "pulsar://e1:6650,e2:6650"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gs.UpdateTenant(ctx, "public", func(ti *global.TenantInfo) error {
		ti.AllowedClusters = append(ti.AllowedClusters, name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestActiveRegionRedirectNamesOneHost: a lookup in a namespace whose
// active region is another redirects to one broker of that region's
// record, the next one at each lookup: a client dials a redirect's URL as
// it is, so a list of hosts there would be unreachable.
func TestActiveRegionRedirectNamesOneHost(t *testing.T) {
	r := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addRegion(t, r, "east")
	ns := createNamespace(t, r, "activeeast", global.Policies{
		ReplicationClusters: []string{brokertest.Region, "east"}, ActiveRegion: "east"})
	topic := "persistent://" + ns + "/t"
	var got []string
	for range 3 {
		loc := lookup(t, r, topic)
		if !loc.Redirect || loc.WebURL != "http://e1:8080" {
			t.Fatalf("lookup answered %+v, want a redirect to east", loc)
		}
		got = append(got, loc.ServiceURL)
	}
	if got[0] == got[1] || got[0] != got[2] || !slices.Contains([]string{"pulsar://e1:6650", "pulsar://e2:6650"}, got[0]) {
		t.Fatalf("redirects named %q, want e1 and e2 in turn", got)
	}
	// A replicator's lookup is answered here: replication into this region
	// must not land in the active one.
	loc, err := r.Service().Lookup(ctx, mustTopic(t, topic), broker.LookupOptions{Replication: true})
	if err != nil || loc.Redirect || loc.ServiceURL != r.ServiceURL() {
		t.Fatalf("replication lookup answered %+v, %v; want this broker, %s", loc, err, r.ServiceURL())
	}
}
