package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/meridian-mq/meridian/testkit"
)

// TestLoadReport checks that pulsaradmin decodes the broker's load report
// and that it describes this broker.
func TestLoadReport(t *testing.T) {
	adm := newAdmin(t, web.URL)
	var rep *utils.LocalBrokerData
	testkit.WaitFor(t, "a load report", func() bool {
		r, err := adm.BrokerStats().GetLoadReport() // pulsaradmin drops the error: nil means it failed
		rep = r
		return err == nil && r != nil && r.LastUpdate > 0
	})
	if rep.PulsarServiceURL != region.ServiceURL() || rep.WebServiceURL != webURL() || !rep.PersistentTopicsEnabled {
		t.Fatalf("load report URLs %+v", rep)
	}
	if rep.CPU.Limit <= 0 || rep.Memory.Usage <= 0 || rep.NumBundles != len(rep.Bundles) {
		t.Fatalf("load report resources %+v", rep)
	}
}

// TestLeaderBroker checks that leaderBroker names the elected leader: the
// one broker of the region.
func TestLeaderBroker(t *testing.T) {
	adm := newAdmin(t, web.URL)
	testkit.WaitFor(t, "the leader", func() bool {
		leader, err := adm.Brokers().GetLeaderBroker()
		return err == nil && leader.BrokerID == region.ID() && leader.ServiceURL == webURL()
	})
}

// TestSplitBundle splits a bundle of a namespace with a producer on one of
// its topics, and checks the bad-input answers.
func TestSplitBundle(t *testing.T) {
	adm := newAdmin(t, web.URL)
	ns := "public/split" + uniq()
	if err := adm.Namespaces().CreateNsWithNumBundles(ns, 2); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, region.ServiceURL())
	topic := "persistent://" + ns + "/t"
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	rng, err := adm.Topics().GetBundleRange(topicName(t, topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Namespaces().SplitNamespaceBundle(ns, rng, false); err != nil {
		t.Fatalf("split %s: %v", rng, err)
	}
	pol, err := adm.Namespaces().GetPolicies(ns)
	if err != nil || pol.Bundles == nil || pol.Bundles.NumBundles != 3 || len(pol.Bundles.Boundaries) != 4 {
		t.Fatalf("bundles after the split %+v, %v", pol.Bundles, err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("send after the split: %v", err)
	}
	after, err := adm.Topics().GetBundleRange(topicName(t, topic))
	if err != nil || after == rng || !slices.Contains(halves(rng), after) {
		t.Fatalf("bundle after the split %q (was %q), %v", after, rng, err)
	}

	base := "/admin/v2/namespaces/" + ns + "/"
	for _, tc := range []struct {
		path   string
		status int
		reason string
	}{
		{base + rng + "/split", http.StatusPreconditionFailed, "Invalid upper boundary for bundle"}, // split already
		{base + "0x00000010_0x00000020/split", http.StatusPreconditionFailed, "Cannot find bundle in the bundles list"},
		{base + "nonsense/split", http.StatusPreconditionFailed, "Invalid bundle range: nonsense"},
		{base + after + "/split?splitAlgorithmName=topic_count_equally_divide", http.StatusPreconditionFailed, "Unsupported namespace bundle split algorithm"},
		{base + after + "/split?unload=maybe", http.StatusBadRequest, "unload"},
		{"/admin/v2/namespaces/public/missing" + uniq() + "/" + after + "/split", http.StatusNotFound, "does not exist"},
	} {
		status, body := call(t, "PUT", tc.path, "")
		if status != tc.status || !strings.Contains(body, tc.reason) {
			t.Errorf("PUT %s: %d %s, want %d with %q", tc.path, status, body, tc.status, tc.reason)
		}
	}
}

// halves returns the two halves of a bundle range, as a split makes them.
func halves(rng string) []string {
	l, u, _ := strings.Cut(rng, "_")
	lo, _ := strconv.ParseUint(l, 0, 32)
	hi, _ := strconv.ParseUint(u, 0, 32)
	mid := lo + (hi-lo)/2
	return []string{fmt.Sprintf("0x%08x_0x%08x", lo, mid), fmt.Sprintf("0x%08x_0x%08x", mid, hi)}
}
