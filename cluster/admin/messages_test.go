package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestPeekBatchedAndCompressed peeks at batches written with each codec
// pulsar-client-go has: the admin API uncompresses the payload and
// pulsaradmin splits the batch into its messages.
func TestPeekBatchedAndCompressed(t *testing.T) {
	adm := newAdmin(t, web.URL)
	c := newClient(t, region.ServiceURL())
	for _, codec := range []pulsar.CompressionType{pulsar.NoCompression, pulsar.LZ4, pulsar.ZLib, pulsar.ZSTD} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			name := "persistent://public/default/peek-" + uniq()
			tn := topicName(t, name)
			if err := adm.Topics().Create(tn, 0); err != nil {
				t.Fatal(err)
			}
			if err := adm.Subscriptions().Create(tn, "s", utils.Earliest); err != nil {
				t.Fatal(err)
			}
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name, CompressionType: codec,
				BatchingMaxMessages: 3, BatchingMaxPublishDelay: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			done := make(chan error, 3)
			for i := range 3 {
				p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("batched-%d", i)),
					Properties: map[string]string{"n": fmt.Sprint(i)}}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					done <- err
				})
			}
			if err := p.FlushWithCtx(context.Background()); err != nil { // one batch of 3
				t.Fatal(err)
			}
			timeout := time.After(30 * time.Second)
			for range 3 {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-timeout:
					t.Fatal("the batch was not acknowledged within 30s")
				}
			}
			msgs, err := adm.Subscriptions().PeekMessages(tn, "s", 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 3 {
				t.Fatalf("peeked %d messages, want 3", len(msgs))
			}
			for i, m := range msgs {
				if string(m.Payload) != fmt.Sprintf("batched-%d", i) || m.MessageID.BatchIndex != i {
					t.Fatalf("message %d: %q batch index %d", i, m.Payload, m.MessageID.BatchIndex)
				}
			}
		})
	}
}

// TestPeekCreatesTheSubscription peeks under a name no subscription has:
// as in Pulsar, the subscription is created at the earliest position, so
// the peek shows the topic's first messages, and it stays.
func TestPeekCreatesTheSubscription(t *testing.T) {
	adm := newAdmin(t, web.URL)
	c := newClient(t, region.ServiceURL())
	name := "persistent://public/default/peek-new-" + uniq()
	tn := topicName(t, name)
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 3 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := adm.Subscriptions().PeekMessages(tn, "never-made", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || string(msgs[0].Payload) != "m0" || string(msgs[1].Payload) != "m1" {
		t.Fatalf("peeked %d messages %v, want m0 and m1", len(msgs), msgs)
	}
	subs, err := adm.Subscriptions().List(tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || subs[0] != "never-made" {
		t.Fatalf("subscriptions after the peek: %v, want [never-made]", subs)
	}
}
