package admin_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestNamespaceExtras covers bundles, namespace unload, topic permissions,
// subscriptions deleted across partitions and a forced namespace delete.
func TestNamespaceExtras(t *testing.T) {
	adm := newAdmin(t, web.URL)
	c := newClient(t, region.ServiceURL())
	if err := adm.Namespaces().CreateNsWithNumBundles("public/extras", 4); err != nil {
		t.Fatal(err)
	}
	status, body := call(t, "GET", "/admin/v2/namespaces/public/extras/bundles", "")
	var b struct {
		Boundaries []string `json:"boundaries"`
		NumBundles int      `json:"numBundles"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &b) != nil || b.NumBundles != 4 || len(b.Boundaries) != 5 {
		t.Fatalf("bundles: %d %s", status, body)
	}

	part := topicName(t, "persistent://public/extras/p")
	if err := adm.Topics().Create(part, 2); err != nil {
		t.Fatal(err)
	}
	produce(t, c, part.String(), "x", 4)
	if err := adm.Subscriptions().Create(part, "s", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	if subs, err := adm.Subscriptions().List(part); err != nil || !slices.Equal(subs, []string{"s"}) {
		t.Fatalf("subscriptions of a partitioned topic: %v, %v", subs, err)
	}
	if err := adm.Subscriptions().Delete(part, "s"); err != nil {
		t.Fatal(err)
	}
	if subs, err := adm.Subscriptions().List(part); err != nil || len(subs) != 0 {
		t.Fatalf("subscriptions after delete: %v, %v", subs, err)
	}

	if err := adm.Topics().GrantPermission(part, "dora", []utils.AuthAction{"consume"}); err != nil {
		t.Fatal(err)
	}
	perms, err := adm.Topics().GetPermissions(part)
	if err != nil || !slices.Equal(perms["dora"], []utils.AuthAction{"consume"}) {
		t.Fatalf("topic permissions %v, %v", perms, err)
	}
	if err := adm.Topics().RevokePermission(part, "dora"); err != nil {
		t.Fatal(err)
	}
	if perms, _ := adm.Topics().GetPermissions(part); len(perms["dora"]) != 0 {
		t.Fatalf("after revoke: %v", perms)
	}

	if status, body := call(t, "PUT", "/admin/v2/namespaces/public/extras/unload", ""); status != http.StatusNoContent {
		t.Fatalf("unload: %d %s", status, body)
	}
	for _, name := range region.Service().Loaded() {
		if tn, _ := utils.GetTopicName(name); tn != nil && tn.GetNamespace() == "extras" {
			t.Fatalf("%s still loaded after the namespace's unload", name)
		}
	}
	if status, _ := call(t, "DELETE", "/admin/v2/namespaces/public/extras", ""); status != http.StatusConflict {
		t.Fatalf("deleting a namespace with topics: %d, want 409", status)
	}
	if status, body := call(t, "DELETE", "/admin/v2/namespaces/public/extras?force=true", ""); status != http.StatusNoContent {
		t.Fatalf("forced delete: %d %s", status, body)
	}
	if list, _ := adm.Namespaces().GetNamespaces("public"); slices.Contains(list, "public/extras") {
		t.Fatalf("namespace still listed: %v", list)
	}
}
