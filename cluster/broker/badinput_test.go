package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// TestBadInput sends the standalone broker what no client should, through
// raw connections, while pulsar-client-go traffic runs alongside. Each case
// must end in an error reply or the one connection closed; the bystanders
// keep working, and the broker's goroutines return to their count from
// before the case.
func TestBadInput(t *testing.T) {
	r := startBroker(t, nil)
	c := newClient(t, r.ServiceURL())
	addr := brokerAddr(r)

	bystanderTopic := topicFor(t, "-bystander")
	bp := createProducer(t, c, pulsar.ProducerOptions{Topic: bystanderTopic, DisableBatching: true})
	bc := subscribe(t, c, pulsar.ConsumerOptions{Topic: bystanderTopic, SubscriptionName: "s"})
	round := 0
	bystandersWork := func(t *testing.T) {
		t.Helper()
		round++
		want := fmt.Sprint("round-", round)
		if _, err := bp.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(want)}); err != nil {
			t.Fatalf("bystander producer: %v", err)
		}
		m := receive(t, bc)
		if string(m.Payload()) != want {
			t.Fatalf("bystander consumer got %q, want %q", m.Payload(), want)
		}
		bc.Ack(m)
	}
	bystandersWork(t)

	// The raw consumers' topic is loaded before any baseline is taken.
	rawTopic := topicFor(t, "-raw")
	rp := createProducer(t, c, pulsar.ProducerOptions{Topic: rawTopic, DisableBatching: true})

	// A topic held by an exclusive producer, watched by a consumer.
	exclTopic := topicFor(t, "-exclusive")
	holder := createProducer(t, c, pulsar.ProducerOptions{Topic: exclTopic, DisableBatching: true, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	watcher := subscribe(t, c, pulsar.ConsumerOptions{Topic: exclTopic, SubscriptionName: "watch"})
	markers := 0

	frame := func(cmd *pb.BaseCommand) []byte {
		b, err := wire.AppendCommand(nil, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	connectFrame := frame(pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: pb.CommandConnect_builder{
		ClientVersion: proto.String("raw"), ProtocolVersion: proto.Int32(20)}.Build()}.Build())
	// rawSubscribe attaches consumer 1 of a non-durable subscription at
	// the end of the raw topic (it ends with the connection), with permits.
	rawSubscribe := func(t *testing.T, rc *rawClient, permits uint32) {
		t.Helper()
		rc.connect(20)
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: pb.CommandSubscribe_builder{
			Topic: proto.String(rawTopic), Subscription: proto.String("raw-reader"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1), Durable: proto.Bool(false),
			InitialPosition: pb.CommandSubscribe_Latest.Enum(),
		}.Build()}.Build())
		rc.expect(pb.BaseCommand_SUCCESS)
		if permits > 0 {
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
				ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(permits)}.Build()}.Build())
		}
	}
	// rawReceive reads n MESSAGE frames for consumer 1 and acks each.
	rawReceive := func(t *testing.T, rc *rawClient, n int) {
		t.Helper()
		for range n {
			msg := rc.expect(pb.BaseCommand_MESSAGE).GetMessage()
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ACK.Enum(), Ack: pb.CommandAck_builder{
				ConsumerId: proto.Uint64(1), AckType: pb.CommandAck_Individual.Enum(),
				MessageId: []*pb.MessageIdData{msg.GetMessageId()},
			}.Build()}.Build())
		}
	}
	pingPong := func(t *testing.T, rc *rawClient) {
		t.Helper()
		rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build())
		rc.expect(pb.BaseCommand_PONG)
	}

	for _, tc := range []struct {
		name string
		// run misbehaves on rc; it reports whether the broker must have
		// closed the connection (otherwise it must still answer a PING).
		run func(t *testing.T, rc *rawClient) (mustClose bool)
	}{
		{"garbage", func(t *testing.T, rc *rawClient) bool {
			rc.nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
			return true
		}},
		{"oversized frame", func(t *testing.T, rc *rawClient) bool {
			b := binary.BigEndian.AppendUint32(append([]byte(nil), connectFrame...), 1<<30)
			rc.nc.Write(append(b, 0, 0, 0, 0))
			return true
		}},
		{"unknown command type", func(t *testing.T, rc *rawClient) bool {
			rc.connect(20)
			b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(pb.BaseCommand_builder{Type: pb.BaseCommand_Type(999).Enum()}.Build())
			if err != nil {
				t.Fatal(err)
			}
			out := binary.BigEndian.AppendUint32(nil, uint32(len(b)+4))
			out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
			rc.nc.Write(append(out, b...))
			return true
		}},
		{"command the broker does not serve", func(t *testing.T, rc *rawClient) bool {
			rc.connect(20)
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_NEW_TXN.Enum(), NewTxn: pb.CommandNewTxn_builder{
				RequestId: proto.Uint64(1)}.Build()}.Build())
			// An ERROR reply would do as well as a close.
			rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if cmd, err := rc.next(); err == nil && cmd.GetType() == pb.BaseCommand_ERROR {
				return false
			}
			return true
		}},
		{"SEND without a producer", func(t *testing.T, rc *rawClient) bool {
			rc.connect(20)
			rc.sendMessage(7, "nobody", 0, []byte("x"))
			return true
		}},
		{"SEND right behind PRODUCER", func(t *testing.T, rc *rawClient) bool {
			rc.connect(20)
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
				Topic: proto.String(rawTopic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}.Build()}.Build())
			rc.sendMessage(1, "eager", 0, []byte("eager"))
			// Either the broker closes (Pulsar: producer not ready) or it
			// serves the producer and then the SEND in order.
			rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				cmd, err := rc.next()
				if err != nil {
					return true
				}
				switch cmd.GetType() {
				case pb.BaseCommand_PRODUCER_SUCCESS:
				case pb.BaseCommand_SEND_RECEIPT, pb.BaseCommand_SEND_ERROR:
					rc.nc.SetReadDeadline(time.Time{})
					return false
				default:
					t.Fatalf("unexpected %v", cmd)
				}
			}
		}},
		{"SEND from a producer waiting for exclusive access", func(t *testing.T, rc *rawClient) bool {
			rc.connect(20)
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
				Topic: proto.String(exclTopic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
				ProducerName: proto.String("waiter"), ProducerAccessMode: pb.ProducerAccessMode_WaitForExclusive.Enum(),
			}.Build()}.Build())
			// The broker answers "not ready" while the holder is connected
			// (pulsar-client-go then waits without a timeout).
			rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if cmd, err := rc.next(); err != nil || cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS ||
				cmd.GetProducerSuccess().GetProducerReady() {
				t.Fatalf("a producer waiting for exclusive access: got %v, %v; want PRODUCER_SUCCESS, not ready", cmd, err)
			}
			rc.nc.SetReadDeadline(time.Time{})
			rc.sendMessage(1, "waiter", 0, []byte("written by a waiting producer"))
			rc.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			closed := false
			if cmd, err := rc.next(); err != nil {
				closed = true
			} else if cmd.GetType() == pb.BaseCommand_SEND_RECEIPT {
				t.Errorf("a SEND from a producer still waiting for exclusive access was stored: %v", cmd)
			}
			rc.nc.SetReadDeadline(time.Time{})
			// Nothing but the holder's messages reach the topic.
			markers++
			want := fmt.Sprint("marker-", markers)
			if _, err := holder.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(want)}); err != nil {
				t.Fatal(err)
			}
			for {
				m := receive(t, watcher)
				watcher.Ack(m)
				if string(m.Payload()) == want {
					break
				}
				t.Errorf("the exclusive topic holds %q from a producer that never got access", m.Payload())
			}
			return closed
		}},
		{"ACK of unknown ids", func(t *testing.T, rc *rawClient) bool {
			rawSubscribe(t, rc, 100)
			for i, tc := range []struct {
				consumer uint64
				typ      pb.CommandAck_AckType
				ledger   uint64
			}{
				{1, pb.CommandAck_Individual, 999_999},
				{1, pb.CommandAck_Individual, math.MaxUint64},
				{42, pb.CommandAck_Individual, 1},
				{1, pb.CommandAck_Cumulative, 999_999},
			} {
				rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ACK.Enum(), Ack: pb.CommandAck_builder{
					ConsumerId: proto.Uint64(tc.consumer), AckType: tc.typ.Enum(), RequestId: proto.Uint64(uint64(10 + i)),
					MessageId: []*pb.MessageIdData{pb.MessageIdData_builder{LedgerId: proto.Uint64(tc.ledger), EntryId: proto.Uint64(5)}.Build()},
				}.Build()}.Build())
				resp := rc.expect(pb.BaseCommand_ACK_RESPONSE).GetAckResponse()
				if resp.GetRequestId() != uint64(10+i) {
					t.Fatalf("ACK_RESPONSE %v", resp)
				}
				if !resp.HasError() {
					t.Errorf("ack %d (consumer %d, %v of ledger %d) answered without an error", i, tc.consumer, tc.typ, tc.ledger)
				}
			}
			// The subscription still delivers what comes next: the bogus
			// cumulative ack moved nothing past it.
			produce(t, rp, "after-bogus-ack-", 1)
			rawReceive(t, rc, 1)
			return false
		}},
		{"absurd FLOW permits", func(t *testing.T, rc *rawClient) bool {
			rawSubscribe(t, rc, 0)
			flow := pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
				ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(math.MaxUint32)}.Build()}.Build()
			rc.send(flow)
			rc.send(flow)
			produce(t, rp, "flow-", 5)
			rawReceive(t, rc, 5)
			rc.send(flow)
			// FLOW for a consumer that does not exist
			rc.send(pb.BaseCommand_builder{Type: pb.BaseCommand_FLOW.Enum(), Flow: pb.CommandFlow_builder{
				ConsumerId: proto.Uint64(99), MessagePermits: proto.Uint32(math.MaxUint32)}.Build()}.Build())
			produce(t, rp, "flow-more-", 5)
			rawReceive(t, rc, 5)
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := meridianGoroutines()
			conns := r.Server().Connections()
			rc := dialRaw(t, addr)
			if tc.run(t, rc) {
				if !rc.closed() {
					t.Fatal("the broker kept the connection open")
				}
			} else {
				pingPong(t, rc)
			}
			bystandersWork(t)
			rc.nc.Close()
			testkit.WaitFor(t, "the raw connection to be gone", func() bool { return r.Server().Connections() == conns })
			awaitGoroutines(t, base)
			bystandersWork(t)
		})
	}
}
