package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
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
