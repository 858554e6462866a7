package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// TestAutoFailover turns a namespace's automatic failover on, reads it and
// turns it off, and checks that each request it cannot honour is refused
// with Pulsar's status and a reason, and changes nothing: no active
// region, no fallback, fewer than three replication clusters (where no
// majority exists), a broker of the set that holds no failover session
// (it predates automatic failover), a delay below a second.
func TestAutoFailover(t *testing.T) {
	id := uniq()
	east, west := "af-east-"+id, "af-west-"+id
	tenant := "af-" + id
	ns := "/admin/v2/namespaces/" + tenant + "/ns"
	path := ns + "/autoFailover"
	for _, c := range []string{east, west} {
		if status, body := call(t, "PUT", "/admin/v2/clusters/"+c, `{"serviceUrl":"http://`+c+`:8080"}`); status != http.StatusNoContent {
			t.Fatalf("create cluster %s: %d %s", c, status, body)
		}
	}
	if status, body := call(t, "PUT", "/admin/v2/tenants/"+tenant,
		`{"allowedClusters":["standalone","`+east+`","`+west+`"]}`); status != http.StatusNoContent {
		t.Fatalf("create tenant: %d %s", status, body)
	}
	if status, body := call(t, "PUT", ns, `{"replication_clusters":["standalone","`+east+`"]}`); status != http.StatusNoContent {
		t.Fatalf("create namespace: %d %s", status, body)
	}
	t.Cleanup(func() {
		call(t, "DELETE", path, "")
		call(t, "DELETE", ns, "")
		call(t, "DELETE", "/admin/v2/tenants/"+tenant, "")
		for _, c := range []string{east, west} {
			call(t, "DELETE", "/admin/v2/clusters/"+c, "")
		}
	})
	refused := func(what, method, path, body string, want int) {
		t.Helper()
		before := snapshot(t, []string{ns})
		status, answer := call(t, method, path, body)
		var r struct {
			Reason string `json:"reason"`
		}
		if status != want || json.Unmarshal([]byte(answer), &r) != nil || r.Reason == "" {
			t.Fatalf("%s: status %d body %s; want %d with a reason", what, status, answer, want)
		}
		if after := snapshot(t, []string{ns}); after != before {
			t.Fatalf("%s changed the namespace:\nbefore %s\nafter  %s", what, before, after)
		}
	}

	if status, body := call(t, "GET", path, ""); status != http.StatusNoContent {
		t.Fatalf("off: %d %s, want 204", status, body)
	}
	refused("no active region", "POST", path, `{"delaySeconds":30}`, 412)
	if status, body := call(t, "POST", ns+"/activeRegion", `{"activeRegion":"standalone"}`); status != http.StatusNoContent {
		t.Fatalf("set the active region: %d %s", status, body)
	}
	refused("no fallback region", "POST", path, `{"delaySeconds":30}`, 412)
	if status, body := call(t, "POST", ns+"/activeRegion", `{"activeRegion":"standalone","fallbackRegions":["`+east+`"]}`); status != http.StatusNoContent {
		t.Fatalf("set the fallback: %d %s", status, body)
	}
	refused("two replication clusters", "POST", path, `{"delaySeconds":30}`, 412)
	if status, body := call(t, "POST", ns+"/replication", `["standalone","`+east+`","`+west+`"]`); status != http.StatusNoContent {
		t.Fatalf("a third replication cluster: %d %s", status, body)
	}
	refused("a delay of 0", "POST", path, `{"delaySeconds":0}`, 400)
	refused("a malformed body", "POST", path, `{"delaySeconds":`, 400)
	refused("regions whose brokers hold no failover session (they predate it, or are down)", "POST", path, `{"delaySeconds":30}`, 412)

	// East's and west's brokers know automatic failover: they hold sessions.
	ctx := t.Context()
	gs := region.Service().Global()
	for _, c := range []string{east, west} {
		l, err := gs.GrantLease(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Revoke(context.Background()) })
		if err := gs.CreateFailoverSession(ctx, c, global.FailoverSession{Broker: c + "-0", ServiceURL: "pulsar://" + c + "-0:6650"}, l.ID()); err != nil {
			t.Fatal(err)
		}
	}
	// East's record, kept by its leader, lists a second broker with no
	// session: one that predates automatic failover.
	setBrokers := func(url string) {
		t.Helper()
		_, rc, err := gs.UpdateCluster(ctx, east, func(d *global.ClusterData) error {
			d.BrokerServiceURL, d.MaintainedByRegion = url, true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := region.Service().Policies().Await(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	setBrokers("pulsar://" + east + "-0:6650," + east + "-old:6650")
	refused("a broker of east without a session", "POST", path, `{"delaySeconds":30}`, 412)
	setBrokers("pulsar://" + east + "-0:6650")

	if status, body := call(t, "POST", path, `{"delaySeconds":30}`); status != http.StatusNoContent {
		t.Fatalf("on: %d %s", status, body)
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusOK || body != `{"delaySeconds":30}`+"\n" && body != `{"delaySeconds":30}` {
		t.Fatalf("read: %d %q", status, body)
	}
	// What automatic failover needs cannot be taken from under it.
	refused("removing the active region", "DELETE", ns+"/activeRegion", "", 412)
	refused("dropping to two replication clusters", "POST", ns+"/replication", `["standalone","`+east+`"]`, 412)

	if status, body := call(t, "DELETE", path, ""); status != http.StatusNoContent {
		t.Fatalf("off: %d %s", status, body)
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusNoContent {
		t.Fatalf("after off: %d %s, want 204", status, body)
	}
}
