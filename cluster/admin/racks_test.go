package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
	"github.com/meridian-mq/meridian/cluster/ledger"
)

// TestBookieRacksInfo walks Pulsar's racks-info routes: a registered
// bookie starts in group "default"; set-bookie-rack moves it to another
// group with its rack and hostname, which the whole map and the bookie's
// own answer show; delete puts it back. Bad input is a 4xx with Pulsar's
// reason, and changes nothing.
func TestBookieRacksInfo(t *testing.T) {
	srv := bookiesAdminServer(t, admin.DefaultConfig())
	do := func(method, path, body string) (int, string) {
		t.Helper()
		code, b, _ := callAt(t, srv.URL, method, path, body)
		return code, b
	}
	racks := func() map[string]map[string]autorecovery.BookieRack {
		t.Helper()
		code, body := do("GET", "/admin/v2/bookies/racks-info", "")
		var m map[string]map[string]autorecovery.BookieRack
		if code != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("racks-info: %d %s", code, body)
		}
		return m
	}
	var address string
	var registered autorecovery.BookieRack
	for a, r := range racks()["default"] {
		address, registered = a, r
		break
	}
	if address == "" {
		t.Fatal("no registered bookie in group default")
	}
	path := "/admin/v2/bookies/racks-info/" + address
	t.Cleanup(func() { do("DELETE", path, "") }) // leaves the shared region as it was, should a check fail

	for _, c := range []struct {
		method, path, body string
		code               int
		reason             string
	}{
		{"POST", path, `{"rack":"r1"}`, http.StatusPreconditionFailed, "Bookie 'group' parameters is missing"},
		{"POST", path + "?group=", `{"rack":"r1"}`, http.StatusPreconditionFailed, "a bookie group is required"},
		{"POST", "/admin/v2/bookies/racks-info/no-port?group=g1", `{"rack":"r1"}`, http.StatusPreconditionFailed, `bookie \"no-port\" is not an address host:port`},
		{"POST", path + "?group=g1", ``, http.StatusBadRequest, "a JSON body is required"},
		{"POST", path + "?group=g1", `{"rack":`, http.StatusBadRequest, "malformed JSON body"},
		{"GET", "/admin/v2/bookies/racks-info/nobody:1", "", http.StatusNotFound, "Bookie address not found: nobody:1"},
		{"DELETE", "/admin/v2/bookies/racks-info/nobody:1", "", http.StatusNotFound, "Bookie address not found: nobody:1"},
	} {
		if code, body := do(c.method, c.path, c.body); code != c.code || !strings.Contains(body, c.reason) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", c.method, c.path, c.body, code, body, c.code, c.reason)
		}
	}
	if m := racks(); m["default"][address] != registered || len(m) != 1 {
		t.Fatalf("bad input changed racks-info: %v", m)
	}

	if code, body := do("POST", path+"?group=g1", `{"rack":"r9","hostname":"h9"}`); code != http.StatusNoContent {
		t.Fatalf("set-bookie-rack: %d %s", code, body)
	}
	want := autorecovery.BookieRack{Rack: "r9", Hostname: "h9"}
	if m := racks(); m["g1"][address] != want {
		t.Fatalf("racks-info after set: %v, want %s in g1 as %+v", m, address, want)
	} else if _, still := m["default"][address]; still {
		t.Fatalf("racks-info after set: %s still in default: %v", address, m)
	}
	if code, body := do("GET", path, ""); code != http.StatusOK || body != `{"rack":"r9","hostname":"h9"}` {
		t.Errorf("get-bookie-rack: %d %s", code, body)
	}
	if code, body := do("DELETE", path, ""); code != http.StatusNoContent {
		t.Fatalf("delete-bookie-rack: %d %s", code, body)
	}
	if m := racks(); m["default"][address] != registered || len(m) != 1 {
		t.Fatalf("racks-info after delete: %v, want %s back in default as %+v", m, address, registered)
	}
}

