package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/testkit"
)

// TestNamespaceSubscribeRate sets a namespace's subscribe rate through the
// admin API, refuses rates that cannot be applied, and holds a process
// that subscribes and closes in a loop (a new client each time, the same
// consumer name) to it through pulsar-client-go, while a consumer under
// the rate is unaffected; removing the rate lets the loop through. (The
// bounds in time are TestSubscribeRate's, on a fake clock.)
func TestNamespaceSubscribeRate(t *testing.T) {
	ns := newNamespace(t, "subrate")
	path := "/admin/v2/namespaces/" + ns + "/subscribeRate"
	for _, bad := range []string{`{"subscribeThrottlingRatePerConsumer":1,"ratePeriodInSecond":0}`,
		`{"subscribeThrottlingRatePerConsumer":"x"}`, `{"subscribeThrottlingRate":1,"ratePeriodInSecond":1}`, `[1]`} {
		if status, body := call(t, "POST", path, bad); status != http.StatusPreconditionFailed && status != http.StatusBadRequest {
			t.Errorf("subscribeRate %s: %d %s; want 412 or 400", bad, status, body)
		}
	}
	rate := `{"subscribeThrottlingRatePerConsumer":1,"ratePeriodInSecond":3600}`
	if status, body, h := callHeader(t, "POST", path, rate); status != http.StatusNoContent || h.Get("Warning") != "" {
		t.Fatalf("set subscribeRate: %d %s, Warning %q", status, body, h.Get("Warning"))
	}
	if status, body := call(t, "GET", path, ""); status != http.StatusOK || body != rate {
		t.Fatalf("subscribeRate read back: %d %s, want %s", status, body, rate)
	}
	if status, body := call(t, "GET", "/admin/v2/namespaces/"+ns, ""); status != http.StatusOK ||
		!strings.Contains(body, `"clusterSubscribeRate":{"`+brokertest.Region+`":`+rate+`}`) {
		t.Fatalf("policies %d %s; want the rate under region %s", status, body, brokertest.Region)
	}

	topic := "persistent://" + ns + "/t"
	subscribeOnce := func(name string) error {
		c := newClient(t, region.ServiceURL())
		defer c.Close()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Name: name})
		if err == nil {
			cons.Close()
		}
		return err
	}
	if err := subscribeOnce("looping"); err != nil {
		t.Fatalf("first subscribe: %v", err)
	}
	if err := subscribeOnce("looping"); err == nil || !strings.Contains(err.Error(), "Subscribe limited by subscribe rate limit per consumer") {
		t.Fatalf("second subscribe in the period: %v; want the subscribe rate's refusal", err)
	}
	if err := subscribeOnce("other"); err != nil {
		t.Fatalf("another consumer, under the rate: %v", err)
	}

	if status, body := call(t, "DELETE", path, ""); status != http.StatusNoContent {
		t.Fatalf("remove subscribeRate: %d %s", status, body)
	}
	// The broker applies the change once its policy cache has it.
	testkit.WaitFor(t, "a subscribe once the rate is removed", func() bool { return subscribeOnce("looping") == nil })
}
