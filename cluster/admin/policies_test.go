package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meridian-mq/meridian/cluster/admin"
	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/testkit"
)

// newNamespace creates public/<prefix>-<n> and deletes it when the test
// ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	adm := newAdmin(t, web.URL)
	ns := "public/" + prefix + "-" + uniq()
	if err := adm.Namespaces().CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Namespaces().DeleteNamespace(ns) })
	return ns
}

// TestNamespacePublishRate: a namespace publish rate of 100 msg/s holds a
// producer that asks for 1,000 msg/s to 100 ± 10% over 10 s, with no send
// error, while a consumer on the same client (the same connection) keeps
// up with its own topic, which a producer on that client feeds at up to
// 200 msg/s. Pulsar's way, pausing the connection, would stall that consumer.
func TestNamespacePublishRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 12 s")
	}
	throttled, free := newNamespace(t, "rate"), newNamespace(t, "free")
	adm := newAdmin(t, web.URL)
	name, _ := utils.GetNamespaceName(throttled)
	if err := adm.Namespaces().SetPublishRate(*name, utils.PublishRate{PublishThrottlingRateInMsg: 100, PublishThrottlingRateInByte: -1}); err != nil {
		t.Fatal(err)
	}
	if got, err := adm.Namespaces().GetPublishRate(*name); err != nil || got.PublishThrottlingRateInMsg != 100 {
		t.Fatalf("publish rate %+v, %v", got, err)
	}

	client := newClient(t, region.ServiceURL())
	slow, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + throttled + "/t", SendTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	other := "persistent://" + free + "/t"
	fast, err := client.CreateProducer(pulsar.ProducerOptions{Topic: other, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: other, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	const (
		window = 10 * time.Second
		warmup = time.Second // the pending queues fill; the limiter's burst passes
	)
	start := time.Now()
	end := start.Add(warmup + window)
	var (
		receipts []time.Time
		sendErr  error
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		receipts, sendErr = produceAt(slow, 1000, start, end)
	}()

	// Meanwhile the consumer on the same connection receives and acks
	// its own topic's messages as they come.
	var sent, lagging int
	ctx, cancel := context.WithTimeout(context.Background(), warmup+window+30*time.Second)
	defer cancel()
	for tick := time.NewTicker(5 * time.Millisecond); time.Now().Before(end); <-tick.C {
		if _, err := fast.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(time.Now().Format(time.RFC3339Nano))}); err != nil {
			t.Fatal(err)
		}
		sent++
		msg, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sentAt, _ := time.Parse(time.RFC3339Nano, string(msg.Payload()))
		if time.Since(sentAt) > 2*time.Second {
			lagging++
		}
		if err := cons.Ack(msg); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatalf("a throttled send failed: %v", sendErr)
	}
	inWindow := 0
	for _, at := range receipts {
		if at.After(start.Add(warmup)) {
			inWindow++
		}
	}
	rate := float64(inWindow) / window.Seconds()
	t.Logf("throttled producer: %.1f msg/s over %v; other topic: %d sent and received, %d later than 2 s", rate, window, sent, lagging)
	if rate < 90 || rate > 110 {
		t.Errorf("throttled producer stored %.1f msg/s, want 100 ± 10%%", rate)
	}
	if lagging > 0 || sent < 100 {
		t.Errorf("the consumer on the same connection fell behind: %d of %d messages later than 2 s", lagging, sent)
	}
	if status, body := call(t, "DELETE", "/admin/v2/namespaces/"+throttled+"/publishRate", ""); status != http.StatusNoContent {
		t.Fatalf("remove the publish rate: %d %s", status, body)
	}
}

// produceAt sends from start until end at asked messages per second (or
// as fast as the producer takes them, when slower) and returns when each
// receipt before end came, or the first send error by end. What is still
// pending at end is left to the producer.
func produceAt(prod pulsar.Producer, asked int, start, end time.Time) ([]time.Time, error) {
	var (
		mu       sync.Mutex
		receipts []time.Time
		first    error
	)
	for i := 0; time.Now().Before(end); i++ {
		if ahead := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(asked))); ahead > 0 {
			time.Sleep(ahead) // pacing the workload, not waiting for a condition
		}
		prod.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil && !time.Now().After(end) {
					receipts = append(receipts, time.Now())
				}
			})
	}
	mu.Lock()
	defer mu.Unlock()
	return receipts, first
}

