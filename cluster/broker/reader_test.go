package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestReaders runs pulsar-client-go readers (non-durable subscriptions)
// against one standalone region.
func TestReaders(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())

	newReader := func(t *testing.T, topic string, start pulsar.MessageID, inclusive bool) pulsar.Reader {
		t.Helper()
		rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: start, StartMessageIDInclusive: inclusive})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rd.Close)
		return rd
	}
	// readAll reads until HasNext reports the end, checking payloads.
	readAll := func(t *testing.T, rd pulsar.Reader, want ...string) {
		t.Helper()
		var got []string
		for rd.HasNext() {
			got = append(got, string(next(t, rd).Payload()))
			if len(got) > len(want) {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read %v, want %v", got, want)
		}
	}
	msgs := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprint("m", i))
		}
		return out
	}

	t.Run("unbatched", func(t *testing.T) {
		topic := topicFor(t)
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		ids := produce(t, p, "m", 10)

		t.Run("earliest", func(t *testing.T) { readAll(t, newReader(t, topic, pulsar.EarliestMessageID(), false), msgs(0, 10)...) })
		t.Run("after id", func(t *testing.T) { readAll(t, newReader(t, topic, ids[4], false), msgs(5, 10)...) })
		t.Run("from id inclusive", func(t *testing.T) { readAll(t, newReader(t, topic, ids[4], true), msgs(4, 10)...) })
		t.Run("last id inclusive", func(t *testing.T) { readAll(t, newReader(t, topic, ids[9], true), "m9") })
		t.Run("latest", func(t *testing.T) {
			rd := newReader(t, topic, pulsar.LatestMessageID(), false)
			if rd.HasNext() {
				t.Fatal("a reader at latest has a next message before anything new is sent")
			}
			produce(t, p, "new", 1)
			if m := next(t, rd); string(m.Payload()) != "new0" {
				t.Fatalf("reader at latest read %q, want new0", m.Payload())
			}
		})
		t.Run("latest inclusive", func(t *testing.T) {
			// Pulsar: a reader at latest with StartMessageIDInclusive reads
			// the last message.
			rd := newReader(t, topic, pulsar.LatestMessageID(), true)
			if m := next(t, rd); string(m.Payload()) != "new0" {
				t.Fatalf("inclusive reader at latest read %q, want new0 (the last message)", m.Payload())
			}
		})
	})

	t.Run("batched", func(t *testing.T) {
		topic := topicFor(t)
		p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 5, BatchingMaxPublishDelay: time.Hour})
		ids := make([]pulsar.MessageID, 10)
		for i := range 10 {
			p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, "m", i)},
				func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						t.Error(err)
					}
					ids[i] = id
				})
		}
		if err := p.FlushWithCtx(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ids[2].BatchIdx() != 2 || ids[2].EntryID() != ids[0].EntryID() {
			t.Fatalf("not batched as expected: %v %v", ids[0], ids[2])
		}
		t.Run("earliest", func(t *testing.T) { readAll(t, newReader(t, topic, pulsar.EarliestMessageID(), false), msgs(0, 10)...) })
		t.Run("after id inside a batch", func(t *testing.T) { readAll(t, newReader(t, topic, ids[2], false), msgs(3, 10)...) })
		t.Run("from id inside a batch inclusive", func(t *testing.T) {
			readAll(t, newReader(t, topic, ids[7], true), msgs(7, 10)...)
		})
	})

	t.Run("empty topic", func(t *testing.T) {
		topic := topicFor(t)
		createProducer(t, c, pulsar.ProducerOptions{Topic: topic})
		rd := newReader(t, topic, pulsar.EarliestMessageID(), false)
		if rd.HasNext() {
			t.Fatal("HasNext on an empty topic")
		}
	})
}
