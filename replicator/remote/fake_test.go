package remote

import (
	"bytes"
	"compress/zlib"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/testkit"
)

// fakeBroker is a small Pulsar server on cluster/wire that a Producer can
// open and send to. Its behaviour is set before the producer opens; it
// records every command it gets, with the message bytes of each SEND.
type fakeBroker struct {
	t   testing.TB
	ln  net.Listener
	url string
	wg  sync.WaitGroup

	// Behaviour.
	redirectTo     string                    // answer LOOKUP with an authoritative Redirect there
	token          string                    // the token CONNECT must carry, "" for none
	producerErrors []pb.ServerError          // answers to the first PRODUCERs, in order
	notReadyFirst  bool                      // answer PRODUCER "not ready" before "ready"
	hold           bool                      // keep receipts until release
	sendErrors     map[uint64]pb.ServerError // SEND_ERROR for these sequence ids
	dropAfterSends int                       // close the connection at this SEND (0: never)
	closeAtSend    int                       // send CLOSE_PRODUCER at this SEND (0: never)
	silent         bool                      // never answer PING
	challenge      bool                      // send AUTH_CHALLENGE after PRODUCER_SUCCESS

	mu            sync.Mutex
	cond          *sync.Cond
	conns         []net.Conn
	connects      []*pb.CommandConnect
	lookups       []*pb.CommandLookupTopic
	producers     []*pb.CommandProducer
	sends         []sentEntry
	authResponses []*pb.CommandAuthResponse
	held          []func()
}

type sentEntry struct {
	send *pb.CommandSend
	msg  []byte // from the 0x0e01 magic on, checksum verified by the reader
}

func startFakeBroker(t testing.TB, tlsCfg *tls.Config, setup func(*fakeBroker)) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, url: "pulsar://" + ln.Addr().String()}
	if tlsCfg != nil {
		ln, b.url = tls.NewListener(ln, tlsCfg), "pulsar+ssl://"+ln.Addr().String()
	}
	b.ln = ln
	b.cond = sync.NewCond(&b.mu)
	if setup != nil {
		setup(b)
	}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.serve(c)
		}()
	}
}

func (b *fakeBroker) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// waitFor blocks until cond holds under b.mu, which b.cond signals.
func (b *fakeBroker) waitFor(what string, cond func() bool) {
	b.t.Helper()
	testkit.WaitCond(b.t, b.cond, what, cond)
}

// release answers the n oldest held SENDs.
func (b *fakeBroker) release(n int) {
	b.mu.Lock()
	todo := b.held[:n]
	b.held = b.held[n:]
	b.mu.Unlock()
	for _, f := range todo {
		f()
	}
}

// locked runs f under b.mu, to read what the broker recorded.
func (b *fakeBroker) locked(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

func (b *fakeBroker) sent() []sentEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sentEntry(nil), b.sends...)
}

func (b *fakeBroker) serve(c net.Conn) {
	var wmu sync.Mutex
	w := wire.NewWriter(c)
	write := func(cmds ...*pb.BaseCommand) {
		wmu.Lock()
		defer wmu.Unlock()
		for _, cmd := range cmds {
			if err := w.WriteCommand(cmd); err != nil {
				b.t.Error(err)
			}
		}
		w.Flush()
	}
	r := wire.NewReader(c, 0)
	for {
		var f wire.Frame
		if err := r.ReadFrame(&f); err != nil {
			return
		}
		b.mu.Lock()
		replies, hang := b.handle(&f, write)
		b.cond.Broadcast()
		b.mu.Unlock()
		if hang {
			c.Close()
			return
		}
		if len(replies) > 0 {
			write(replies...)
		}
	}
}

func cmdOf(typ pb.BaseCommand_Type, set func(*pb.BaseCommand)) *pb.BaseCommand {
	cmd := &pb.BaseCommand{}
	cmd.SetType(typ)
	set(cmd)
	return cmd
}

