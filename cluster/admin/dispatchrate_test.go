package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

// TestReplicatorDispatchRate sets, reads and removes the namespace's and a
// topic's replicator dispatch rate through pulsaradmin, and refuses rates
// that cannot be applied.
func TestReplicatorDispatchRate(t *testing.T) {
	adm := newAdmin(t, web.URL)
	nsName := "public/rate-" + uniq()
	if err := adm.Namespaces().CreateNamespace(nsName); err != nil {
		t.Fatal(err)
	}
	defer adm.Namespaces().DeleteNamespace(nsName)
	ns, _ := utils.GetNamespaceName(nsName)
	nsPath := "/admin/v2/namespaces/" + nsName + "/replicatorDispatchRate"

	if status, body := call(t, "GET", nsPath, ""); status != http.StatusNoContent {
		t.Fatalf("unset namespace rate: %d %s; want 204", status, body)
	}
	want := utils.DispatchRate{DispatchThrottlingRateInMsg: 50, DispatchThrottlingRateInByte: 1 << 20, RatePeriodInSecond: 2}
	if err := adm.Namespaces().SetReplicatorDispatchRate(*ns, want); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Namespaces().GetReplicatorDispatchRate(*ns); err != nil || got != want {
		t.Fatalf("namespace rate %+v, %v; want %+v", got, err, want)
	}
	// Pulsar keys the namespace's rate by the cluster whose API set it.
	if status, body := call(t, "GET", "/admin/v2/namespaces/"+nsName, ""); status != http.StatusOK ||
		!strings.Contains(body, `"replicatorDispatchRate":{"`+brokertest.Region+`":{`) {
		t.Fatalf("policies %d %s; want the rate under region %s", status, body, brokertest.Region)
	}
	// A body with only the message rate means that many per second.
	if status, body := call(t, "POST", nsPath, `{"dispatchThrottlingRateInMsg": 7}`); status != http.StatusNoContent {
		t.Fatalf("partial body: %d %s", status, body)
	}
	if got, _ := adm.Namespaces().GetReplicatorDispatchRate(*ns); got != (utils.DispatchRate{DispatchThrottlingRateInMsg: 7, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}) {
		t.Fatalf("namespace rate from a partial body %+v", got)
	}
	// A rate relative to the publish rate is kept as given (the replicator
	// measures the publish rate).
	if status, body := call(t, "POST", nsPath, `{"dispatchThrottlingRateInMsg": 50, "relativeToPublishRate": true}`); status != http.StatusNoContent {
		t.Fatalf("relative rate: %d %s", status, body)
	}
	if status, body := call(t, "GET", nsPath, ""); status != http.StatusOK || !strings.Contains(body, `"relativeToPublishRate":true`) {
		t.Fatalf("relative namespace rate: %d %s", status, body)
	}
	for _, bad := range []string{`{"ratePeriodInSecond": 0}`, `{"dispatchThrottlingRateInMsg": "x"}`, `[1]`, ``} {
		if status, body := call(t, "POST", nsPath, bad); status != http.StatusPreconditionFailed && status != http.StatusBadRequest {
			t.Errorf("namespace rate %q: %d %s; want 412 or 400", bad, status, body)
		}
	}
	if status, body := call(t, "DELETE", nsPath, ""); status != http.StatusNoContent {
		t.Fatalf("remove namespace rate: %d %s", status, body)
	}
	if status, body := call(t, "GET", nsPath, ""); status != http.StatusNoContent {
		t.Fatalf("removed namespace rate: %d %s; want 204", status, body)
	}

	tn := topicName(t, "persistent://"+nsName+"/rated")
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	defer adm.Topics().Delete(tn, true, true)
	if got, err := adm.Topics().GetReplicatorDispatchRate(tn); err != nil || got != nil {
		t.Fatalf("unset topic rate %+v, %v; want nil", got, err)
	}
	topicWant := utils.DispatchRateData{DispatchThrottlingRateInMsg: 100, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	if err := adm.Topics().SetReplicatorDispatchRate(tn, topicWant); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Topics().GetReplicatorDispatchRate(tn); err != nil || got == nil || *got != topicWant {
		t.Fatalf("topic rate %+v, %v; want %+v", got, err, topicWant)
	}
	topicPath := "/admin/v2/persistent/" + strings.TrimPrefix(tn.String(), "persistent://") + "/replicatorDispatchRate"
	if status, body := call(t, "POST", topicPath, `{"dispatchThrottlingRateInMsg": 5, "ratePeriodInSecond": -1}`); status != http.StatusPreconditionFailed {
		t.Fatalf("topic rate with a bad period: %d %s; want 412", status, body)
	}
	if err := adm.Topics().RemoveReplicatorDispatchRate(tn); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Topics().GetReplicatorDispatchRate(tn); err != nil || got != nil {
		t.Fatalf("removed topic rate %+v, %v; want nil", got, err)
	}
}