// TestNamespacePersistence: a namespace with persistence E=2 Qw=2 Qa=1
// writes its new ledgers so; a policy the region's bookies cannot hold, or
// that breaks E >= Qw >= Qa >= 1, is refused and changes nothing.
func TestNamespacePersistence(t *testing.T) {
	ns := newNamespace(t, "persistence")
	adm := newAdmin(t, web.URL)
	if err := adm.Namespaces().SetPersistence(ns, utils.PersistencePolicies{BookkeeperEnsemble: 2, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 1}); err != nil {
		t.Fatal(err)
	}
	p := "/admin/v2/namespaces/" + ns + "/persistence"
	for _, bad := range []string{
		`{"bookkeeperEnsemble":4,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1}`, // the region has 3 bookies
		`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":3,"bookkeeperAckQuorum":1}`,
		`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":0}`,
		`{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,"ensemble":3}`,
	} {
		if status, body := call(t, "POST", p, bad); status != http.StatusPreconditionFailed {
			t.Errorf("persistence %s: %d %s, want 412", bad, status, body)
		}
	}
	got, err := adm.Namespaces().GetPersistence(ns)
	if err != nil || got == nil || got.BookkeeperEnsemble != 2 || got.BookkeeperWriteQuorum != 2 || got.BookkeeperAckQuorum != 1 {
		t.Fatalf("persistence after refusals: %+v, %v; want 2/2/1 unchanged", got, err)
	}

	topic := "persistent://" + ns + "/t"
	prod, err := newClient(t, region.ServiceURL()).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	stats, err := adm.Topics().GetInternalStats(topicName(t, topic))
	if err != nil || len(stats.Ledgers) == 0 {
		t.Fatalf("internal stats %+v, %v", stats, err)
	}
	for _, l := range stats.Ledgers {
		if md := ledgerMetadata(t, l.LedgerID); md.EnsembleSize != 2 || md.WriteQuorum != 2 || md.AckQuorum != 1 {
			t.Errorf("ledger %d: E=%d Qw=%d Qa=%d, want the namespace's 2/2/1", l.LedgerID, md.EnsembleSize, md.WriteQuorum, md.AckQuorum)
		}
	}
}

// ledgerMetadata reads a ledger's metadata from the shared region's store.
func ledgerMetadata(t *testing.T, id int64) ledger.Metadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := storage.Store.Get(ctx, ledger.LedgerKey(brokertest.Region, id))
	if err != nil {
		t.Fatal(err)
	}
	var md ledger.Metadata
	if err := json.Unmarshal(kv.Value, &md); err != nil {
		t.Fatal(err)
	}
	return md
}

// TestTopicMaxMessageSize: a message above the topic's maxMessageSize is
// refused as Pulsar refuses it (SEND_ERROR NotAllowed, "Exceed maximum
// message size", which pulsar-client-go leaves to its send timeout) and not
// stored; one below it is stored.
func TestTopicMaxMessageSize(t *testing.T) {
	ns := newNamespace(t, "msgsize")
	topic := "persistent://" + ns + "/t"
	adm := newAdmin(t, web.URL)
	tn := topicName(t, topic)
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().SetMaxMessageSize(tn, 1024); err != nil {
		t.Fatal(err)
	}
	prod, err := newClient(t, region.ServiceURL()).CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true,
		SendTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 100)}); err != nil {
		t.Fatalf("a message under the limit: %v", err)
	}
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 2000)}); err == nil {
		t.Fatal("a message over the topic's maxMessageSize was stored")
	}
	stats, err := adm.Topics().GetStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	if stats.MsgCounterIn != 1 {
		t.Errorf("the topic stored %d messages, want only the one under the limit", stats.MsgCounterIn)
	}
}

