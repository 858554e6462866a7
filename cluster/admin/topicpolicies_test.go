package admin_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestTopicPolicies sets, reads (own and applied) and removes the
// topic-level policies Meridian keeps, through pulsaradmin.
func TestTopicPolicies(t *testing.T) {
	adm := newAdmin(t, web.URL)
	tn := topicName(t, "persistent://public/default/topic-policies")
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	defer adm.Topics().Delete(tn, true, true)

	if ttl, err := adm.Topics().GetMessageTTL(tn); err != nil || ttl != -1 {
		t.Fatalf("unset ttl %d, %v; want -1", ttl, err)
	}
	if err := adm.Topics().SetMessageTTL(tn, 120); err != nil {
		t.Fatal(err)
	}
	if ttl, err := adm.Topics().GetMessageTTL(tn); err != nil || ttl != 120 {
		t.Fatalf("ttl %d, %v", ttl, err)
	}
	if err := adm.Topics().SetRetention(tn, utils.RetentionPolicies{RetentionTimeInMinutes: 10, RetentionSizeInMB: 5}); err != nil {
		t.Fatal(err)
	}
	if r, err := adm.Topics().GetRetention(tn, false); err != nil || r == nil || r.RetentionSizeInMB != 5 {
		t.Fatalf("retention %+v, %v", r, err)
	}
	if err := adm.Topics().SetDeduplicationStatus(tn, true); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Topics().GetDeduplicationStatus(tn); err != nil || !on {
		t.Fatalf("dedup %v, %v", on, err)
	}
	if err := adm.Topics().SetBacklogQuota(tn, utils.NewBacklogQuota(4096, -1, utils.ProducerRequestHold), utils.DestinationStorage); err != nil {
		t.Fatal(err)
	}
	if m, err := adm.Topics().GetBacklogQuotaMap(tn, false); err != nil || m[utils.DestinationStorage].LimitSize != 4096 {
		t.Fatalf("backlog quotas %v, %v", m, err)
	}
	if err := adm.Topics().SetSchemaCompatibilityStrategy(tn, utils.SchemaCompatibilityStrategyForward); err != nil {
		t.Fatal(err)
	}
	if s, err := adm.Topics().GetSchemaCompatibilityStrategyApplied(tn, false); err != nil || s != utils.SchemaCompatibilityStrategyForward {
		t.Fatalf("schema strategy %q, %v", s, err)
	}
	if err := adm.Topics().SetReplicationClusters(tn, []string{"standalone"}); err != nil {
		t.Fatal(err)
	}
	if rc, err := adm.Topics().GetReplicationClusters(tn); err != nil || !slices.Equal(rc, []string{"standalone"}) {
		t.Fatalf("replication %v, %v", rc, err)
	}
	if err := adm.Topics().RemoveMessageTTL(tn); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := adm.Topics().GetMessageTTL(tn); ttl != -1 {
		t.Fatalf("ttl after removal %d", ttl)
	}
	// The stats show the effective deduplication.
	if st, err := adm.Topics().GetStats(tn); err != nil || st.DeDuplicationStatus != "Enabled" {
		t.Fatalf("stats dedup %q, %v", st.DeDuplicationStatus, err)
	}
	missing := topicName(t, "persistent://public/default/topic-policies-missing")
	if err := adm.Topics().SetMessageTTL(missing, 1); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("policy of a missing topic: %v, want 404", err)
	}
}

// TestLegacyBacklogQuotaBody accepts the body pulsar-client-go's tests
// send: the deprecated "limit", as a string.
func TestLegacyBacklogQuotaBody(t *testing.T) {
	const path = "/admin/v2/namespaces/public/default/backlogQuota"
	if status, body := call(t, "POST", path, `{"limit": "10240", "policy": "producer_request_hold"}`); status != http.StatusNoContent {
		t.Fatalf("%d %s", status, body)
	}
	defer call(t, "DELETE", path, "")
	adm := newAdmin(t, web.URL)
	m, err := adm.Namespaces().GetBacklogQuotaMap("public/default")
	if q := m[utils.DestinationStorage]; err != nil || q.LimitSize != 10240 || q.LimitTime != -1 || q.Policy != utils.ProducerRequestHold {
		t.Fatalf("quota %+v, %v", m, err)
	}
}
