package admin_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/autorecovery"
)

// TestStoredNamespacePolicies sets, reads and removes stored (unenforced)
// namespace policies through pulsaradmin, and checks that a refused value
// changes nothing.
func TestStoredNamespacePolicies(t *testing.T) {
	adm := newAdmin(t, web.URL)
	ns := "public/stored-" + uniq()
	if err := adm.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
	defer adm.Namespaces().DeleteNamespace(ns)
	name, err := utils.GetNamespaceName(ns)
	if err != nil {
		t.Fatal(err)
	}

	if n, err := adm.Namespaces().GetMaxProducersPerTopic(*name); err != nil || n != -1 {
		t.Fatalf("unset max producers %d, %v; want -1", n, err)
	}
	if err := adm.Namespaces().SetMaxProducersPerTopic(*name, 7); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Namespaces().GetMaxProducersPerTopic(*name); err != nil || n != 7 {
		t.Fatalf("max producers %d, %v; want 7", n, err)
	}
	err = adm.Namespaces().SetMaxProducersPerTopic(*name, -3)
	if err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("negative max producers: %v, want 412", err)
	}
	if n, _ := adm.Namespaces().GetMaxProducersPerTopic(*name); n != 7 {
		t.Fatalf("a refused value changed max producers to %d", n)
	}
	if err := adm.Namespaces().RemoveMaxProducersPerTopic(*name); err != nil {
		t.Fatal(err)
	}
	if n, _ := adm.Namespaces().GetMaxProducersPerTopic(*name); n != -1 {
		t.Fatalf("max producers after removal %d, want -1", n)
	}

	// Objects are stored as given; a body of the wrong kind is refused.
	p := "/admin/v2/namespaces/" + ns + "/persistence"
	const persistence = `{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":0}`
	if status, body := call(t, "POST", p, persistence); status != http.StatusNoContent {
		t.Fatalf("set persistence: %d %s", status, body)
	}
	if status, body := call(t, "GET", p, ""); status != http.StatusOK || body != persistence {
		t.Fatalf("persistence: %d %s", status, body)
	}
	if status, body := call(t, "POST", p, `12`); status != http.StatusPreconditionFailed {
		t.Fatalf("persistence as a number: %d %s, want 412", status, body)
	}

	// The namespace's autoSubscriptionCreation is what a topic's applied
	// value falls back to (the broker enforces it: TestAutoSubscriptionCreation).
	const noAuto = `{"allowAutoSubscriptionCreation":false}`
	topic, err := utils.GetTopicName("persistent://" + ns + "/t")
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(*topic, 0); err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, "POST", "/admin/v2/namespaces/"+ns+"/autoSubscriptionCreation", noAuto); status != http.StatusNoContent {
		t.Fatalf("set autoSubscriptionCreation: %d %s", status, body)
	}
	if status, body := call(t, "GET", "/admin/v2/persistent/"+ns+"/t/autoSubscriptionCreation?applied=true", ""); status != http.StatusOK || body != noAuto {
		t.Fatalf("a topic's applied autoSubscriptionCreation: %d %s, want the namespace's %s", status, body, noAuto)
	}

	// Properties merge on set and answer {} when none are set.
	if err := adm.Namespaces().UpdateProperties(*name, map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().UpdateProperties(*name, map[string]string{"b": "2"}); err != nil {
		t.Fatal(err)
	}
	if m, err := adm.Namespaces().GetProperties(*name); err != nil || len(m) != 2 || m["a"] != "1" || m["b"] != "2" {
		t.Fatalf("properties %v, %v", m, err)
	}
	if err := adm.Namespaces().RemoveProperties(*name); err != nil {
		t.Fatal(err)
	}
	if m, err := adm.Namespaces().GetProperties(*name); err != nil || m == nil || len(m) != 0 {
		t.Fatalf("properties after removal %v, %v; want {}", m, err)
	}

	// Pulsar's reasons for a missing namespace and tenant.
	for path, want := range map[string]string{
		"/admin/v2/namespaces/public/stored-missing/maxProducersPerTopic":  "Namespace does not exist",
		"/admin/v2/namespaces/no-such-tenant/default/maxProducersPerTopic": "Tenant does not exist",
	} {
		status, body := call(t, "POST", path, "1")
		var r struct{ Reason string }
		_ = json.Unmarshal([]byte(body), &r)
		if status != http.StatusNotFound || r.Reason != want {
			t.Errorf("POST %s: %d %s; want 404 %q", path, status, body, want)
		}
	}
}

