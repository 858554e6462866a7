package admin_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// get-message-by-id and peek answer Pulsar's BrokerEntryMetadata headers
// and the hop trail: the producer's publish time, then this region's
// broker time, which is the timestamp header's and the consumer's
// BrokerPublishTime.
func TestMessageLookupsCarryTheTrail(t *testing.T) {
	name := "persistent://public/default/trail-" + uniq()
	adm := newAdmin(t, web.URL)
	tn := topicName(t, name)
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Subscriptions().Create(tn, "s", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, region.ServiceURL())
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "reader",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var last pulsar.Message
	for range 2 {
		if last, err = cons.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if last.Index() == nil || last.BrokerPublishTime() == nil {
		t.Fatal("the consumer got no BrokerEntryMetadata")
	}
	base := "/admin/v2/persistent/public/default/" + strings.TrimPrefix(name, "persistent://public/default/")
	for _, tc := range []struct {
		path      string
		index     int64
		brokerPub *time.Time
	}{
		{path: base + "/ledger/" + strconv.FormatInt(last.ID().LedgerID(), 10) + "/entry/" + strconv.FormatInt(last.ID().EntryID(), 10),
			index: int64(*last.Index()), brokerPub: last.BrokerPublishTime()},
		{path: base + "/subscription/s/position/1", index: 0},
	} {
		resp, err := http.Get(web.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", tc.path, resp.Status)
		}
		hd := resp.Header
		ts, err := strconv.ParseInt(hd.Get("X-Pulsar-Broker-Entry-METADATA-timestamp"), 10, 64)
		if err != nil || ts <= 0 {
			t.Fatalf("GET %s: timestamp header %q", tc.path, hd.Get("X-Pulsar-Broker-Entry-METADATA-timestamp"))
		}
		if got := hd.Get("X-Pulsar-Broker-Entry-METADATA-index"); got != strconv.FormatInt(tc.index, 10) {
			t.Errorf("GET %s: index header %q, want %d", tc.path, got, tc.index)
		}
		if tc.brokerPub != nil && tc.brokerPub.UnixMilli() != ts {
			t.Errorf("GET %s: timestamp %d, the consumer's broker publish time %d", tc.path, ts, tc.brokerPub.UnixMilli())
		}
		trail := hd.Get("X-Meridian-Hop-Trail")
		parts := strings.Split(trail, ", ")
		if len(parts) != 2 || !strings.HasPrefix(parts[0], "producer=") || parts[1] != region.Service().Region()+"="+strconv.FormatInt(ts, 10) {
			t.Errorf("GET %s: trail %q, want producer=<publish time>, %s=%d", tc.path, trail, region.Service().Region(), ts)
		}
		if hd.Get("X-Meridian-Origin-Broker-Timestamp") != "" {
			t.Errorf("GET %s: a local message has an origin timestamp %q", tc.path, hd.Get("X-Meridian-Origin-Broker-Timestamp"))
		}
	}
}
