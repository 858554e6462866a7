package admin_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

func newClient(t testing.TB, url string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second,
		ConnectionTimeout: 10 * time.Second, Logger: plog.NewLoggerWithSlog(testLogger())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func topicName(t testing.TB, name string) utils.TopicName {
	t.Helper()
	tn, err := utils.GetTopicName(name)
	if err != nil {
		t.Fatal(err)
	}
	return *tn
}

// produce publishes n messages "<prefix>-i" without batching, each with a
// property, and returns their ids.
func produce(t testing.TB, c pulsar.Client, topic, prefix string, n int) []pulsar.MessageID {
	t.Helper()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ids []pulsar.MessageID
	for i := range n {
		id, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%s-%d", prefix, i)),
			Properties: map[string]string{"i": fmt.Sprint(i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestTopicLifecycle drives the topic endpoints through pulsaradmin:
// create, list, metadata, stats, internal stats, last message id,
// subscriptions and their operations, messages by id and peek, terminate,
// unload, lookup, bundle and delete.
func TestTopicLifecycle(t *testing.T) {
	id := uniq()
	adm := newAdmin(t, web.URL)
	c := newClient(t, region.ServiceURL())
	ns, _ := utils.GetNamespaceName("public/default")

	plain := topicName(t, "persistent://public/default/lifecycle-plain-"+id)
	if err := adm.Topics().Create(plain, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Create(plain, 0); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second create: %v, want 409", err)
	}
	part := topicName(t, "persistent://public/default/lifecycle-part-"+id)
	if err := adm.Topics().Create(part, 3); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Topics().GetMetadata(part)
	if err != nil || md.Partitions != 3 {
		t.Fatalf("metadata %+v, %v", md, err)
	}
	if err := adm.Topics().Update(part, 4); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Update(part, 2); err == nil {
		t.Fatal("shrinking partitions succeeded")
	}
	partitioned, plainList, err := adm.Topics().List(*ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(partitioned, part.String()) || !slices.Contains(plainList, plain.String()) {
		t.Fatalf("list: partitioned %v, non-partitioned %v", partitioned, plainList)
	}

	// Subscriptions and messages.
	earliest := utils.Earliest
	if err := adm.Subscriptions().Create(plain, "from-start", earliest); err != nil {
		t.Fatal(err)
	}
	if err := adm.Subscriptions().Create(plain, "from-end", utils.Latest); err != nil {
		t.Fatal(err)
	}
	ids := produce(t, c, plain.String(), "m", 5)
	subs, err := adm.Subscriptions().List(plain)
	if err != nil || !slices.Equal(subs, []string{"from-end", "from-start"}) {
		t.Fatalf("subscriptions %v, %v", subs, err)
	}
	st, err := adm.Topics().GetStats(plain)
	if err != nil {
		t.Fatal(err)
	}
	if st.MsgCounterIn != 5 || st.StorageSize <= 0 || st.Subscriptions["from-start"].MsgBacklog != 5 ||
		st.Subscriptions["from-end"].MsgBacklog != 5 || st.Replication == nil || st.AverageMsgSize <= 0 {
		t.Fatalf("stats %+v", st)
	}
	// The topic was created before its messages were published, and both
	// are in the past.
	if now := time.Now().UnixMilli(); st.TopicCreationTimeStamp <= 0 || st.LastPublishTimestamp < st.TopicCreationTimeStamp ||
		st.LastPublishTimestamp > now {
		t.Fatalf("created at %d, last published at %d (now %d)", st.TopicCreationTimeStamp, st.LastPublishTimestamp, now)
	}
	msgs, err := adm.Subscriptions().PeekMessages(plain, "from-start", 2)
	if err != nil || len(msgs) != 2 || string(msgs[0].Payload) != "m-0" || string(msgs[1].Payload) != "m-1" ||
		msgs[1].Properties["i"] != "1" {
		t.Fatalf("peek: %v %v", msgs, err)
	}
	l, e := ledgerEntry(t, ids[3])
	byID, err := adm.Subscriptions().GetMessagesByID(plain, l, e)
	if err != nil || len(byID) != 1 || string(byID[0].Payload) != "m-3" || byID[0].MessageID.LedgerID != l ||
		byID[0].MessageID.EntryID != e || byID[0].Properties["i"] != "3" {
		t.Fatalf("message by id: %+v %v", byID, err)
	}
	last, err := adm.Topics().GetLastMessageID(plain)
	if wantL, wantE := ledgerEntry(t, ids[4]); err != nil || last.LedgerID != wantL || last.EntryID != wantE {
		t.Fatalf("last message id %+v, %v", last, err)
	}
	if err := adm.Subscriptions().SkipMessages(plain, "from-start", 2); err != nil {
		t.Fatal(err)
	}
	if err := adm.Subscriptions().ClearBacklog(plain, "from-end"); err != nil {
		t.Fatal(err)
	}
	st, _ = adm.Topics().GetStats(plain)
	if st.Subscriptions["from-start"].MsgBacklog != 3 || st.Subscriptions["from-end"].MsgBacklog != 0 {
		t.Fatalf("after skip and clear: %+v", st.Subscriptions)
	}
	if err := adm.Subscriptions().ResetCursorToMessageID(plain, "from-end", *toAdminID(t, ids[1])); err != nil {
		t.Fatal(err)
	}
	st, _ = adm.Topics().GetStats(plain)
	if st.Subscriptions["from-end"].MsgBacklog != 4 {
		t.Fatalf("after reset to the 2nd message: backlog %d, want 4", st.Subscriptions["from-end"].MsgBacklog)
	}
	if err := adm.Subscriptions().ResetCursorToTimestamp(plain, "from-end", 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Subscriptions().ExpireMessages(plain, "from-end", 0); err != nil {
		t.Fatal(err)
	}
	st, _ = adm.Topics().GetStats(plain)
	if st.Subscriptions["from-end"].MsgBacklog != 0 {
		t.Fatalf("after expiring everything: backlog %d", st.Subscriptions["from-end"].MsgBacklog)
	}
	is, err := adm.Topics().GetInternalStats(plain)
	if err != nil || is.NumberOfEntries != 5 || len(is.Ledgers) == 0 || len(is.Cursors) != 2 {
		t.Fatalf("internal stats %+v, %v", is, err)
	}
	if err := adm.Subscriptions().Delete(plain, "from-end"); err != nil {
		t.Fatal(err)
	}
	if err := adm.Subscriptions().Delete(plain, "from-end"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleting a deleted subscription: %v, want 404", err)
	}

	// Partitioned stats, subscriptions on every partition.
	produce(t, c, part.String(), "p", 8)
	if err := adm.Subscriptions().Create(part, "all", utils.Earliest); err != nil {
		t.Fatal(err)
	}
	ps, err := adm.Topics().GetPartitionedStats(part, true)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Metadata.Partitions != 4 || ps.Subscriptions["all"].MsgBacklog != 8 || len(ps.Partitions) == 0 {
		t.Fatalf("partitioned stats %+v", ps)
	}
	if ps.TopicCreationTimeStamp <= 0 || ps.LastPublishTimestamp < ps.TopicCreationTimeStamp {
		t.Fatalf("partitioned topic created at %d, last published at %d", ps.TopicCreationTimeStamp, ps.LastPublishTimestamp)
	}
	var in int64
	for _, p := range ps.Partitions {
		in += p.MsgCounterIn
	}
	if in != 8 {
		t.Fatalf("partitions received %d messages, want 8", in)
	}

	// Lookup, bundle, terminate, unload, delete.
	ld, err := adm.Topics().Lookup(plain)
	if err != nil || ld.BrokerURL != region.ServiceURL() || ld.HTTPURL != webURL() {
		t.Fatalf("lookup %+v, %v", ld, err)
	}
	b, err := adm.Topics().GetBundleRange(plain)
	if err != nil || !strings.HasPrefix(b, "0x") || !strings.Contains(b, "_0x") {
		t.Fatalf("bundle %q, %v", b, err)
	}
	if _, err := adm.Topics().Terminate(plain); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Unload(plain); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Delete(plain, false, true); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().Delete(part, true, false); err != nil {
		t.Fatal(err)
	}
	partitioned, plainList, err = adm.Topics().List(*ns)
	if err != nil || slices.Contains(partitioned, part.String()) || slices.Contains(plainList, plain.String()) {
		t.Fatalf("after delete: %v %v %v", partitioned, plainList, err)
	}
	if _, err := adm.Topics().GetStats(plain); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("stats of a deleted topic: %v, want 404", err)
	}
}

// ledgerEntry reads a client message id's ledger and entry.
func ledgerEntry(t testing.TB, id pulsar.MessageID) (int64, int64) {
	t.Helper()
	return id.LedgerID(), id.EntryID()
}

func toAdminID(t testing.TB, id pulsar.MessageID) *utils.MessageID {
	t.Helper()
	l, e := ledgerEntry(t, id)
	return &utils.MessageID{LedgerID: l, EntryID: e, PartitionIndex: -1, BatchIndex: -1}
}
