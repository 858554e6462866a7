package wire_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// tinyServer is the smallest Pulsar server that a real client will produce
// to: it answers CONNECT, PING, PARTITIONED_METADATA, LOOKUP and PRODUCER,
// acknowledges every SEND, pings its clients, and records what it saw. It
// exists to prove the codec against pulsar-client-go's real traffic.
type tinyServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	ping time.Duration

	mu             sync.Mutex
	conns          []net.Conn
	pingsFromPeer  int
	pongsFromPeer  int
	sends          []wire.Frame
	protocolAnswer int32
	cond           *sync.Cond
}

func startTinyServer(t *testing.T, ping time.Duration) *tinyServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tinyServer{ln: ln, ping: ping}
	s.cond = sync.NewCond(&s.mu)
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *tinyServer) url() string { return "pulsar://" + s.ln.Addr().String() }

func (s *tinyServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *tinyServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// waitFor blocks until cond holds under s.mu, which s.cond signals.
func (s *tinyServer) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitCond(t, s.cond, what, cond)
}

func (s *tinyServer) serve(c net.Conn) {
	defer s.wg.Done()
	var wmu sync.Mutex
	w := wire.NewWriter(c)
	send := func(cmd *pb.BaseCommand) error {
		wmu.Lock()
		defer wmu.Unlock()
		if err := w.WriteCommand(cmd); err != nil {
			return err
		}
		return w.Flush()
	}
	done := make(chan struct{})
	defer close(done)
	s.wg.Add(1)
	go func() { // the server's own keep-alive
		defer s.wg.Done()
		tick := time.NewTicker(s.ping)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if send(pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build()) != nil {
					return
				}
			}
		}
	}()

	r := wire.NewReader(c, 0)
	for {
		var f wire.Frame
		if err := r.ReadFrame(&f); err != nil {
			return
		}
		reply := s.handle(&f)
		s.cond.Broadcast()
		if reply != nil && send(reply) != nil {
			return
		}
	}
}

func (s *tinyServer) handle(f *wire.Frame) *pb.BaseCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := f.Command
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		s.protocolAnswer = min(cmd.GetConnect().GetProtocolVersion(), int32(pb.ProtocolVersion_v21))
		return pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: pb.CommandConnected_builder{
			ServerVersion:   proto.String("meridian-handshake-test"),
			ProtocolVersion: proto.Int32(s.protocolAnswer),
			MaxMessageSize:  proto.Int32(wire.DefaultMaxMessageSize),
		}.Build()}.Build()
	case pb.BaseCommand_PING:
		s.pingsFromPeer++
		return pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build()
	case pb.BaseCommand_PONG:
		s.pongsFromPeer++
	case pb.BaseCommand_PARTITIONED_METADATA:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(),
			PartitionMetadataResponse: pb.CommandPartitionedTopicMetadataResponse_builder{
				RequestId:  proto.Uint64(cmd.GetPartitionMetadata().GetRequestId()),
				Partitions: proto.Uint32(0),
				Response:   pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
			}.Build()}.Build()
	case pb.BaseCommand_LOOKUP:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(),
			LookupTopicResponse: pb.CommandLookupTopicResponse_builder{
				RequestId:              proto.Uint64(cmd.GetLookupTopic().GetRequestId()),
				BrokerServiceUrl:       proto.String(s.url()),
				Response:               pb.CommandLookupTopicResponse_Connect.Enum(),
				Authoritative:          proto.Bool(true),
				ProxyThroughServiceUrl: proto.Bool(false),
			}.Build()}.Build()
	case pb.BaseCommand_PRODUCER:
		p := cmd.GetProducer()
		return pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(),
			ProducerSuccess: pb.CommandProducerSuccess_builder{
				RequestId:      proto.Uint64(p.GetRequestId()),
				ProducerName:   proto.String(fmt.Sprintf("tiny-%d", p.GetProducerId())),
				LastSequenceId: proto.Int64(-1),
				ProducerReady:  proto.Bool(true),
			}.Build()}.Build()
	case pb.BaseCommand_SEND:
		s.sends = append(s.sends, *f)
		send := cmd.GetSend()
		return pb.BaseCommand_builder{Type: pb.BaseCommand_SEND_RECEIPT.Enum(),
			SendReceipt: pb.CommandSendReceipt_builder{
				ProducerId: proto.Uint64(send.GetProducerId()),
				SequenceId: proto.Uint64(send.GetSequenceId()),
				MessageId: pb.MessageIdData_builder{
					LedgerId: proto.Uint64(1),
					EntryId:  proto.Uint64(uint64(len(s.sends) - 1)),
				}.Build(),
			}.Build()}.Build()
	case pb.BaseCommand_CLOSE_PRODUCER:
		return pb.BaseCommand_builder{Type: pb.BaseCommand_SUCCESS.Enum(), Success: pb.CommandSuccess_builder{
			RequestId: proto.Uint64(cmd.GetCloseProducer().GetRequestId()),
		}.Build()}.Build()
	}
	return nil
}