// TestStoredTopicPolicies covers a stored topic policy (own and applied,
// which falls back to the namespace's) and topic properties.
func TestStoredTopicPolicies(t *testing.T) {
	adm := newAdmin(t, web.URL)
	tn := topicName(t, "persistent://public/default/stored-"+uniq())
	if err := adm.Topics().CreateWithProperties(tn, 2, map[string]string{"k1": "v1"}); err != nil {
		t.Fatal(err)
	}
	defer adm.Topics().Delete(tn, true, false)

	if n, err := adm.Topics().GetMaxProducers(tn); err != nil || n != -1 {
		t.Fatalf("unset max producers %d, %v; want -1", n, err)
	}
	if err := adm.Topics().SetMaxProducers(tn, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Topics().GetMaxProducers(tn); err != nil || n != 3 {
		t.Fatalf("max producers %d, %v", n, err)
	}
	if err := adm.Topics().RemoveMaxProducers(tn); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("public/default")
	if err := adm.Namespaces().SetMaxProducersPerTopic(*ns, 9); err != nil {
		t.Fatal(err)
	}
	defer adm.Namespaces().RemoveMaxProducersPerTopic(*ns)
	path := "/admin/v2/persistent/" + strings.TrimPrefix(tn.String(), "persistent://") + "/maxProducers"
	if status, body := call(t, "GET", path+"?applied=true", ""); status != http.StatusOK || body != "9" {
		t.Fatalf("applied max producers: %d %s; want the namespace's 9", status, body)
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusOK || body != "null" {
		t.Fatalf("own max producers: %d %s; want null", status, body)
	}

	if m, err := adm.Topics().GetProperties(tn); err != nil || m["k1"] != "v1" {
		t.Fatalf("properties at creation %v, %v", m, err)
	}
	if err := adm.Topics().UpdateProperties(tn, map[string]string{"k2": "v2"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().RemoveProperty(tn, "k1"); err != nil {
		t.Fatal(err)
	}
	if m, err := adm.Topics().GetProperties(tn); err != nil || len(m) != 1 || m["k2"] != "v2" {
		t.Fatalf("properties %v, %v; want only k2", m, err)
	}
}

// TestSubscriptionPermissions grants and revokes a subscription's roles.
func TestSubscriptionPermissions(t *testing.T) {
	adm := newAdmin(t, web.URL)
	ns, _ := utils.GetNamespaceName("public/default")
	sub := "sub-" + uniq()
	if err := adm.Namespaces().GrantSubPermission(*ns, sub, []string{"r1", "r2"}); err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().RevokeSubPermission(*ns, sub, "r1"); err != nil {
		t.Fatal(err)
	}
	m, err := adm.Namespaces().GetSubPermissions(*ns)
	if err != nil || len(m[sub]) != 1 || m[sub][0] != "r2" {
		t.Fatalf("subscription roles %v, %v; want [r2]", m[sub], err)
	}
	if err := adm.Namespaces().RevokeSubPermission(*ns, sub, "r1"); err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("revoking a role twice: %v, want 412", err)
	}
	if err := adm.Namespaces().RevokeSubPermission(*ns, sub, "r2"); err != nil {
		t.Fatal(err)
	}
	if m, _ := adm.Namespaces().GetSubPermissions(*ns); m[sub] != nil {
		t.Fatalf("roles after the last revoke %v", m[sub])
	}
}

// TestDynamicConfiguration keeps a value with '/' in it, lists it and
// deletes it; an unknown name or a value its setting does not take is
// refused with 412 and a reason, and nothing is stored (both were stored
// with a 200).
func TestDynamicConfiguration(t *testing.T) {
	const p = "/admin/v2/brokers/configuration/"
	const name = "allowAutoSubscriptionCreation"
	// A boolean takes any value, as on Pulsar (pulsaradmin's own test
	// stores a JSON document in this one).
	if status, body := call(t, "POST", p+name+"/a%2Fb", ""); status != http.StatusOK {
		t.Fatalf("set: %d %s", status, body)
	}
	status, body := call(t, "GET", p+"values", "")
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); status != http.StatusOK || err != nil || m[name] != "a/b" {
		t.Fatalf("values: %d %s", status, body)
	}
	if status, body := call(t, "GET", p, ""); status != http.StatusOK || !strings.Contains(body, `"`+name+`"`) {
		t.Fatalf("names: %d %s", status, body)
	}
	for _, bad := range []string{"someSetting/x", "defaultNumPartitions/x", "defaultNumPartitions/0", "defaultNumPartitions/1000001",
		"maxUnackedMessagesPerConsumer/-1", "allowAutoTopicCreationType/sometimes", "brokerServicePort/1"} {
		status, body := call(t, "POST", p+bad, "")
		var r struct {
			Reason string `json:"reason"`
		}
		if status != http.StatusPreconditionFailed || json.Unmarshal([]byte(body), &r) != nil || r.Reason == "" {
			t.Errorf("set %s: %d %s, want 412 with a reason", bad, status, body)
		}
	}
	if _, body := call(t, "GET", p+"values", ""); body != `{"`+name+`":"a/b"}` {
		t.Fatalf("values after the refusals: %s", body)
	}
	if status, body := call(t, "DELETE", p+name, ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, _ := call(t, "DELETE", p+name, ""); status != http.StatusNotFound {
		t.Fatalf("second delete: %d, want 404", status)
	}
	if status, _ := call(t, "DELETE", p+"someSetting", ""); status != http.StatusPreconditionFailed {
		t.Fatalf("delete of an unknown name: %d, want 412", status)
	}
}

// TestPersistenceWithinBookieGroups: a namespace's (or its topic's)
// persistence may not ask for an ensemble larger than placement can give
// in the namespace's bookie affinity. Of the region's three bookies, one
// is in group A and one in B: with affinity A alone E=2 is refused, naming
// the group and its one bookie; with A topped up by B, E=2 is taken and
// E=3 refused; without affinity E=3 is taken again. Setting an affinity
// that cannot hold the current E is taken, as Pulsar takes it: its new
// ledgers then fail to be created, with the groups named.
func TestPersistenceWithinBookieGroups(t *testing.T) {
	srv := bookiesAdminServer(t, admin.DefaultConfig())
	code, body, _ := callAt(t, srv.URL, "GET", "/admin/v2/bookies/racks-info", "")
	var racks map[string]map[string]autorecovery.BookieRack
	if code != http.StatusOK || json.Unmarshal([]byte(body), &racks) != nil || len(racks["default"]) != 3 {
		t.Fatalf("racks-info: %d %s; want three bookies in group default", code, body)
	}
	addresses := slices.Sorted(maps.Keys(racks["default"]))
	a, b := "count-a-"+uniq(), "count-b-"+uniq()
	for i, group := range []string{a, b} {
		path := "/admin/v2/bookies/racks-info/" + addresses[i]
		if code, body, _ := callAt(t, srv.URL, "POST", path+"?group="+group, `{"rack":""}`); code != http.StatusNoContent {
			t.Fatalf("set-bookie-rack: %d %s", code, body)
		}
		t.Cleanup(func() { callAt(t, srv.URL, "DELETE", path, "") })
	}

	ns := newNamespace(t, "groupcount")
	affinity := "/admin/v2/namespaces/" + ns + "/persistence/bookieAffinity"
	nsPersistence := "/admin/v2/namespaces/" + ns + "/persistence"
	topicPersistence := "/admin/v2/persistent/" + ns + "/t/persistence"
	if code, body, _ := callAt(t, srv.URL, "PUT", "/admin/v2/persistent/"+ns+"/t", ""); code != http.StatusNoContent {
		t.Fatalf("create topic: %d %s", code, body)
	}
	persistence := func(e int) string {
		return fmt.Sprintf(`{"bookkeeperEnsemble":%d,"bookkeeperWriteQuorum":1,"bookkeeperAckQuorum":1}`, e)
	}
	refused := func(path string, e int, says ...string) {
		t.Helper()
		code, body, _ := callAt(t, srv.URL, "POST", path, persistence(e))
		if code != http.StatusPreconditionFailed {
			t.Errorf("E=%d at %s: %d %s, want 412", e, path, code, body)
		}
		for _, s := range says {
			if !strings.Contains(body, s) {
				t.Errorf("E=%d at %s: %s does not say %q", e, path, body, s)
			}
		}
	}
	taken := func(path string, e int) {
		t.Helper()
		if code, body, _ := callAt(t, srv.URL, "POST", path, persistence(e)); code != http.StatusNoContent {
			t.Errorf("E=%d at %s: %d %s, want 204", e, path, code, body)
		}
	}

	if code, body, _ := callAt(t, srv.URL, "POST", affinity, `{"bookkeeperAffinityGroupPrimary":"`+a+`"}`); code != http.StatusNoContent {
		t.Fatalf("set affinity %s: %d %s", a, code, body)
	}
	for _, path := range []string{nsPersistence, topicPersistence} {
		refused(path, 2, "Bookkeeper Ensemble (2)", "the 1 writable bookies", a)
		taken(path, 1)
	}
	if code, body, _ := callAt(t, srv.URL, "POST", affinity, `{"bookkeeperAffinityGroupPrimary":"`+a+`","bookkeeperAffinityGroupSecondary":"`+b+`"}`); code != http.StatusNoContent {
		t.Fatalf("set affinity %s and %s: %d %s", a, b, code, body)
	}
	for _, path := range []string{nsPersistence, topicPersistence} {
		taken(path, 2)
		refused(path, 3, "Bookkeeper Ensemble (3)", "the 2 writable bookies", a, b)
	}
	if code, body, _ := callAt(t, srv.URL, "DELETE", affinity, ""); code != http.StatusNoContent {
		t.Fatalf("delete affinity: %d %s", code, body)
	}
	for _, path := range []string{nsPersistence, topicPersistence} {
		taken(path, 3)
	}
	// The reverse is not checked, as Pulsar does not check it.
	if code, body, _ := callAt(t, srv.URL, "POST", affinity, `{"bookkeeperAffinityGroupPrimary":"`+a+`"}`); code != http.StatusNoContent {
		t.Fatalf("an affinity of one bookie under E=3: %d %s, want 204", code, body)
	}
}
