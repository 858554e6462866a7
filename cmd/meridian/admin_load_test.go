package main

import (
	"strings"
	"testing"
)

// TestAdminLoadBalance checks the load-balancing verbs' requests and
// output, and split-bundle's refusal without --bundle.
func TestAdminLoadBalance(t *testing.T) {
	f := newFakeAdmin(t, map[string]cannedResponse{
		"GET /admin/v2/broker-stats/load-report": {200, `{"msgRateIn":12.5,"numBundles":2,"connections":3}`},
		"GET /admin/v2/brokers/leaderBroker":     {200, `{"brokerId":"b1","serviceUrl":"http://b1:8080"}`},
	})
	out, err := runAdmin(t, f.URL, "broker-stats", "load-report")
	if err != nil || !jsonEqual(t, out, `{"msgRateIn":12.5,"numBundles":2,"connections":3}`) {
		t.Fatalf("load-report: %q, %v", out, err)
	}
	out, err = runAdmin(t, f.URL, "brokers", "leader-broker")
	if err != nil || !jsonEqual(t, out, `{"brokerId":"b1","serviceUrl":"http://b1:8080"}`) {
		t.Fatalf("leader-broker: %q, %v", out, err)
	}
	if out, err = runAdmin(t, f.URL, "namespaces", "split-bundle", "acme/orders", "-b", "0x00000000_0x40000000", "-u"); err != nil || out != "" {
		t.Fatalf("split-bundle: %q, %v", out, err)
	}
	reqs := f.requests()
	last := reqs[len(reqs)-1]
	if last.Method != "PUT" || last.Path != "/admin/v2/namespaces/acme/orders/0x00000000_0x40000000/split" || last.Query != "unload=true" {
		t.Fatalf("split request %+v", last)
	}
	if _, err := runAdmin(t, f.URL, "namespaces", "split-bundle", "acme/orders"); err == nil || !strings.Contains(err.Error(), "--bundle") {
		t.Fatalf("split-bundle without --bundle: %v", err)
	}
	if len(f.requests()) != len(reqs) {
		t.Fatal("split-bundle without --bundle sent a request")
	}
}
