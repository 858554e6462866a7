package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// replicate sends one message as the replicator does: through a producer
// named meridian.repl.<origin>, with the origin's metadata kept, and the
// source offset as the SEND's sequence ids. It returns the receipt.
func (c *rawClient) replicate(producerID uint64, sourceIndex uint64, md *pb.MessageMetadata, payload []byte) *pb.CommandSendReceipt {
	c.t.Helper()
	msg, err := wire.AppendMessage(nil, md, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(sourceIndex), HighestSequenceId: proto.Uint64(sourceIndex),
	}.Build()}.Build()
	if err := c.w.WritePayloadCommand(cmd, nil, msg); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	reply, err := c.next()
	if err != nil || reply.GetType() != pb.BaseCommand_SEND_RECEIPT {
		c.t.Fatalf("after a replicated SEND: %v, %v", reply, err)
	}
	return reply.GetSendReceipt()
}

// openReplicationProducer connects to the broker at serviceURL and opens
// producer 1 on topic as the replicator of region us-east does.
func openReplicationProducer(t *testing.T, serviceURL, topic string) *rawClient {
	t.Helper()
	c := dialRaw(t, strings.TrimPrefix(serviceURL, "pulsar://"))
	c.connect(int32(pb.ProtocolVersion_v20))
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		ProducerName: proto.String(broker.ReplicationProducerPrefix + "us-east"),
	}.Build()}.Build())
	if reply, err := c.next(); err != nil || reply.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		t.Fatalf("replication PRODUCER: %v, %v", reply, err)
	}
	return c
}

// TestReplicationProducer: entries of a replication producer keep their
// metadata as sent (origin, producer name, publish time), and a resend
// after a restart of the broker is recognised as a duplicate.
func TestReplicationProducer(t *testing.T) {
	storage := newStorage(t)
	r := startBroker(t, storage)
	topic := "persistent://public/default/replicated"
	mdOf := func(seq uint64) *pb.MessageMetadata {
		return pb.MessageMetadata_builder{
			ProducerName: proto.String("orders-app"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1_700_000_000_000 + seq),
			ReplicatedFrom: proto.String("us-east"),
		}.Build()
	}
	c := openReplicationProducer(t, r.ServiceURL(), topic)
	for i := range uint64(3) {
		if rc := c.replicate(1, 100+i, mdOf(i), []byte{byte(i)}); int64(rc.GetMessageId().GetLedgerId()) < 0 {
			t.Fatalf("entry %d taken for a duplicate", i)
		}
	}
	c.nc.Close()
	r.Close()

	r = startBroker(t, storage)
	c = openReplicationProducer(t, r.ServiceURL(), topic)
	if rc := c.replicate(1, 102, mdOf(2), []byte{2}); int64(rc.GetMessageId().GetLedgerId()) != -1 || rc.GetSequenceId() != 102 {
		t.Fatalf("a resent replicated entry after a restart was stored again: receipt %v", rc)
	}
	if rc := c.replicate(1, 103, mdOf(3), []byte{3}); int64(rc.GetMessageId().GetLedgerId()) < 0 {
		t.Fatalf("a new replicated entry was taken for a duplicate: %v", rc)
	}

	cl := newClient(t, r.ServiceURL())
	rd, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for i := range uint64(4) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := rd.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.ProducerName() != "orders-app" || m.GetReplicatedFrom() != "us-east" ||
			m.PublishTime().UnixMilli() != int64(1_700_000_000_000+i) || m.Payload()[0] != byte(i) {
			t.Fatalf("message %d changed on the way: producer %q from %q published %v payload %v",
				i, m.ProducerName(), m.GetReplicatedFrom(), m.PublishTime(), m.Payload())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if m, err := rd.Next(ctx); err == nil {
		t.Fatalf("a duplicate was stored: %v", m.ID())
	}
}