// TestUnbuiltPoliciesWarn: a policy that is stored but not built is
// accepted with a Warning naming the feature and counted by the metric;
// one that has no effect and no use is refused with 405 and changes
// nothing.
func TestUnbuiltPoliciesWarn(t *testing.T) {
	ns := newNamespace(t, "unbuilt")
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(admin.NewUnbuiltCollector(region.Service().Policies())); err != nil {
		t.Fatal(err)
	}
	countOf := func(feature, level string) int {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["feature"] == feature && labels["level"] == level {
					return int(m.GetGauge().GetValue())
				}
			}
		}
		t.Fatalf("no series for %s/%s", feature, level)
		return 0
	}
	if n, err := testutil.GatherAndCount(reg, "meridian_policies_not_built"); err != nil || n == 0 {
		t.Fatalf("meridian_policies_not_built: %d series, %v", n, err)
	}
	before := countOf("offload", "namespace")

	for _, c := range []struct{ path, body, feature string }{
		{"offloadPolicies", `{"managedLedgerOffloadDriver":"aws-s3"}`, "offload"},
		{"compactionThreshold", `1048576`, "compaction"},
	} {
		status, body, h := callHeader(t, "POST", "/admin/v2/namespaces/"+ns+"/"+c.path, c.body)
		if status != http.StatusNoContent {
			t.Fatalf("set %s: %d %s", c.path, status, body)
		}
		if w := h.Get("Warning"); !strings.HasPrefix(w, `299 - "`+c.feature+" is not built: ") {
			t.Errorf("set %s: Warning %q, want one naming %q", c.path, w, c.feature)
		}
	}
	if n := countOf("offload", "namespace"); n != before+1 {
		t.Errorf("namespaces holding offload policies: %d, want %d", n, before+1)
	}
	// A built policy carries no warning.
	for path, body := range map[string]string{
		"retention":    `{"retentionTimeInMinutes":10,"retentionSizeInMB":10}`,
		"dispatchRate": `{"dispatchThrottlingRateInMsg":10,"dispatchThrottlingRateInByte":-1,"ratePeriodInSecond":1,"relativeToPublishRate":true}`,
	} {
		if _, _, h := callHeader(t, "POST", "/admin/v2/namespaces/"+ns+"/"+path, body); h.Get("Warning") != "" {
			t.Errorf("%s answered with Warning %q", path, h.Get("Warning"))
		}
	}
	if _, _, h := callHeader(t, "DELETE", "/admin/v2/namespaces/"+ns+"/removeOffloadPolicies", ""); h.Get("Warning") != "" {
		t.Errorf("removing offload policies answered with Warning %q", h.Get("Warning"))
	}
	if n := countOf("offload", "namespace"); n != before {
		t.Errorf("namespaces holding offload policies after the removal: %d, want %d", n, before)
	}

	// A topic's policy warns the same way, and counts at topic level.
	topic := "persistent://" + ns + "/t"
	if err := newAdmin(t, web.URL).Topics().Create(topicName(t, topic), 0); err != nil {
		t.Fatal(err)
	}
	// pulsaradmin's own suite sets a topic's compaction threshold.
	beforeTopics := countOf("compaction", "topic")
	if err := newAdmin(t, web.URL).Topics().SetCompactionThreshold(topicName(t, topic), 1<<20); err != nil {
		t.Fatalf("a topic's compactionThreshold: %v", err)
	}
	status, body, h := callHeader(t, "POST", "/admin/v2/persistent/"+ns+"/t/compactionThreshold", `2097152`)
	if status != http.StatusNoContent || !strings.HasPrefix(h.Get("Warning"), `299 - "compaction is not built: `) {
		t.Errorf("a topic's compactionThreshold: %d %s, Warning %q", status, body, h.Get("Warning"))
	}
	if status, body := call(t, "GET", "/admin/v2/persistent/"+ns+"/t/compactionThreshold", ""); status != http.StatusOK || body != "2097152" {
		t.Errorf("a topic's compactionThreshold read back: %d %s, want 2097152", status, body)
	}
	if n := countOf("compaction", "topic"); n != beforeTopics+1 {
		t.Errorf("topics holding a compaction threshold: %d, want %d", n, beforeTopics+1)
	}
	for path, body := range map[string]string{
		"publishRate":   `{"publishThrottlingRateInMsg":5,"publishThrottlingRateInByte":-1}`,
		"subscribeRate": `{"subscribeThrottlingRatePerConsumer":5,"ratePeriodInSecond":30}`,
	} {
		if _, _, h := callHeader(t, "POST", "/admin/v2/persistent/"+ns+"/t/"+path, body); h.Get("Warning") != "" {
			t.Errorf("a topic's %s, which is enforced, answered with Warning %q", path, h.Get("Warning"))
		}
	}

	// Refused: 405 with the reason, and a GET shows nothing was stored.
	p := "/admin/v2/namespaces/" + ns + "/inactiveTopicPolicies"
	status, body = call(t, "POST", p, `{"inactiveTopicDeleteMode":"delete_when_no_subscriptions","maxInactiveDurationSeconds":60,"deleteWhileInactive":true}`)
	if status != http.StatusMethodNotAllowed || !strings.Contains(body, "inactive topic deletion is not supported") {
		t.Errorf("inactiveTopicPolicies: %d %s, want 405 with the reason", status, body)
	}
	if status, body := call(t, "GET", p, ""); status != http.StatusNoContent {
		t.Errorf("inactiveTopicPolicies after a refused set: %d %s, want 204 (unset)", status, body)
	}
	p = "/admin/v2/namespaces/" + ns + "/encryptionRequired"
	if status, body := call(t, "POST", p, `true`); status != http.StatusMethodNotAllowed {
		t.Errorf("encryptionRequired: %d %s, want 405", status, body)
	}
	if status, body := call(t, "GET", p, ""); status != http.StatusOK || body != "false" {
		t.Errorf("encryptionRequired after a refused set: %d %s, want false", status, body)
	}
}

