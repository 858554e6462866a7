package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
	"github.com/meridian-mq/meridian/global"
)

// TestDedupBatchOverlapsStored: pulsar-client-go puts a resend and new
// messages in one batch, whose SEND carries the first sequence id only (no
// highest_sequence_id). The deduplication state must hold the highest id
// of each stored batch, read from its messages, and a batch that overlaps
// what is stored must have its new messages stored, each id exactly once.
//
// This is TestStandaloneCrashRestart's loss (cmd/meridian): run 1 stored
// the batch 2500-2508 and died before its receipt; the restarted broker
// replayed it as "2500 stored", and answered run 2's first batch,
// 2500-2831 (resends and new messages), as a duplicate of it: 2509-2831
// got receipts and were never stored.
func TestDedupBatchOverlapsStored(t *testing.T) {
	r := startBroker(t, nil)
	ns := createNamespace(t, r, "dedupbatch", global.Policies{DeduplicationEnabled: new(true)})
	c := newClient(t, r.ServiceURL())
	ctx := context.Background()

	// sendBatch sends ids [from, to) as one batch from a new producer
	// named name, and waits for every receipt.
	sendBatch := func(t *testing.T, topic, name string, from, to int64) {
		t.Helper()
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: name,
			BatchingMaxMessages: 1000, BatchingMaxPublishDelay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		errs := make(chan error, to-from)
		for seq := from; seq < to; seq++ {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.FormatInt(seq, 10)), SequenceID: &seq},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
		}
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Fatal(err)
		}
		for range to - from {
			if err := <-errs; err != nil {
				t.Fatalf("send of [%d, %d): %v", from, to, err)
			}
		}
	}
	// check reads the topic from the start: ids [0, n), each once.
	check := func(t *testing.T, topic string, n int64) {
		t.Helper()
		rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		stored := map[int64]int{}
		for rd.HasNext() {
			m := next(t, rd)
			seq, err := strconv.ParseInt(string(m.Payload()), 10, 64)
			if err != nil {
				t.Fatalf("payload %q", m.Payload())
			}
			stored[seq]++
		}
		var missing, twice []int64
		for seq := range n {
			switch stored[seq] {
			case 1:
			case 0:
				missing = append(missing, seq)
			default:
				twice = append(twice, seq)
			}
		}
		if len(missing) > 0 || len(twice) > 0 || len(stored) != int(n) {
			t.Errorf("ids [0, %d): missing %v, stored more than once %v (%d distinct stored)", n, missing, twice, len(stored))
		}
	}

	for _, tc := range []struct {
		name     string
		from, to int64 // the resent batch, after [0, 9) is stored
		reload   bool  // the topic reloads (deduplication replays) before the resend
	}{
		{name: "from the stored batch's first id", from: 0, to: 31},
		{name: "from the stored batch's first id, after a reload", from: 0, to: 31, reload: true},
		{name: "from inside the stored batch", from: 4, to: 31},
		{name: "from inside the stored batch, after a reload", from: 4, to: 31, reload: true},
		{name: "from the last stored id", from: 8, to: 20, reload: true},
		{name: "all stored already", from: 2, to: 9, reload: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := topicIn(t, ns)
			sendBatch(t, topic, "overlap", 0, 9)
			if tc.reload {
				reloadTopic(t, r, topic)
			}
			sendBatch(t, topic, "overlap", tc.from, tc.to)
			check(t, topic, max(tc.to, 9))
			// And the state holds what is stored: a new producer of the
			// name continues after its highest id.
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "overlap", DisableBatching: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(max(tc.to, 9)))})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p.LastSequenceID(), max(tc.to, 9); got != want {
				t.Errorf("next generated sequence id %d (message %v), want %d: the broker announced %d as the last stored", got, id, want, got-1)
			}
		})
	}
}

// reloadTopic unloads topic and loads it again on r.
func reloadTopic(t *testing.T, r *brokertest.Broker, topic string) {
	t.Helper()
	tn := mustTopic(t, topic)
	r.Service().Unload(tn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Service().Topic(ctx, tn, true); err != nil {
		t.Fatal(err)
	}
}