// TestNamespaceBookieAffinity: a namespace whose bookie affinity group
// names group A (one bookie) topped up by group B (another) writes its
// topics' ledgers of ensemble 2 on exactly those two bookies, of the
// region's three, as the ledger metadata shows; a group without a primary
// is refused and changes nothing; pulsaradmin's delete removes the group.
func TestNamespaceBookieAffinity(t *testing.T) {
	srv := bookiesAdminServer(t, admin.DefaultConfig())
	set := func(method, path, body string) {
		t.Helper()
		if code, b, _ := callAt(t, srv.URL, method, path, body); code != http.StatusNoContent {
			t.Fatalf("%s %s: %d %s", method, path, code, b)
		}
	}
	code, body, _ := callAt(t, srv.URL, "GET", "/admin/v2/bookies/racks-info", "")
	var racks map[string]map[string]autorecovery.BookieRack
	if code != http.StatusOK || json.Unmarshal([]byte(body), &racks) != nil || len(racks["default"]) < 3 {
		t.Fatalf("racks-info: %d %s; want three bookies in group default", code, body)
	}
	addresses := slices.Sorted(maps.Keys(racks["default"]))
	primary, secondary := "affinity-a-"+uniq(), "affinity-b-"+uniq()
	want := map[string]bool{}
	for i, group := range []string{primary, secondary} {
		path := "/admin/v2/bookies/racks-info/" + addresses[i]
		set("POST", path+"?group="+group, `{"rack":""}`)
		t.Cleanup(func() { callAt(t, srv.URL, "DELETE", path, "") })
		want[racks["default"][addresses[i]].Hostname] = true // the bookie's id
	}

	ns := newNamespace(t, "affinity")
	adm := newAdmin(t, web.URL)
	if err := adm.Namespaces().SetPersistence(ns, utils.PersistencePolicies{BookkeeperEnsemble: 2, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 1}); err != nil {
		t.Fatal(err)
	}
	group := utils.BookieAffinityGroupData{BookkeeperAffinityGroupPrimary: primary, BookkeeperAffinityGroupSecondary: secondary}
	if err := adm.Namespaces().SetBookieAffinityGroup(ns, group); err != nil {
		t.Fatal(err)
	}
	p := "/admin/v2/namespaces/" + ns + "/persistence/bookieAffinity"
	if status, body := call(t, "POST", p, `{"bookkeeperAffinityGroupSecondary":"x"}`); status != http.StatusPreconditionFailed ||
		!strings.Contains(body, "bookkeeperAffinityGroupPrimary") {
		t.Errorf("a group without a primary: %d %s, want 412 naming bookkeeperAffinityGroupPrimary", status, body)
	}
	if got, err := adm.Namespaces().GetBookieAffinityGroup(ns); err != nil || got == nil || *got != group {
		t.Fatalf("bookie affinity group: %+v, %v; want %+v", got, err, group)
	}

	client := newClient(t, region.ServiceURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Three topics, so that placement by chance (one in three for each
	// ledger of two out of three bookies) does not pass the test.
	for i := range 3 {
		topic := fmt.Sprintf("persistent://%s/t%d", ns, i)
		// The broker's bookie directory sees the groups through its
		// watch: until it does, the group has no bookie and the ledger
		// cannot be created, so the first producer may be refused.
		var prod pulsar.Producer
		for prod == nil {
			var err error
			if prod, err = client.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err != nil && ctx.Err() != nil {
				t.Fatalf("producer on %s: %v", topic, err)
			}
		}
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		prod.Close()
		stats, err := adm.Topics().GetInternalStats(topicName(t, topic))
		if err != nil || len(stats.Ledgers) == 0 {
			t.Fatalf("internal stats %+v, %v", stats, err)
		}
		for _, l := range stats.Ledgers {
			md := ledgerMetadata(t, l.LedgerID)
			if md.BookieGroups != (ledger.Groups{Primary: primary, Secondary: secondary}) {
				t.Errorf("ledger %d: placed in %v, want %s and %s", l.LedgerID, md.BookieGroups, primary, secondary)
			}
			for _, f := range md.Fragments {
				for _, b := range f.Ensemble {
					if !want[b] {
						t.Errorf("ledger %d: ensemble %v has %s, outside the groups' bookies %v", l.LedgerID, f.Ensemble, b, want)
					}
				}
			}
		}
	}
	if err := adm.Namespaces().DeleteBookieAffinityGroup(ns); err != nil {
		t.Fatalf("delete-bookie-affinity-group: %v", err)
	}
	if got, err := adm.Namespaces().GetBookieAffinityGroup(ns); err == nil && got != nil && *got != (utils.BookieAffinityGroupData{}) {
		t.Errorf("bookie affinity group after delete: %+v", got)
	}
}