// TestHandshakeWithPulsarClientGo drives the codec with the real client: the
// handshake, keep-alives both ways, a lookup, two producers (one batching with
// ZLIB compression, one not), and the decoding of their SEND frames.
func TestHandshakeWithPulsarClientGo(t *testing.T) {
	// The client drops a connection that is silent for two of its intervals;
	// the server pings at half the client's interval so that a loaded test
	// machine does not make the link look dead and the producers resend.
	s := startTinyServer(t, 100*time.Millisecond)
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               s.url(),
		KeepAliveInterval: 200 * time.Millisecond,
		OperationTimeout:  10 * time.Second,
		Logger:            pulsarlog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	batched, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic:                   "batched",
		CompressionType:         pulsar.ZLib,
		BatchingMaxPublishDelay: time.Hour, // the batch goes out on Flush
	})
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Close()
	plain, err := client.CreateProducer(pulsar.ProducerOptions{Topic: "plain", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	// The client connects lazily, so the keep-alives start with the producers.
	s.waitFor(t, "two pings and two pongs from the client", func() bool {
		return s.pingsFromPeer >= 2 && s.pongsFromPeer >= 2
	})
	if s.protocolAnswer != 20 {
		t.Errorf("answered protocol v%d to pulsar-client-go v0.19.0, want the lower of the two, v20", s.protocolAnswer)
	}

	var pending sync.WaitGroup
	for i := range 3 {
		pending.Add(1)
		batched.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload:    fmt.Appendf(nil, "batched-%d", i),
			Properties: map[string]string{"i": fmt.Sprint(i)},
		}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("batched send: %v", err)
			}
			pending.Done()
		})
	}
	if err := batched.FlushWithCtx(ctx); err != nil { // one batch of three
		t.Fatal(err)
	}
	pending.Wait()
	if _, err := plain.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("plain"), Key: "k"}); err != nil {
		t.Fatal(err)
	}

	s.mu.Lock()
	sends := append([]wire.Frame(nil), s.sends...)
	s.mu.Unlock()
	if len(sends) != 2 {
		t.Fatalf("saw %d SEND frames, want 2 (one batch of 3, one plain)", len(sends))
	}

	// The batch: checksum verified by the reader, ZLIB payload of 3 messages.
	md, err := sends[0].DecodeMetadata()
	if err != nil {
		t.Fatal(err)
	}
	if md.GetCompression() != pb.CompressionType_ZLIB || md.GetNumMessagesInBatch() != 3 || sends[0].Command.GetSend().GetNumMessages() != 3 {
		t.Fatalf("batched SEND metadata: %v", md)
	}
	zr, err := zlib.NewReader(bytes.NewReader(sends[0].Payload))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) != int(md.GetUncompressedSize()) {
		t.Fatalf("decompressed %d bytes (%v), metadata says %d", len(raw), err, md.GetUncompressedSize())
	}
	br := wire.NewBatchReader(raw, int(md.GetNumMessagesInBatch()))
	i := 0
	for br.Next() {
		m := br.Message()
		if string(m.Payload) != fmt.Sprintf("batched-%d", i) {
			t.Errorf("batch message %d: %q", i, m.Payload)
		}
		if props := m.Metadata.GetProperties(); len(props) != 1 || props[0].GetValue() != fmt.Sprint(i) {
			t.Errorf("batch message %d properties: %v", i, props)
		}
		i++
	}
	if err := br.Err(); err != nil || i != 3 {
		t.Fatalf("batch: %d messages, %v", i, err)
	}

	// The plain message.
	md, err = sends[1].DecodeMetadata()
	if err != nil {
		t.Fatal(err)
	}
	if md.HasNumMessagesInBatch() || md.GetPartitionKey() != "k" || string(sends[1].Payload) != "plain" {
		t.Fatalf("plain SEND: %v payload %q", md, sends[1].Payload)
	}
	if _, _, err := wire.SplitMessage(sends[1].Message); err != nil {
		t.Fatal(errors.Join(errors.New("stored message bytes no longer verify"), err))
	}
}
