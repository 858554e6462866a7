package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// protocolVersion is what CONNECT announces: pulsar-client-go v0.19.0's
// (DESIGN §5), so that a broker treats the replicator as it treats the
// reference client.
const protocolVersion = int32(pb.ProtocolVersion_v20)

// session is one handshaken connection to one broker. During Open a single
// goroutine drives it with synchronous request/response exchanges
// (exchange); once the producer is created, the Producer's reader
// goroutine owns rd and every write goes through Producer.write.
type session struct {
	ep             endpoint
	conn           net.Conn
	rd             *wire.Reader
	w              *wire.Writer
	maxMessageSize int
	nextRequestID  uint64
}

// dialSession connects to ep (with TLS when ep asks for it) and runs the
// CONNECT/CONNECTED handshake.
func dialSession(ctx context.Context, cfg Config, auth authMethod, ep endpoint) (*session, error) {
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", ep.host)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrConnect, ep, err)
	}
	if ep.tls {
		tc, err := tlsConfig(cfg.Cluster, ep.host)
		if err != nil {
			conn.Close()
			return nil, err
		}
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: TLS handshake with %s: %w", ErrConnect, ep, err)
		}
		conn = tconn
	}
	s := &session{ep: ep, conn: conn, rd: wire.NewReader(conn, 0), w: wire.NewWriter(conn), maxMessageSize: wire.DefaultMaxMessageSize}
	if err := s.handshake(ctx, cfg.ClientVersion, auth); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func (s *session) handshake(ctx context.Context, clientVersion string, auth authMethod) error {
	connect := pb.CommandConnect_builder{
		ProtocolVersion: proto.Int32(protocolVersion),
		ClientVersion:   proto.String(clientVersion),
		FeatureFlags:    pb.FeatureFlags_builder{SupportsAuthRefresh: proto.Bool(true)}.Build(),
	}
	if auth.name != "" {
		data, err := auth.data()
		if err != nil {
			return err
		}
		connect.AuthMethodName, connect.AuthData = proto.String(auth.name), data
	}
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECT.Enum(), Connect: connect.Build()}.Build()
	return s.exchange(ctx, cmd, func(reply *pb.BaseCommand) (bool, error) {
		switch reply.GetType() {
		case pb.BaseCommand_CONNECTED:
			if m := reply.GetConnected().GetMaxMessageSize(); m > 0 {
				s.maxMessageSize = int(m)
			}
			return true, nil
		case pb.BaseCommand_AUTH_CHALLENGE:
			return false, s.w.WriteCommand(authResponse(clientVersion, auth))
		case pb.BaseCommand_ERROR:
			e := reply.GetError()
			return true, fmt.Errorf("%w: handshake with %s: %w", ErrConnect, s.ep, &wire.ServerError{Code: e.GetError(), Message: e.GetMessage()})
		}
		return false, nil
	})
}

// authResponse answers an AUTH_CHALLENGE (a broker refreshing expired
// credentials) with the current credentials.
func authResponse(clientVersion string, auth authMethod) *pb.BaseCommand {
	resp := pb.AuthData_builder{AuthMethodName: proto.String(auth.name)}
	if auth.data != nil {
		if data, err := auth.data(); err == nil {
			resp.AuthData = data
		}
	}
	return pb.BaseCommand_builder{Type: pb.BaseCommand_AUTH_RESPONSE.Enum(), AuthResponse: pb.CommandAuthResponse_builder{
		ClientVersion: proto.String(clientVersion), ProtocolVersion: proto.Int32(protocolVersion), Response: resp.Build(),
	}.Build()}.Build()
}