// TestCreateSubscriptionCreatesTopic: as Pulsar's internalCreateSubscription,
// creating a subscription on a topic that does not exist creates the topic
// when auto topic creation allows it (partitioned when that is the
// namespace's auto-creation type), and answers 404 when it does not.
func TestCreateSubscriptionCreatesTopic(t *testing.T) {
	adm := newAdmin(t, web.URL)
	ns := newNamespace(t, "subcreate")
	plain := topicName(t, "persistent://"+ns+"/plain")
	if err := adm.Subscriptions().Create(plain, "s", utils.Earliest); err != nil {
		t.Fatalf("create a subscription on a missing topic, auto-creation allowed: %v", err)
	}
	if subs, err := adm.Subscriptions().List(plain); err != nil || len(subs) != 1 || subs[0] != "s" {
		t.Fatalf("subscriptions of the created topic: %v, %v", subs, err)
	}

	name, _ := utils.GetNamespaceName(ns)
	three := 3
	if err := adm.Namespaces().SetTopicAutoCreation(*name, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned, Partitions: &three}); err != nil {
		t.Fatal(err)
	}
	parted := topicName(t, "persistent://"+ns+"/parted")
	if err := adm.Subscriptions().Create(parted, "s", utils.Latest); err != nil {
		t.Fatalf("create a subscription on a missing topic, partitioned auto-creation: %v", err)
	}
	meta, err := adm.Topics().GetMetadata(parted)
	if err != nil || meta.Partitions != 3 {
		t.Fatalf("partitioned metadata %+v, %v; want 3 partitions", meta, err)
	}
	p2 := topicName(t, "persistent://"+ns+"/parted-partition-2")
	if subs, err := adm.Subscriptions().List(p2); err != nil || len(subs) != 1 {
		t.Fatalf("subscriptions of partition 2: %v, %v", subs, err)
	}

	if err := adm.Namespaces().SetTopicAutoCreation(*name, utils.TopicAutoCreationConfig{Allow: false}); err != nil {
		t.Fatal(err)
	}
	err = adm.Subscriptions().Create(topicName(t, "persistent://"+ns+"/none"), "s", utils.Latest)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("create a subscription on a missing topic, auto-creation not allowed: %v, want 404", err)
	}
}

