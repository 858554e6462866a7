package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// TestPartitionCountBound: a partition count above
// maxNumPartitionsPerPartitionedTopic is refused with Pulsar's 406 and
// reason wherever one can be asked for (create, update, a namespace's
// auto-creation override, and the auto-creation of a client's lookup),
// and nothing is stored. partitions=1000000 was accepted.
func TestPartitionCountBound(t *testing.T) {
	max := global.DefaultMaxNumPartitions
	want := fmt.Sprintf("Number of partitions should be less than or equal to %d", max)
	id := uniq()
	part := "/admin/v2/persistent/public/default/bound-part-" + id
	if status, body := call(t, "PUT", part+"/partitions", `2`); status != http.StatusNoContent {
		t.Fatalf("create partitioned topic: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, "DELETE", part+"/partitions?force=true", "") })
	const ns = "/admin/v2/namespaces/public/default"
	over := fmt.Sprint(max + 1)
	for _, tc := range []struct {
		name, method, path, body string
		unchanged                []string
	}{
		{"create", "PUT", part + "-2/partitions", over, []string{"/admin/v2/persistent/public/default/partitioned"}},
		{"create a million", "PUT", part + "-3/partitions", `{"partitions": 1000000}`, []string{"/admin/v2/persistent/public/default/partitioned"}},
		{"update", "POST", part + "/partitions", over, []string{part + "/partitions"}},
		{"auto-creation override", "POST", ns + "/autoTopicCreation",
			`{"allowAutoTopicCreation": true, "topicType": "partitioned", "defaultNumPartitions": ` + over + `}`, []string{ns}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, tc.unchanged)
			status, body := call(t, tc.method, tc.path, tc.body)
			var r struct {
				Reason string `json:"reason"`
			}
			if status != http.StatusNotAcceptable || json.Unmarshal([]byte(body), &r) != nil || r.Reason != want {
				t.Fatalf("%s %s: %d %s; want 406 %q", tc.method, tc.path, status, body, want)
			}
			if after := snapshot(t, tc.unchanged); after != before {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// An override stored before the bound (or by a broker with another
	// bound) is refused when a client's lookup would auto-create, over
	// both protocols, and creates nothing.
	nsName := "bound-ns-" + id
	if status, body := call(t, "PUT", "/admin/v2/namespaces/public/"+nsName, ""); status != http.StatusNoContent {
		t.Fatalf("create namespace: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, "DELETE", "/admin/v2/namespaces/public/"+nsName+"?force=true", "") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := max + 1
	_, rc, err := region.Service().Global().UpdateNamespace(ctx, "public", nsName, func(p *global.Policies) error {
		p.AutoTopicCreationOverride = &global.AutoTopicCreation{Allow: true, Type: global.Partitioned, Partitions: &n}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := region.Service().Policies().Await(ctx, rc); err != nil {
		t.Fatal(err)
	}
	topic := "persistent://public/" + nsName + "/auto"
	status, body := call(t, "GET", "/admin/v2/persistent/public/"+nsName+"/auto/partitions?checkAllowAutoCreation=true", "")
	if status != http.StatusNotAcceptable || !strings.Contains(body, want) {
		t.Fatalf("partitioned metadata with auto-creation: %d %s; want 406 %q", status, body, want)
	}
	c := newClient(t, region.ServiceURL())
	if p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		p.Close()
		t.Fatalf("a producer on %s, auto-created with %d partitions", topic, n)
	} else if !strings.Contains(err.Error(), "NotAllowed") {
		t.Fatalf("producer: %v; want NotAllowed", err)
	}
	if tn, err := topology.ParseTopicName(topic); err != nil {
		t.Fatal(err)
	} else if _, ok := region.Service().Policies().Topic(tn); ok {
		t.Fatalf("%s has a record", topic)
	}
}

// TestPartitionsLoadWhenUsed: creating a partitioned topic of the most
// partitions allowed loads none of them (each loaded topic costs memory
// and goroutines; they were all loaded at creation); they are listed from
// the start all the same; one used is created then; the delete removes
// what was created and the metadata, visiting only that.
func TestPartitionsLoadWhenUsed(t *testing.T) {
	max := global.DefaultMaxNumPartitions
	name := "persistent://public/default/lazy-" + uniq()
	path := "/admin/v2/persistent/public/default/" + strings.TrimPrefix(name, "persistent://public/default/")
	if status, body := call(t, "PUT", path+"/partitions", fmt.Sprint(max)); status != http.StatusNoContent {
		t.Fatalf("create at the bound: %d %s", status, body)
	}
	loaded := func() []string {
		var out []string
		for _, n := range region.Service().Loaded() {
			if strings.HasPrefix(n, name+"-partition-") {
				out = append(out, n)
			}
		}
		return out
	}
	if l := loaded(); len(l) > 0 {
		t.Fatalf("%d partitions loaded at creation, want none: %v...", len(l), l[:min(len(l), 3)])
	}
	// Its statistics say when it was created, as Pulsar's do from its
	// partitions (pulsaradmin's TestPartitionedTopicStatsTimestamps).
	var st struct {
		Created int64 `json:"topicCreationTimeStamp"`
	}
	if status, body := call(t, "GET", path+"/partitioned-stats", ""); status != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.Created <= 0 {
		t.Fatalf("partitioned stats before any partition is used: %d %s; want a creation time", status, body)
	}
	var listed []string
	if status, body := call(t, "GET", "/admin/v2/persistent/public/default", ""); status != http.StatusOK || json.Unmarshal([]byte(body), &listed) != nil {
		t.Fatalf("list: %d %s", status, body)
	}
	for i := range max {
		if p := fmt.Sprintf("%s-partition-%d", name, i); !slices.Contains(listed, p) {
			t.Fatalf("%s not listed", p)
		}
	}

	used := name + "-partition-7"
	c := newClient(t, region.ServiceURL())
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: used})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if l := loaded(); !slices.Equal(l, []string{used}) {
		t.Fatalf("%d partitions loaded (%v...), want only %s", len(l), l[:min(len(l), 3)], used)
	}
	if status, body := call(t, "GET", path+"/partitioned-stats?perPartition=true", ""); status != http.StatusOK ||
		!strings.Contains(body, `"msgInCounter":1`) {
		t.Fatalf("partitioned stats after one message: %d %s", status, body)
	}
	if l := loaded(); !slices.Equal(l, []string{used}) {
		t.Fatalf("%d partitions loaded by the statistics (%v...), want only %s", len(l), l[:min(len(l), 3)], used)
	}
	tn, err := topology.ParseTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := region.Service().StoredPartitions(context.Background(), tn, max)
	if err != nil || len(stored) != 1 || stored[0].String() != used {
		t.Fatalf("stored partitions %v, %v; want %s", stored, err, used)
	}

	if status, body := call(t, "DELETE", path+"/partitions", ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	if l := loaded(); len(l) > 0 {
		t.Fatalf("%d loaded after the delete: %v...", len(l), l[:min(len(l), 3)])
	}
	if stored, err := region.Service().StoredPartitions(context.Background(), tn, max); err != nil || len(stored) > 0 {
		t.Fatalf("stored partitions after the delete %v, %v", stored, err)
	}
	if status, body := call(t, "GET", path+"/partitions", ""); status != http.StatusOK || !strings.Contains(body, `"partitions":0`) {
		t.Fatalf("metadata after the delete: %d %s", status, body)
	}
}
