package admin_test

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestReplicatedSubscriptionStatus: Pulsar's replicatedSubscriptionStatus
// turns a subscription's replication on and off (persisted with its
// cursor, shown as isReplicated in topic stats), on every partition of a
// partitioned topic, and refuses what Pulsar refuses.
func TestReplicatedSubscriptionStatus(t *testing.T) {
	adm := newAdmin(t, webURL())
	id := uniq()
	plain := topicName(t, "persistent://public/default/replicated-status-"+id)
	part := topicName(t, "persistent://public/default/replicated-status-part-"+id)
	if err := adm.Topics().Create(plain, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(part, 2); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []utils.TopicName{plain, part} {
		if err := adm.Subscriptions().Create(tn, "s", utils.Earliest); err != nil {
			t.Fatal(err)
		}
	}
	path := func(tn utils.TopicName, sub string) string {
		return "/admin/v2/" + tn.GetRestPath() + "/subscription/" + sub + "/replicatedSubscriptionStatus"
	}
	isReplicated := func(tn utils.TopicName) bool {
		t.Helper()
		st, err := adm.Topics().GetStats(tn)
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions["s"].IsReplicated
	}

	if isReplicated(plain) {
		t.Fatal("a new subscription is replicated")
	}
	for _, on := range []string{"true", "false", "true"} {
		if status, body := call(t, "POST", path(plain, "s"), on); status != 204 {
			t.Fatalf("POST %s: %d %s", on, status, body)
		}
		if got := isReplicated(plain); got != (on == "true") {
			t.Fatalf("after POST %s stats say isReplicated %v", on, got)
		}
		if status, body := call(t, "GET", path(plain, "s"), ""); status != 200 || body != `{"`+plain.String()+`":`+on+`}` {
			t.Fatalf("GET after POST %s: %d %s", on, status, body)
		}
	}
	if status, body := call(t, "POST", path(part, "s"), "true"); status != 204 {
		t.Fatalf("POST on a partitioned topic: %d %s", status, body)
	}
	want := `{"` + part.String() + `-partition-0":true,"` + part.String() + `-partition-1":true}`
	if status, body := call(t, "GET", path(part, "s"), ""); status != 200 || body != want {
		t.Fatalf("GET on a partitioned topic: %d %s, want %s", status, body, want)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"no such subscription", "POST", path(plain, "nobody"), "true", 404},
		{"a body that is not a boolean", "POST", path(plain, "s"), `"yes"`, 400},
		{"a non-persistent topic", "POST", "/admin/v2/non-persistent/public/default/replicated-status-" + id +
			"/subscription/s/replicatedSubscriptionStatus", "true", 405},
	} {
		if status, body := call(t, tc.method, tc.path, tc.body); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.status)
		}
	}
	if !isReplicated(plain) {
		t.Fatal("a refused request changed the subscription")
	}
}