// handle runs under b.mu and returns the replies to send, or hang to close
// the connection.
func (b *fakeBroker) handle(f *wire.Frame, write func(...*pb.BaseCommand)) (replies []*pb.BaseCommand, hang bool) {
	cmd := f.Command
	switch cmd.GetType() {
	case pb.BaseCommand_CONNECT:
		cn := cmd.GetConnect()
		b.connects = append(b.connects, cn)
		if b.token != "" && (cn.GetAuthMethodName() != "token" || string(cn.GetAuthData()) != b.token) {
			return []*pb.BaseCommand{cmdOf(pb.BaseCommand_ERROR, func(c *pb.BaseCommand) {
				c.SetError(pb.CommandError_builder{RequestId: proto.Uint64(^uint64(0)), Error: pb.ServerError_AuthenticationError.Enum(),
					Message: proto.String("bad token")}.Build())
			})}, false
		}
		return []*pb.BaseCommand{cmdOf(pb.BaseCommand_CONNECTED, func(c *pb.BaseCommand) {
			c.SetConnected(pb.CommandConnected_builder{ServerVersion: proto.String("fake"),
				ProtocolVersion: proto.Int32(cn.GetProtocolVersion()), MaxMessageSize: proto.Int32(wire.DefaultMaxMessageSize)}.Build())
		})}, false
	case pb.BaseCommand_PING:
		if b.silent {
			return nil, false
		}
		return []*pb.BaseCommand{pong}, false
	case pb.BaseCommand_LOOKUP:
		l := cmd.GetLookupTopic()
		b.lookups = append(b.lookups, l)
		resp := pb.CommandLookupTopicResponse_builder{RequestId: proto.Uint64(l.GetRequestId()), Authoritative: proto.Bool(true),
			Response: pb.CommandLookupTopicResponse_Connect.Enum(), BrokerServiceUrl: proto.String(b.url), BrokerServiceUrlTls: proto.String(b.url)}
		if b.redirectTo != "" {
			resp.Response, resp.BrokerServiceUrl, resp.BrokerServiceUrlTls = pb.CommandLookupTopicResponse_Redirect.Enum(), &b.redirectTo, &b.redirectTo
		}
		return []*pb.BaseCommand{cmdOf(pb.BaseCommand_LOOKUP_RESPONSE, func(c *pb.BaseCommand) { c.SetLookupTopicResponse(resp.Build()) })}, false
	case pb.BaseCommand_PRODUCER:
		p := cmd.GetProducer()
		b.producers = append(b.producers, p)
		if len(b.producerErrors) > 0 {
			code := b.producerErrors[0]
			b.producerErrors = b.producerErrors[1:]
			return []*pb.BaseCommand{cmdOf(pb.BaseCommand_ERROR, func(c *pb.BaseCommand) {
				c.SetError(pb.CommandError_builder{RequestId: proto.Uint64(p.GetRequestId()), Error: code.Enum(), Message: proto.String("try later")}.Build())
			})}, false
		}
		success := func(ready bool) *pb.BaseCommand {
			return cmdOf(pb.BaseCommand_PRODUCER_SUCCESS, func(c *pb.BaseCommand) {
				c.SetProducerSuccess(pb.CommandProducerSuccess_builder{RequestId: proto.Uint64(p.GetRequestId()),
					ProducerName: proto.String(p.GetProducerName()), LastSequenceId: proto.Int64(41), ProducerReady: proto.Bool(ready)}.Build())
			})
		}
		replies = []*pb.BaseCommand{success(true)}
		if b.notReadyFirst {
			replies = []*pb.BaseCommand{success(false), success(true)}
		}
		if b.challenge {
			replies = append(replies, cmdOf(pb.BaseCommand_AUTH_CHALLENGE, func(c *pb.BaseCommand) {
				c.SetAuthChallenge(pb.CommandAuthChallenge_builder{Challenge: pb.AuthData_builder{AuthMethodName: proto.String("token")}.Build()}.Build())
			}))
		}
		return replies, false
	case pb.BaseCommand_AUTH_RESPONSE:
		b.authResponses = append(b.authResponses, cmd.GetAuthResponse())
	case pb.BaseCommand_SEND:
		s := cmd.GetSend()
		b.sends = append(b.sends, sentEntry{send: s, msg: bytes.Clone(f.Message)})
		n := len(b.sends)
		if n == b.dropAfterSends {
			return nil, true
		}
		if n == b.closeAtSend {
			return []*pb.BaseCommand{cmdOf(pb.BaseCommand_CLOSE_PRODUCER, func(c *pb.BaseCommand) {
				c.SetCloseProducer(pb.CommandCloseProducer_builder{ProducerId: proto.Uint64(s.GetProducerId()), RequestId: proto.Uint64(9),
					AssignedBrokerServiceUrl: proto.String("pulsar://elsewhere:6650")}.Build())
			})}, false
		}
		var reply *pb.BaseCommand
		if code, ok := b.sendErrors[s.GetSequenceId()]; ok {
			reply = cmdOf(pb.BaseCommand_SEND_ERROR, func(c *pb.BaseCommand) {
				c.SetSendError(pb.CommandSendError_builder{ProducerId: proto.Uint64(s.GetProducerId()), SequenceId: proto.Uint64(s.GetSequenceId()),
					Error: code.Enum(), Message: proto.String("disk on fire")}.Build())
			})
		} else {
			reply = cmdOf(pb.BaseCommand_SEND_RECEIPT, func(c *pb.BaseCommand) {
				c.SetSendReceipt(pb.CommandSendReceipt_builder{ProducerId: proto.Uint64(s.GetProducerId()), SequenceId: proto.Uint64(s.GetSequenceId()),
					HighestSequenceId: proto.Uint64(s.GetHighestSequenceId()),
					MessageId:         pb.MessageIdData_builder{LedgerId: proto.Uint64(7), EntryId: proto.Uint64(uint64(n - 1))}.Build()}.Build())
			})
		}
		if b.hold {
			b.held = append(b.held, func() { write(reply) })
			return nil, false
		}
		return []*pb.BaseCommand{reply}, false
	}
	return nil, false
}

