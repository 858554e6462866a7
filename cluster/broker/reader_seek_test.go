package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestReaderSeekByTime: a reader that seeks to now has nothing left to
// read, and then reads what is published after (its subscription survives
// the seek's disconnection).
func TestReaderSeekByTime(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := "persistent://public/default/reader-seek-time"
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 5 {
		if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: fmt.Append(nil, "old-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	rd, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if err := rd.SeekByTime(time.Now()); err != nil {
		t.Fatal(err)
	}
	if rd.HasNext() {
		t.Fatal("a reader sought to now still has messages to read")
	}
	if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, rd); string(m.Payload()) != "new" {
		t.Fatalf("after the seek the reader read %q", m.Payload())
	}
}
