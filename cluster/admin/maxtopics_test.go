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

// TestMaxTopicsPerNamespace: with a namespace's maxTopicsPerNamespace at
// 3, a topic and a partitioned topic of 2 partitions fill it; the next
// topic is refused through the admin API (412, Pulsar's reason) and
// through a producer on a new topic (NotAllowed), as is a partitioned
// topic and a partition count that grows beyond it; the existing topics
// keep working; raising the limit lets a new topic through.
func TestMaxTopicsPerNamespace(t *testing.T) {
	ns := newNamespace(t, "maxtopics")
	adm := newAdmin(t, web.URL)
	name, _ := utils.GetNamespaceName(ns)
	setMax := func(n int) {
		t.Helper()
		status, body, h := callHeader(t, "POST", "/admin/v2/namespaces/"+ns+"/maxTopicsPerNamespace", strconv.Itoa(n))
		if status != http.StatusNoContent || h.Get("Warning") != "" {
			t.Fatalf("set maxTopicsPerNamespace %d: %d %s, Warning %q", n, status, body, h.Get("Warning"))
		}
	}
	setMax(3)
	if got, err := adm.Namespaces().GetMaxTopicsPerNamespace(*name); err != nil || got != 3 {
		t.Fatalf("maxTopicsPerNamespace %d, %v; want 3", got, err)
	}
	topic := func(local string) string { return "persistent://" + ns + "/" + local }
	if err := adm.Topics().Create(topicName(t, topic("a")), 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(topicName(t, topic("p")), 2); err != nil {
		t.Fatal(err)
	}

	const reason = "Exceed maximum number of topics in namespace."
	refused := func(what string, status int, body string) {
		t.Helper()
		if status != http.StatusPreconditionFailed || !strings.Contains(body, `"reason":"`+reason) {
			t.Errorf("%s: %d %s; want 412 with Pulsar's reason", what, status, body)
		}
	}
	status, body := call(t, "PUT", "/admin/v2/persistent/"+ns+"/c", "")
	refused("a 4th topic", status, body)
	status, body = call(t, "PUT", "/admin/v2/persistent/"+ns+"/q/partitions", "1")
	refused("a partitioned topic of 1 partition", status, body)
	status, body = call(t, "POST", "/admin/v2/persistent/"+ns+"/p/partitions", "3")
	refused("a partition more", status, body)

	client := newClient(t, region.ServiceURL())
	_, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic("d"), SendTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "NotAllowedError: "+reason) {
		t.Fatalf("a producer on a new topic: %v; want NotAllowed with Pulsar's reason", err)
	}
	if partitioned, plain, err := adm.Topics().List(*name); err != nil || len(partitioned) != 1 || len(plain) != 3 {
		t.Fatalf("topics %v and partitioned %v, %v; want a, p's 2 partitions, and p", plain, partitioned, err)
	}

	// The existing topics keep working.
	for _, tp := range []string{topic("a"), topic("p")} {
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: tp})
		if err != nil {
			t.Fatalf("a producer on %s: %v", tp, err)
		}
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			t.Fatalf("send to %s: %v", tp, err)
		}
		p.Close()
	}

	setMax(4)
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic("d")})
	if err != nil {
		t.Fatalf("a producer on a new topic once the limit is raised: %v", err)
	}
	p.Close()
	setMax(6)
	if status, body := call(t, "POST", "/admin/v2/persistent/"+ns+"/p/partitions", "4"); status != http.StatusNoContent {
		t.Fatalf("growing to 4 partitions within the limit: %d %s", status, body)
	}
	if err := adm.Namespaces().RemoveMaxTopicsPerNamespace(*name); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(topicName(t, topic("e")), 0); err != nil {
		t.Fatalf("a topic once the limit is removed (the broker's is none): %v", err)
	}
}
