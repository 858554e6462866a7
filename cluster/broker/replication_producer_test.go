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
// named meridian.repl.<origin>, with the origin's metadata kept, its source
// (incarnation 1, offset sourceIndex) in wire.PropReplicationSource, and the
// source offset as the SEND's sequence ids. It returns the receipt.
func (c *rawClient) replicate(producerID uint64, sourceIndex uint64, md *pb.MessageMetadata, payload []byte) *pb.CommandSendReceipt {
	c.t.Helper()
	return c.replicateFrom(producerID, wire.ReplicationSource{Incarnation: 1, First: int64(sourceIndex), Last: int64(sourceIndex)}, md, payload)
}

// replicateFrom is replicate with the source given whole. A zero source
// sends none.
func (c *rawClient) replicateFrom(producerID uint64, src wire.ReplicationSource, md *pb.MessageMetadata, payload []byte) *pb.CommandSendReceipt {
	c.t.Helper()
	reply := c.sendReplicated(producerID, src, md, payload)
	if reply.GetType() != pb.BaseCommand_SEND_RECEIPT {
		c.t.Fatalf("after a replicated SEND: %v", reply)
	}
	return reply.GetSendReceipt()
}

func (c *rawClient) sendReplicated(producerID uint64, src wire.ReplicationSource, md *pb.MessageMetadata, payload []byte) *pb.BaseCommand {
	c.t.Helper()
	if src != (wire.ReplicationSource{}) {
		md = proto.CloneOf(md)
		md.SetProperties(append(md.GetProperties(), pb.KeyValue_builder{
			Key: proto.String(wire.PropReplicationSource), Value: proto.String(src.String())}.Build()))
	}
	msg, err := wire.AppendMessage(nil, md, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: pb.CommandSend_builder{
		ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(uint64(src.First)), HighestSequenceId: proto.Uint64(uint64(src.Last)),
	}.Build()}.Build()
	if err := c.w.WritePayloadCommand(cmd, nil, msg); err != nil {
		c.t.Fatal(err)
	}
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	reply, err := c.next()
	if err != nil {
		c.t.Fatalf("after a replicated SEND: %v", err)
	}
	return reply
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

// TestReplicationDedupBySource: the destination deduplicates replicated
// entries by their source (origin region, source topic incarnation, source
// offsets), never by the original producer's sequence ids. A producer with a
// fixed name that restarted without deduplication (its ids start at 0
// again) has every message stored; an entry resent at a source offset
// already stored is a duplicate; a new incarnation of the source topic,
// whose offsets start at 0 again, is stored; and a replicated entry without
// its source is refused.
func TestReplicationDedupBySource(t *testing.T) {
	r := startBroker(t, nil)
	topic := "persistent://public/default/dedup-by-source"
	c := openReplicationProducer(t, r.ServiceURL(), topic)
	md := func(seq uint64) *pb.MessageMetadata {
		return pb.MessageMetadata_builder{ProducerName: proto.String("fixed-name"), SequenceId: proto.Uint64(seq),
			PublishTime: proto.Uint64(1_700_000_000_000), ReplicatedFrom: proto.String("us-east")}.Build()
	}
	stored := func(rc *pb.CommandSendReceipt) bool { return int64(rc.GetMessageId().GetLedgerId()) >= 0 }
	src := func(inc, off int64) wire.ReplicationSource {
		return wire.ReplicationSource{Incarnation: inc, First: off, Last: off}
	}
	// The origin producer sent ids 0, 1, then restarted and sent 0, 1 again:
	// source offsets 0..3.
	for off, seq := range []uint64{0, 1, 0, 1} {
		if rc := c.replicateFrom(1, src(7, int64(off)), md(seq), []byte{byte(off)}); !stored(rc) {
			t.Fatalf("source offset %d (producer id %d) was taken for a duplicate", off, seq)
		}
	}
	if rc := c.replicateFrom(1, src(7, 2), md(0), []byte{2}); stored(rc) || rc.GetSequenceId() != 2 {
		t.Fatalf("a resend of source offset 2 was stored again: receipt %v", rc)
	}
	if rc := c.replicateFrom(1, src(8, 0), md(0), []byte{9}); !stored(rc) {
		t.Fatal("offset 0 of a new incarnation of the source topic was taken for a duplicate")
	}
	if reply := c.sendReplicated(1, wire.ReplicationSource{}, md(5), []byte{5}); reply.GetType() != pb.BaseCommand_SEND_ERROR ||
		reply.GetSendError().GetError() != pb.ServerError_NotAllowedError {
		t.Fatalf("a replicated entry without its source: %v, want SEND_ERROR NotAllowed", reply)
	}
}
