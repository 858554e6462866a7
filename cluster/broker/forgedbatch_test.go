package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// TestForgedBatchCountRefused: a batch's message count is the client's
// claim. A SEND that claims a million messages in a few bytes (or behind a
// compressed payload that says it inflates to 6 MB) is refused: stored, it
// would take a million permits from its consumer, who earns back only the
// messages it really receives, and the subscription would stall for good.
// A real batch whose compression beats six bytes a message passes.
func TestForgedBatchCountRefused(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 10})

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("forger"),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)
	const claimed = 1_000_000
	for seq, md := range []*pb.MessageMetadata{
		pb.MessageMetadata_builder{NumMessagesInBatch: proto.Int32(claimed)}.Build(),
		pb.MessageMetadata_builder{NumMessagesInBatch: proto.Int32(claimed),
			Compression: pb.CompressionType_LZ4.Enum(), UncompressedSize: proto.Uint32(6 * claimed)}.Build(),
	} {
		md.SetProducerName("forger")
		md.SetSequenceId(uint64(seq))
		md.SetPublishTime(1)
		msg, err := wire.AppendMessage(nil, md, []byte("8 bytes!"))
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.w.WritePayloadCommand(pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
			ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(uint64(seq)), NumMessages: proto.Int32(claimed),
		}.Build()}.Build(), nil, msg); err != nil {
			t.Fatal(err)
		}
		if err := rc.w.Flush(); err != nil {
			t.Fatal(err)
		}
		if e := rc.expect(pb.BaseCommand_SEND_ERROR).GetSendError(); e.GetError() != pb.ServerError_NotAllowedError {
			t.Fatalf("forged batch %d: %v, want NotAllowedError", seq, e)
		}
	}

	// 500 empty messages in one LZ4 batch: fewer bytes than messages.
	p := createProducer(t, c, pulsar.ProducerOptions{Topic: topic, CompressionType: pulsar.LZ4,
		BatchingMaxMessages: 500, BatchingMaxPublishDelay: time.Hour})
	const batched = 500
	for range batched {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte{}}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("a message of a real compressed batch: %v", err)
			}
		})
	}
	if err := p.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range batched {
		m := receive(t, cons)
		if len(m.Payload()) != 0 {
			t.Fatalf("message %d: %q, want the empty messages of the real batch", i, m.Payload())
		}
		cons.Ack(m)
	}
}

// TestSendCountedByItsMetadata: a SEND counts for the messages its
// metadata holds, not for the num_messages it claims: a single message
// sent with num_messages of a million moves the topic's entry index (an
// entry's index is its last message's) by one past the message before it.
func TestSendCountedByItsMetadata(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	topic := topicFor(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	produce(t, createProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), "before-", 1)

	rc := dialRaw(t, brokerAddr(r))
	rc.connect(20)
	rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1), ProducerName: proto.String("claimer"),
	}.Build()}.Build())
	rc.expect(pb.BaseCommand_PRODUCER_SUCCESS)
	msg, err := wire.AppendMessage(nil, pb.MessageMetadata_builder{ProducerName: proto.String("claimer"),
		SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)}.Build(), []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.w.WritePayloadCommand(pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0), NumMessages: proto.Int32(1_000_000),
	}.Build()}.Build(), nil, msg); err != nil {
		t.Fatal(err)
	}
	if err := rc.w.Flush(); err != nil {
		t.Fatal(err)
	}
	rc.expect(pb.BaseCommand_SEND_RECEIPT)

	first, second := receive(t, cons), receive(t, cons)
	if first.Index() == nil || second.Index() == nil {
		t.Fatal("the messages carry no broker index")
	}
	if d := *second.Index() - *first.Index(); d != 1 {
		t.Fatalf("the claimed million's index is %d past the message before it, want 1", d)
	}
}