// exchange sends cmd and reads frames, answering PINGs, until handle says
// it has the answer. The connection's deadline is ctx's, and cancelling ctx
// interrupts the exchange.
func (s *session) exchange(ctx context.Context, cmd *pb.BaseCommand, handle func(*pb.BaseCommand) (done bool, err error)) error {
	if d, ok := ctx.Deadline(); ok {
		s.conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { s.conn.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		s.conn.SetDeadline(time.Time{})
	}()
	if err := s.w.WriteCommand(cmd); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("%w: write to %s: %w", ErrConnect, s.ep, err)
	}
	for {
		var f wire.Frame
		if err := s.rd.ReadFrame(&f); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("%w: waiting for %s's answer to %v: %w", ErrConnect, s.ep, cmd.GetType(), err)
		}
		if f.Command.GetType() == pb.BaseCommand_PING {
			if err := s.w.WriteCommand(pong); err != nil {
				return err
			}
		}
		done, err := handle(f.Command)
		if ferr := s.w.Flush(); ferr != nil && err == nil {
			err = fmt.Errorf("%w: write to %s: %w", ErrConnect, s.ep, ferr)
		}
		if done || err != nil {
			return err
		}
	}
}

var (
	ping = pb.BaseCommand_builder{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}}.Build()
	pong = pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build()
)

func (s *session) requestID() uint64 {
	s.nextRequestID++
	return s.nextRequestID
}

// lookup sends LOOKUP for topic and returns the answer. The lookup is
// marked as the replicator's (wire.LookupPropertyReplication, naming the
// source region), so that the remote region answers with its own owner of
// the topic rather than redirect to the namespace's active region.
func (s *session) lookup(ctx context.Context, topic, sourceRegion string, authoritative bool) (*pb.CommandLookupTopicResponse, error) {
	id := s.requestID()
	mark := pb.KeyValue_builder{Key: proto.String(wire.LookupPropertyReplication), Value: proto.String(sourceRegion)}.Build()
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: pb.CommandLookupTopic_builder{
		Topic: proto.String(topic), RequestId: proto.Uint64(id), Authoritative: proto.Bool(authoritative),
		Properties: []*pb.KeyValue{mark},
	}.Build()}.Build()
	var resp *pb.CommandLookupTopicResponse
	err := s.exchange(ctx, cmd, func(reply *pb.BaseCommand) (bool, error) {
		if reply.GetType() == pb.BaseCommand_LOOKUP_RESPONSE && reply.GetLookupTopicResponse().GetRequestId() == id {
			resp = reply.GetLookupTopicResponse()
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if !resp.HasResponse() {
		return nil, fmt.Errorf("%w: LOOKUP answer from %s without its response type", ErrProtocol, s.ep)
	}
	return resp, nil
}

// createProducer sends PRODUCER and waits for a ready PRODUCER_SUCCESS: a
// broker that answers "not ready" (a producer waiting for its turn) sends
// a second one when the producer may send.
func (s *session) createProducer(ctx context.Context, topic, name string, producerID uint64) (*pb.CommandProducerSuccess, error) {
	id := s.requestID()
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: pb.CommandProducer_builder{
		Topic: proto.String(topic), ProducerId: proto.Uint64(producerID), RequestId: proto.Uint64(id),
		ProducerName: proto.String(name), UserProvidedProducerName: proto.Bool(true),
	}.Build()}.Build()
	var success *pb.CommandProducerSuccess
	err := s.exchange(ctx, cmd, func(reply *pb.BaseCommand) (bool, error) {
		switch reply.GetType() {
		case pb.BaseCommand_PRODUCER_SUCCESS:
			if ps := reply.GetProducerSuccess(); ps.GetRequestId() == id {
				success = ps
				return !ps.HasProducerReady() || ps.GetProducerReady(), nil
			}
		case pb.BaseCommand_ERROR:
			if e := reply.GetError(); e.GetRequestId() == id {
				return true, &wire.ServerError{Code: e.GetError(), Message: e.GetMessage()}
			}
		}
		return false, nil
	})
	if err != nil {
		var se *wire.ServerError
		if errors.As(err, &se) && !errors.Is(err, ErrConnect) {
			err = fmt.Errorf("%w: PRODUCER %s on %s: %w", ErrConnect, name, s.ep, err)
		}
		return nil, err
	}
	return success, nil
}