// BenchmarkPublishThrottleCPU measures what a throttled producer costs: the
// CPU time of this process (the broker and its pulsar-client-go client
// together) over 10 s at 100 msg/s delivered, once for a producer that
// asks for 100 msg/s with no publish rate, once for one that asks for
// 1,000 msg/s under a namespace publish rate of 100 msg/s. A pacer that
// spun would show as the second costing more. Run it alone:
//
//	go test -run '^$' -bench PublishThrottleCPU -benchtime 1x ./cluster/admin/
func BenchmarkPublishThrottleCPU(b *testing.B) {
	for _, c := range []struct {
		name    string
		asked   int
		rate    int64 // 0: none
		batches bool
	}{
		{"unthrottled-100", 100, 0, true}, {"throttled-1000-to-100", 1000, 100, true},
		// One message a SEND: as many SENDs a second in both, where a
		// throttled producer's client otherwise batches what waits.
		{"unthrottled-100-unbatched", 100, 0, false}, {"throttled-1000-to-100-unbatched", 1000, 100, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				publishCPU(b, c.asked, c.rate, c.batches)
			}
		})
	}
}

func publishCPU(b *testing.B, asked int, rate int64, batches bool) {
	adm := newAdmin(b, web.URL)
	ns := "public/cpu-" + uniq()
	if err := adm.Namespaces().CreateNamespace(ns); err != nil {
		b.Fatal(err)
	}
	defer adm.Namespaces().DeleteNamespace(ns)
	path := "/admin/v2/namespaces/" + ns + "/publishRate"
	if rate > 0 {
		body := fmt.Sprintf(`{"publishThrottlingRateInMsg":%d,"publishThrottlingRateInByte":-1}`, rate)
		if status, reason := call(b, "POST", path, body); status != http.StatusNoContent {
			b.Fatalf("set the publish rate: %d %s", status, reason)
		}
	}
	prod, err := newClient(b, region.ServiceURL()).CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/t", SendTimeout: time.Minute,
		DisableBatching: !batches})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	const warmup, window = 2 * time.Second, 10 * time.Second
	start := time.Now()
	from, end := start.Add(warmup), start.Add(warmup+window)
	var (
		receipts []time.Time
		sendErr  error
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		receipts, sendErr = produceAt(prod, asked, start, end)
	}()
	// The queues fill during the warm-up; the measure starts after it.
	time.Sleep(time.Until(from)) // the measure's start, not a wait for a condition
	cpu0 := processCPU(b)
	<-done
	cpu := processCPU(b) - cpu0
	if sendErr != nil {
		b.Fatal(sendErr)
	}
	delivered := 0
	for _, at := range receipts {
		if at.After(from) {
			delivered++
		}
	}
	b.ReportMetric(float64(delivered)/window.Seconds(), "msg/s")
	b.ReportMetric(float64(cpu.Milliseconds())/window.Seconds(), "cpu-ms/s")
	if delivered > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(delivered), "cpu-µs/msg")
	}
	// Lifted before the close, which waits for what the producer has
	// pending.
	call(b, "DELETE", path, "")
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestNamespaceDispatchRates: a namespace's dispatchRate limits what a
// topic's subscriptions deliver together, and its subscriptionDispatchRate
// what each subscription delivers. Checked as a bound that load cannot
// break: by any moment, a limiter has let through at most its burst (one
// period's worth) plus the rate times the time since it was made, which is
// after the test's start.
func TestNamespaceDispatchRates(t *testing.T) {
	const (
		limit    = 50 // messages a second
		messages = 100
	)
	adm := newAdmin(t, web.URL)
	rate := utils.DispatchRate{DispatchThrottlingRateInMsg: limit, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}
	for _, c := range []struct {
		name     string
		set      func(utils.NameSpaceName, utils.DispatchRate) error
		together bool // one limit for both subscriptions
	}{
		{"dispatchRate", adm.Namespaces().SetDispatchRate, true},
		{"subscriptionDispatchRate", adm.Namespaces().SetSubscriptionDispatchRate, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := newNamespace(t, "dispatch")
			name, _ := utils.GetNamespaceName(ns)
			if err := c.set(*name, rate); err != nil {
				t.Fatal(err)
			}
			topic := "persistent://" + ns + "/t"
			client := newClient(t, region.ServiceURL())
			start := time.Now()
			var consumers []pulsar.Consumer
			for _, sub := range []string{"a", "b"} {
				cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub})
				if err != nil {
					t.Fatal(err)
				}
				defer cons.Close()
				consumers = append(consumers, cons)
			}
			p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for range messages {
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}, nil)
			}
			if err := p.FlushWithCtx(context.Background()); err != nil {
				t.Fatal(err)
			}
			var (
				mu       sync.Mutex
				received = map[string]int{}
				wg       sync.WaitGroup
			)
			// over reports a count past the limiter's bound at now.
			over := func(n int, now time.Time) bool { return float64(n) > limit+limit*now.Sub(start).Seconds()+1 }
			for i, cons := range consumers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					for range messages {
						msg, err := cons.Receive(ctx)
						if err != nil {
							t.Errorf("subscription %d: %v", i, err)
							return
						}
						cons.Ack(msg)
						mu.Lock()
						received[cons.Subscription()]++
						n := received[cons.Subscription()]
						if c.together {
							n = received["a"] + received["b"]
						}
						// Read after the count: every one of the n had
						// arrived by now, whichever goroutine counted it.
						now := time.Now()
						mu.Unlock()
						if over(n, now) {
							t.Errorf("%d messages delivered %v after the start, over the rate of %d a second", n, now.Sub(start), limit)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestMaxUnackedMessagesOnSubscription: a topic's
// maxUnackedMessagesOnSubscription stops its Shared subscription's dispatch
// once the consumers hold that many messages unacked, says so in the
// stats (blockedSubscriptionOnUnackedMsgs), and resumes, up to the limit
// again, once acks bring them down to half.
func TestMaxUnackedMessagesOnSubscription(t *testing.T) {
	const limit = 10
	adm := newAdmin(t, web.URL)
	topic := "persistent://" + newNamespace(t, "unacked") + "/t"
	tn, _ := utils.GetTopicName(topic)
	if err := adm.Topics().Create(*tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().SetMaxUnackMessagesPerSubscription(*tn, limit); err != nil {
		t.Fatal(err)
	}
	// The topic loads again, with the policy applied before any dispatch.
	// The clients come after: pulsar-client-go's producer reconnecting
	// while it sends is a data race in the client (grabCnx).
	if err := adm.Topics().Unload(*tn); err != nil {
		t.Fatal(err)
	}
	cons := sharedConsumerWithBacklog(t, topic, 3*limit)
	receiveN := func(n int) []pulsar.Message {
		var got []pulsar.Message
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for range n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("after %d of %d messages: %v", len(got), n, err)
			}
			got = append(got, m)
		}
		return got
	}
	expectNothing := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if m, err := cons.Receive(ctx); err == nil {
			t.Fatalf("got %v beyond the subscription's unacked limit", m.ID())
		}
	}
	held := receiveN(limit)
	expectNothing()
	stats, err := adm.Topics().GetStats(*tn)
	if err != nil {
		t.Fatal(err)
	}
	if !stats.Subscriptions["s"].BlockedSubscriptionOnUnackedMsgs {
		t.Error("the subscription's stats do not say it is blocked on unacked messages")
	}
	for _, m := range held[:limit/2] {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	receiveN(limit / 2)
	expectNothing()
}

// sharedConsumerWithBacklog subscribes a Shared consumer to topic, under
// subscription "s", then sends it n messages; the consumer is closed when
// the test ends.
func sharedConsumerWithBacklog(t *testing.T, topic string, n int) pulsar.Consumer {
	t.Helper()
	client := newClient(t, region.ServiceURL())
	p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	for range n {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	return cons
}

// TestTopicDelayedDeliveryPolicy: with the topic's delayed delivery not
// active, a Shared consumer gets a message at once whatever its delivery
// time; with it active and a maximum delay, a send asking for less is
// delivered, and one asking for more is refused (NotAllowed, which
// pulsar-client-go turns into a send timeout) and not stored.
func TestTopicDelayedDeliveryPolicy(t *testing.T) {
	adm := newAdmin(t, web.URL)
	topic := "persistent://" + newNamespace(t, "delayed") + "/t"
	tn, _ := utils.GetTopicName(topic)
	client := newClient(t, region.ServiceURL())
	// Acks are confirmed, so that none is lost with the reloads below.
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var p pulsar.Producer
	defer func() { p.Close() }()
	// set applies a policy, and reloads the topic so that it holds from
	// the next send on. The producer is made again after the reload:
	// pulsar-client-go's producer reconnecting while it sends is a data
	// race in the client (grabCnx).
	set := func(d utils.DelayedDeliveryData) {
		t.Helper()
		if p != nil {
			p.Close()
		}
		if err := adm.Topics().SetDelayedDelivery(*tn, d); err != nil {
			t.Fatal(err)
		}
		if err := adm.Topics().Unload(*tn); err != nil {
			t.Fatal(err)
		}
		if p, err = client.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(payload string, after time.Duration) error {
		_, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(payload), DeliverAfter: after})
		return err
	}
	receive := func(want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}

	set(utils.DelayedDeliveryData{Active: false, TickTime: 1000})
	if err := send("an hour ahead", time.Hour); err != nil {
		t.Fatal(err)
	}
	receive("an hour ahead")

	set(utils.DelayedDeliveryData{Active: true, TickTime: 1000, MaxDelayInMillis: 60_000})
	if err := send("soon", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	receive("soon")
	if err := send("too far", time.Hour); err == nil {
		t.Fatal("a send an hour ahead, over a maximum of a minute, succeeded")
	}
	stats, err := adm.Topics().GetStats(*tn)
	if err != nil {
		t.Fatal(err)
	}
	if b := stats.Subscriptions["s"].MsgBacklog; b != 0 {
		t.Errorf("backlog %d after the refused send, want 0: it was stored", b)
	}
}

// TestTopicSchemaValidationEnforced: on a topic that has a schema, a
// producer without one connects, as Pulsar lets it, until the topic's
// schemaValidationEnforced is set: then it is refused (IncompatibleSchema),
// and the typed producer still connects.
func TestTopicSchemaValidationEnforced(t *testing.T) {
	adm := newAdmin(t, web.URL)
	topic := "persistent://" + newNamespace(t, "schemaenforced") + "/t"
	tn, _ := utils.GetTopicName(topic)
	connect := producerConnects(t, topic)
	if err := connect(pulsar.NewStringSchema(nil)); err != nil {
		t.Fatal(err)
	}
	if err := connect(nil); err != nil {
		t.Fatalf("a producer without a schema, validation not enforced: %v", err)
	}
	if err := adm.Topics().SetSchemaValidationEnforced(*tn, true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "a producer without a schema refused", func() bool {
		err := connect(nil)
		return err != nil && strings.Contains(err.Error(), "schema")
	})
	if err := connect(pulsar.NewStringSchema(nil)); err != nil {
		t.Errorf("the typed producer, validation enforced: %v", err)
	}
}

// producerConnects returns what tells whether a producer with schema s
// (nil: none) may connect to topic: its error, or nil.
func producerConnects(t *testing.T, topic string) func(s pulsar.Schema) error {
	client := newClient(t, region.ServiceURL())
	return func(s pulsar.Schema) error {
		p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: s})
		if err == nil {
			p.Close()
		}
		return err
	}
}

