package loadmgr

import (
	"testing"

	"github.com/meridian-mq/meridian/global"
)

// TestBrokerURLs: the record the leader writes lists the live brokers that
// are not draining in its Pulsar protocol URLs, names the first of them in
// its web service URLs, and is a record the global store accepts.
func TestBrokerURLs(t *testing.T) {
	live := func(id string, draining bool) LiveBroker {
		return LiveBroker{BrokerRecord: BrokerRecord{Draining: draining, Owner: Owner{BrokerID: id,
			ServiceURL: "pulsar://" + id + ":6650", ServiceURLTLS: "pulsar+ssl://" + id + ":6651",
			WebURL: "http://" + id + ":8080", WebURLTLS: "https://" + id + ":8443"}}}
	}
	d, ok := brokerURLs([]LiveBroker{live("a", true), live("b", false), live("c", false)})
	want := global.ClusterData{
		ServiceURL: "http://b:8080", ServiceURLTLS: "https://b:8443",
		BrokerServiceURL: "pulsar://b:6650,c:6650", BrokerServiceURLTLS: "pulsar+ssl://b:6651,c:6651",
	}
	if !ok || d != want {
		t.Fatalf("brokerURLs = %+v, %v; want %+v", d, ok, want)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("the global store refuses the record: %v", err)
	}
	if _, ok := brokerURLs([]LiveBroker{live("a", true)}); ok {
		t.Fatal("a record of draining brokers only")
	}
}