// storedEntry builds an entry as the managed ledger stores it.
func storedEntry(t testing.TB, index, brokerTimestamp uint64, md *pb.MessageMetadata, payload []byte) []byte {
	t.Helper()
	msg, err := wire.AppendMessage(nil, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	bem, err := proto.Marshal(pb.BrokerEntryMetadata_builder{BrokerTimestamp: proto.Uint64(brokerTimestamp), Index: proto.Uint64(index)}.Build())
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint16(nil, wire.MagicBrokerEntryMetadata)
	out = binary.BigEndian.AppendUint32(out, uint32(len(bem)))
	return append(append(out, bem...), msg...)
}

// batchEntry is a zlib-compressed batch of three keyed messages with
// properties and event times, as pulsar-client-go writes one, stored with
// index (its last message's offset).
func batchEntry(t testing.TB, index uint64) (entry []byte, md *pb.MessageMetadata, payload []byte) {
	t.Helper()
	var batch []byte
	for i := range 3 {
		smm := pb.SingleMessageMetadata_builder{
			PartitionKey: proto.String(fmt.Sprintf("key-%d", i)),
			Properties:   []*pb.KeyValue{keyValue("n", fmt.Sprint(i))},
			EventTime:    proto.Uint64(1_600_000_000_000 + uint64(i)),
			SequenceId:   proto.Uint64(uint64(10 + i)),
		}.Build()
		var err error
		if batch, err = wire.AppendBatchMessage(batch, smm, []byte(fmt.Sprintf("payload %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(batch)
	zw.Close()
	md = pb.MessageMetadata_builder{
		ProducerName:       proto.String("orders-app"),
		SequenceId:         proto.Uint64(10),
		PublishTime:        proto.Uint64(1_700_000_000_123),
		Properties:         []*pb.KeyValue{keyValue("traceparent", "00-abc-def-01"), keyValue(wire.PropReplicationSource, "forged")},
		NumMessagesInBatch: proto.Int32(3),
		Compression:        pb.CompressionType_ZLIB.Enum(),
		UncompressedSize:   proto.Uint32(uint32(len(batch))),
		EventTime:          proto.Uint64(1_600_000_000_000),
		PartitionKey:       proto.String("key-0"),
	}.Build()
	return storedEntry(t, index, 1_700_000_000_200, md, z.Bytes()), md, z.Bytes()
}

// simpleEntry is an unbatched message stored at index.
func simpleEntry(t testing.TB, index uint64) []byte {
	t.Helper()
	md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(index), PublishTime: proto.Uint64(1)}.Build()
	return storedEntry(t, index, 2, md, []byte(fmt.Sprint(index)))
}

// testCerts writes a self-signed CA certificate for 127.0.0.1 to a PEM
// file and returns it with the server's TLS config.
func testCerts(t *testing.T) (caFile string, server *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