// TestNamespaceSchemaValidationEnforced: a namespace's
// schemaValidationEnforced refuses a producer without a schema on its
// topics that have one, as the topic's own policy does, and a topic's
// policy overrides it.
func TestNamespaceSchemaValidationEnforced(t *testing.T) {
	adm := newAdmin(t, web.URL)
	ns := newNamespace(t, "nsschemaenforced")
	topic := "persistent://" + ns + "/t"
	nsName, err := utils.GetNamespaceName(ns)
	if err != nil {
		t.Fatal(err)
	}
	connect := producerConnects(t, topic)
	if err := connect(pulsar.NewStringSchema(nil)); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Namespaces().GetSchemaValidationEnforced(*nsName); err != nil || on {
		t.Fatalf("unset: %v, %v; want false", on, err)
	}
	if err := adm.Namespaces().SetSchemaValidationEnforced(*nsName, true); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Namespaces().GetSchemaValidationEnforced(*nsName); err != nil || !on {
		t.Fatalf("after the set: %v, %v; want true", on, err)
	}
	testkit.WaitFor(t, "a producer without a schema refused", func() bool {
		err := connect(nil)
		return err != nil && strings.Contains(err.Error(), "schema")
	})
	if err := connect(pulsar.NewStringSchema(nil)); err != nil {
		t.Errorf("the typed producer, validation enforced: %v", err)
	}
	if err := adm.Topics().SetSchemaValidationEnforced(topicName(t, topic), false); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the topic's policy over the namespace's", func() bool { return connect(nil) == nil })
}

// TestNamespaceMaxUnackedMessages: a namespace's
// maxUnackedMessagesPerConsumer and maxUnackedMessagesPerSubscription hold
// a Shared consumer of its topics to that many unacked messages, as the
// topic policies of the same names do.
func TestNamespaceMaxUnackedMessages(t *testing.T) {
	const limit = 5
	for _, path := range []string{"maxUnackedMessagesPerConsumer", "maxUnackedMessagesPerSubscription"} {
		t.Run(path, func(t *testing.T) {
			ns := newNamespace(t, "nsunacked")
			p := "/admin/v2/namespaces/" + ns + "/" + path
			if status, body := call(t, "GET", p, ""); status != http.StatusNoContent {
				t.Fatalf("unset: %d %s, want 204", status, body)
			}
			if status, body := call(t, "POST", p, "-1"); status != http.StatusPreconditionFailed {
				t.Fatalf("a negative limit: %d %s, want 412", status, body)
			}
			if status, body := call(t, "POST", p, fmt.Sprint(limit)); status != http.StatusNoContent {
				t.Fatalf("set: %d %s", status, body)
			}
			if status, body := call(t, "GET", p, ""); status != http.StatusOK || body != fmt.Sprint(limit) {
				t.Fatalf("read back: %d %s, want %d", status, body, limit)
			}
			cons := sharedConsumerWithBacklog(t, "persistent://"+ns+"/t", 3*limit)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var held []pulsar.Message
			for range limit {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatalf("after %d of %d messages: %v", len(held), limit, err)
				}
				held = append(held, m)
			}
			short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancelShort()
			if m, err := cons.Receive(short); err == nil {
				t.Fatalf("got %v beyond the namespace's limit of %d unacked", m.ID(), limit)
			}
			for _, m := range held {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cons.Receive(ctx); err != nil {
				t.Fatalf("after the acks: %v", err)
			}
		})
	}
}

// TestSubscriptionStatsRates: a subscription's stats give Pulsar's
// msgRateRedeliver and messageAckRate, over the time since the previous
// stats call, from the broker's counts of redeliveries and acks.
func TestSubscriptionStatsRates(t *testing.T) {
	adm := newAdmin(t, web.URL)
	topic := "persistent://" + newNamespace(t, "subrates") + "/t"
	tn := topicName(t, topic)
	client := newClient(t, region.ServiceURL())
	cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		AckWithResponse: true, NackRedeliveryDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if _, err := adm.Topics().GetStats(tn); err != nil { // the rates' first sample
		t.Fatal(err)
	}
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons.Nack(m)
	if m, err = cons.Receive(ctx); err != nil {
		t.Fatalf("the redelivery: %v", err)
	}
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	stats, err := adm.Topics().GetStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	if s := stats.Subscriptions["s"]; s.MsgRateRedeliver <= 0 || s.MessageAckRate <= 0 {
		t.Errorf("msgRateRedeliver %v, messageAckRate %v after a redelivery and an ack; want both above 0", s.MsgRateRedeliver, s.MessageAckRate)
	}
}
