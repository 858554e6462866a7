package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/broker/loadmgr"
	"github.com/meridian-mq/meridian/cluster/linger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/topology"
)

// maxProtocolVersion is the newest protocol version Meridian speaks; a
// client is answered with the lower of its version and this one.
const maxProtocolVersion = int32(pb.ProtocolVersion_v21)

// conn is one client connection. See the package doc for its two
// goroutines. Fields below reader are owned by the reader goroutine.
type conn struct {
	srv *Server
	nc  net.Conn
	log *slog.Logger

	ctx    context.Context // cancelled by close: the connection's lifetime
	cancel context.CancelFunc
	// out holds replies and other commands; bounded by count (its
	// capacity, WriteQueue) and by outBytes (WriteQueueBytes), and a
	// client that lets it fill is disconnected (it is not reading).
	out      chan outbound
	outBytes atomic.Int64 // the encoded size of the commands in out
	// msgs holds MESSAGE frames, bounded by count and bytes; a dispatcher
	// never waits for room in it, but skips the consumer (msgQueue).
	msgs *msgQueue
	once sync.Once
	wg   sync.WaitGroup // the writer, keep-alive, request and receipt goroutines

	writerDone chan struct{} // closed when the writer exits
	// stopping is set by shutdown: the reader drops what it reads.
	stopping atomic.Bool

	lastReceived atomic.Int64 // unix nanoseconds of the last frame read

	// lookupListener is the advertised listener named by the last LOOKUP
	// on this connection ("" for none), nil before any: the listener the
	// client reached this broker by, as far as the broker can know. It
	// picks the URLs of a hand-off's CLOSE_PRODUCER and CLOSE_CONSUMER
	// (assignedURLs).
	lookupListener atomic.Pointer[string]

	limits connLimits // its requests and pending publishes (limits.go)

	// Set by the reader at CONNECT, before any producer or consumer exists.
	protocolVersion     int32
	brokerEntryMetadata bool   // the client takes entries with their BrokerEntryMetadata
	role                string // the authenticated role; empty without authentication
	clientVersion       string
	creds               credentials // when they expire (reauth.go)

	mu struct {
		sync.Mutex
		producers map[uint64]*producer
		consumers map[uint64]*consumer
		// dropping are the producers whose SENDs are dropped, not taken
		// as the client's error (see handleSend): one the broker is
		// closing, until its CLOSE_PRODUCER is queued (releaseProducer),
		// and one sent to another broker or region (migrate.go), until it
		// registers here again.
		dropping map[uint64]bool
	}
}

// outbound is one frame to write: a command, with a message (and its
// BrokerEntryMetadata) for MESSAGE frames.
type outbound struct {
	cmd      *pb.BaseCommand
	bem, msg []byte
	// closeAfter asks the writer to close the connection once everything
	// before it is written.
	closeAfter bool
	// size is what a command in out counts against WriteQueueBytes: an
	// int32 (a frame is at most 100 MiB), which packs beside closeAfter.
	size int32
	// flushed, when set, is closed by the writer once everything before it
	// is written (awaitFlushed).
	flushed chan struct{}
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		srv:    s,
		nc:     nc,
		log:    s.log.With("remote", nc.RemoteAddr().String()),
		ctx:    ctx,
		cancel: cancel,
		out:    make(chan outbound, s.cfg.WriteQueue),
		msgs:   newMsgQueue(s.cfg.MessageQueue, s.cfg.MessageQueueBytes),

		writerDone: make(chan struct{}),
		limits:     newConnLimits(s.cfg),
	}
	c.mu.producers = make(map[uint64]*producer)
	c.mu.dropping = make(map[uint64]bool)
	c.mu.consumers = make(map[uint64]*consumer)
	c.lastReceived.Store(s.clock.Now().UnixNano())
	return c
}

// run serves the connection until it closes, then waits for its goroutines.
func (c *conn) run() {
	c.wg.Add(2)
	go c.writeLoop()
	go c.keepAliveLoop()
	err := c.readLoop()
	if errors.As(err, new(errClosing)) {
		c.lingerClose()
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil, c.stopping.Load():
		c.log.Debug("connection closed", "err", err)
	default:
		c.log.Info("closing connection", "err", err)
	}
	c.close()
	ctx, cancel := context.WithTimeout(context.Background(), c.srv.cfg.CloseTimeout)
	c.release(ctx)
	cancel()
	c.wg.Wait()
}

// lingerClose waits, after the reader stopped on errClosing, until the
// writer has flushed what was queued before (closeAfterFlush) and
// half-closed the connection, then discards what the client still sends
// until it closes its side (see package linger for why). The wait for the
// writer bounds socket I/O, so it runs on the wall clock, as the socket's
// deadlines do, not on the Server's clock.
func (c *conn) lingerClose() {
	select {
	case <-c.writerDone:
	case <-time.After(c.srv.cfg.ConnectTimeout):
		return
	}
	if c.ctx.Err() != nil {
		return // the writer closed it: it failed, or could not half-close
	}
	linger.Drain(c.nc)
}

// shutdown ends the connection for a server that closes, the way
// closeAfterFlush ends it for its reader: what is queued is written (the
// receipts and CLOSE frames of a drain among it), the writer half-closes,
// and the reader drops what the client still sends until the client
// closes its side or linger.Timeout passes (see lingerClose for why).
func (c *conn) shutdown() {
	c.stopping.Store(true)
	select {
	case c.out <- outbound{closeAfter: true}:
		_ = c.nc.SetReadDeadline(time.Now().Add(linger.Timeout))
	default:
		c.close() // a full queue: the client is not reading
	}
}

// release detaches the connection's producers and consumers from their
// topics, by ctx's deadline. It runs on the reader goroutine after the
// last frame, so no SEND races it.
func (c *conn) release(ctx context.Context) {
	c.mu.Lock()
	producers := maps.Clone(c.mu.producers)
	consumers := maps.Clone(c.mu.consumers)
	// Cleared in place: the maps themselves never change after newConn,
	// so register and its kin may take them before locking.
	clear(c.mu.producers)
	clear(c.mu.consumers)
	c.mu.Unlock()
	for _, p := range producers {
		p.stopPacing(ctx) // it publishes no more once it has ended
		p.closed()
	}
	for _, cons := range consumers {
		cons.detach(ctx)
	}
}

// close ends the connection; safe from any goroutine, any number of times.
//
// It never waits on the peer, since it runs under other locks (a
// subscription's or a topic's, when a queue is full; docs/lock-order.md): a
// TLS connection's socket is closed under it, as crypto/tls itself does
// while a write is in flight, because tls.Conn.Close would first send a
// close_notify alert and wait up to 5 s for a peer that takes no bytes.
func (c *conn) close() {
	c.once.Do(func() {
		c.cancel()
		nc := c.nc
		if tc, ok := nc.(*tls.Conn); ok {
			nc = tc.NetConn()
		}
		nc.Close() // unblocks the reader and a blocked writer
	})
}

// readLoop reads frames until the connection fails or closes. The first
// frame must be CONNECT, within ConnectTimeout.
func (c *conn) readLoop() error {
	r := wire.NewReader(c.nc, maxFrameSizeBeforeConnect)
	var f wire.Frame
	if err := c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.ConnectTimeout)); err != nil {
		return err
	}
	if err := r.ReadFrame(&f); err != nil {
		return fmt.Errorf("waiting for CONNECT: %w", err)
	}
	if f.Command.GetType() != pb.BaseCommand_CONNECT {
		return fmt.Errorf("first command is %v, want CONNECT", f.Command.GetType())
	}
	if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	c.lastReceived.Store(c.srv.clock.Now().UnixNano())
	if err := c.handleConnect(f.Command.GetConnect()); err != nil {
		return err
	}
	r.SetMaxFrameSize(c.srv.cfg.maxFrameSize())
	for {
		if err := r.ReadFrame(&f); err != nil {
			return err
		}
		c.lastReceived.Store(c.srv.clock.Now().UnixNano())
		if c.stopping.Load() {
			continue // the server is closing (shutdown)
		}
		if err := c.dispatch(&f); err != nil {
			return err
		}
	}
}

// dispatch handles one command. An error closes the connection.
func (c *conn) dispatch(f *wire.Frame) error {
	cmd := f.Command
	switch cmd.GetType() {
	case pb.BaseCommand_PING:
		c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PONG.Enum(), Pong: &pb.CommandPong{}}.Build())
	case pb.BaseCommand_PONG:
		// lastReceived is all a PONG is for.
	case pb.BaseCommand_AUTH_RESPONSE:
		return c.handleAuthResponse(cmd.GetAuthResponse())
	case pb.BaseCommand_LOOKUP:
		c.goRequest(func() { c.handleLookup(cmd.GetLookupTopic()) })
	case pb.BaseCommand_PARTITIONED_METADATA:
		c.goRequest(func() { c.handlePartitionedMetadata(cmd.GetPartitionMetadata()) })
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		c.goRequest(func() { c.handleGetTopicsOfNamespace(cmd.GetGetTopicsOfNamespace()) })
	case pb.BaseCommand_PRODUCER:
		c.goRequest(func() { c.handleProducer(cmd.GetProducer()) })
	case pb.BaseCommand_SEND:
		return c.handleSend(f)
	case pb.BaseCommand_CLOSE_PRODUCER:
		c.handleCloseProducer(cmd.GetCloseProducer())
	case pb.BaseCommand_SUBSCRIBE:
		c.goRequest(func() { c.handleSubscribe(cmd.GetSubscribe()) })
	case pb.BaseCommand_FLOW:
		c.handleFlow(cmd.GetFlow())
	case pb.BaseCommand_ACK:
		c.handleAck(cmd.GetAck())
	case pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		c.handleRedeliver(cmd.GetRedeliverUnacknowledgedMessages())
	case pb.BaseCommand_CLOSE_CONSUMER:
		c.goRequest(func() { c.handleCloseConsumer(cmd.GetCloseConsumer()) })
	case pb.BaseCommand_UNSUBSCRIBE:
		c.goRequest(func() { c.handleUnsubscribe(cmd.GetUnsubscribe()) })
	case pb.BaseCommand_SEEK:
		c.goRequest(func() { c.handleSeek(cmd.GetSeek()) })
	case pb.BaseCommand_GET_SCHEMA:
		c.goRequest(func() { c.handleGetSchema(cmd.GetGetSchema()) })
	case pb.BaseCommand_GET_OR_CREATE_SCHEMA:
		c.goRequest(func() { c.handleGetOrCreateSchema(cmd.GetGetOrCreateSchema()) })
	case pb.BaseCommand_GET_LAST_MESSAGE_ID:
		c.goRequest(func() { c.handleGetLastMessageID(cmd.GetGetLastMessageId()) })
	default:
		return fmt.Errorf("unsupported command %v", cmd.GetType())
	}
	return nil
}

// goRequest runs a request that may wait on other services in its own
// goroutine, owned by the connection. At MaxRequestsPerConnection such
// goroutines it first waits, not reading, for one to end; if the
// connection closes meanwhile the request is dropped, unanswered, as every
// request of a closed connection is.
func (c *conn) goRequest(f func()) {
	if !c.acquireRequestSlot() {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.releaseRequestSlot()
		f()
	}()
}

// send queues a command for the writer. A full queue, by count or by
// bytes, means the client is not reading its replies: the connection is
// closed rather than buffered without bound.
func (c *conn) send(cmd *pb.BaseCommand) {
	if full := c.queue(cmd); full != "" {
		c.closeNotReading(full)
	}
}

// queue puts cmd on the write queue without waiting, and says which bound
// is full when it cannot ("" when queued, or dropped on a closed
// connection). The bytes are counted before the push, so concurrent
// senders never overshoot the bound together; a command alone in the
// queue is taken whatever its size.
func (c *conn) queue(cmd *pb.BaseCommand) (full string) {
	size := int64(proto.Size(cmd))
	if queued := c.outBytes.Add(size); queued > int64(c.srv.cfg.WriteQueueBytes) && queued != size {
		c.outBytes.Add(-size)
		return fmt.Sprintf("write queue bytes full: %d of %d queued", queued-size, c.srv.cfg.WriteQueueBytes)
	}
	select {
	case c.out <- outbound{cmd: cmd, size: int32(size)}:
	case <-c.ctx.Done():
		c.outBytes.Add(-size)
	default:
		c.outBytes.Add(-size)
		return fmt.Sprintf("write queue full: %d commands", cap(c.out))
	}
	return ""
}

// closeNotReading closes the connection of a client that does not read
// its replies (full says which bound of the write queue it filled).
func (c *conn) closeNotReading(full string) {
	c.log.Warn("closing connection: client is not reading", "queue", full)
	c.close()
}

// took uncounts a command the writer took from out.
func (c *conn) took(o outbound) outbound {
	c.outBytes.Add(-int64(o.size))
	return o
}

// register adds v to m (a map of the connection's producers or consumers)
// under id, unless the id is taken or the connection is closing (taken is
// set), or m holds max already (0: no bound; full is the refusal to
// answer, naming what m holds).
func register[T any](c *conn, m map[uint64]*T, id uint64, v *T, max int, what string) (taken bool, full error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := m[id]; ok || c.ctx.Err() != nil {
		return true, nil
	}
	if max > 0 && len(m) >= max {
		return false, fmt.Errorf("%w: Reached the maximum number of %s on this connection (%d)", wire.ErrNotAllowed, what, max)
	}
	m[id] = v
	return false, nil
}

// unregister removes v from m, reporting whether it was there (so that
// only one of the ways a producer or consumer ends acts on it).
func unregister[T any](c *conn, m map[uint64]*T, id uint64, v *T) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return unregisterLocked(m, id, v)
}

// unregisterLocked is unregister with c.mu held.
func unregisterLocked[T any](m map[uint64]*T, id uint64, v *T) bool {
	if m[id] != v {
		return false
	}
	delete(m, id)
	return true
}

// registered returns what m holds under id.
func registered[T any](c *conn, m map[uint64]*T, id uint64) (*T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := m[id]
	return v, ok
}

// handleConnect authenticates the client and answers CONNECTED. A client
// that fails authentication gets an AuthenticationError and the
// connection closes, as on Pulsar.
func (c *conn) handleConnect(connect *pb.CommandConnect) error {
	c.protocolVersion = min(connect.GetProtocolVersion(), maxProtocolVersion)
	c.brokerEntryMetadata = connect.GetFeatureFlags().GetSupportsBrokerEntryMetadata()
	c.clientVersion = connect.GetClientVersion()
	if a := c.srv.cfg.Auth; a != nil {
		creds := auth.Credentials{Data: connect.GetAuthData()}
		if tc, ok := c.nc.(*tls.Conn); ok {
			st := tc.ConnectionState()
			creds.TLS = &st
		}
		role, err := a.Authenticate(c.ctx, connect.GetAuthMethodName(), creds)
		if err != nil {
			c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_ERROR.Enum(), Error: pb.CommandError_builder{
				RequestId: ptr(^uint64(0)), Error: pb.ServerError_AuthenticationError.Enum(), Message: ptr(err.Error()),
			}.Build()}.Build())
			return c.closeAfterFlush(fmt.Errorf("authentication failed: %w", err))
		}
		c.role = role
		c.creds.method = connect.GetAuthMethodName()
		c.noteCredentials(a, creds)
		if c.srv.cfg.AuthRefreshInterval > 0 && c.creds.expiresAt.Load() != 0 {
			c.wg.Add(1)
			go c.reauthLoop()
		}
	}
	c.log.Debug("connected", "client", connect.GetClientVersion(), "protocol", c.protocolVersion)
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: pb.CommandConnected_builder{
		ServerVersion:   &c.srv.cfg.ServerVersion,
		ProtocolVersion: ptr(c.protocolVersion),
		MaxMessageSize:  ptr(int32(c.srv.cfg.MaxMessageSize)),
	}.Build()}.Build())
	return nil
}

// closeAfterFlush ends the reader with err, but lets the writer send what
// is queued first (a refusal the client should read): the writer ends its
// side once it has flushed the marker queued here, and lingerClose closes
// the connection once the client has read it.
func (c *conn) closeAfterFlush(err error) error {
	select {
	case c.out <- outbound{closeAfter: true}:
	default:
	}
	return errClosing{err}
}

// errClosing is a reader's error whose connection the writer closes.
type errClosing struct{ error }

func (e errClosing) Unwrap() error { return e.error }

func (c *conn) handleLookup(req *pb.CommandLookupTopic) {
	resp := pb.CommandLookupTopicResponse_builder{RequestId: ptr(req.GetRequestId())}
	listener := req.GetAdvertisedListenerName()
	c.lookupListener.Store(&listener)
	loc, err := c.lookup(req.GetTopic(), LookupOptions{Replication: isReplicationLookup(req), Listener: listener})
	if err != nil {
		// The response must carry `response` even on failure: the client
		// dereferences it (DESIGN §5).
		code, msg := wire.ToWire(err)
		resp.Response = pb.CommandLookupTopicResponse_Failed.Enum()
		resp.Error, resp.Message = &code, &msg
	} else {
		resp.Response = pb.CommandLookupTopicResponse_Connect.Enum()
		if loc.Redirect {
			resp.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
		}
		resp.BrokerServiceUrl = &loc.ServiceURL
		if loc.ServiceURLTLS != "" {
			resp.BrokerServiceUrlTls = &loc.ServiceURLTLS
		}
		resp.Authoritative = ptr(true)
		resp.ProxyThroughServiceUrl = ptr(c.srv.cfg.ProxyThroughServiceURL && !loc.Redirect)
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp.Build()}.Build())
}

func (c *conn) lookup(name string, opts LookupOptions) (Location, error) {
	release, err := c.srv.topics.LookupPermits().Acquire()
	if err != nil {
		return Location{}, err
	}
	defer release()
	topic, err := parseTopic(name)
	if err != nil {
		return Location{}, err
	}
	if err := c.authorize(auth.ActionLookup, topic); err != nil {
		return Location{}, err
	}
	return c.srv.topics.Lookup(c.ctx, topic, opts)
}

// isReplicationLookup reports whether req is a replicator's lookup
// (wire.LookupPropertyReplication).
func isReplicationLookup(req *pb.CommandLookupTopic) bool {
	for _, kv := range req.GetProperties() {
		if kv.GetKey() == wire.LookupPropertyReplication {
			return true
		}
	}
	return false
}

func (c *conn) handlePartitionedMetadata(req *pb.CommandPartitionedTopicMetadata) {
	resp := pb.CommandPartitionedTopicMetadataResponse_builder{RequestId: ptr(req.GetRequestId())}
	n, err := c.partitions(req.GetTopic())
	if err != nil {
		code, msg := wire.ToWire(err)
		resp.Response = pb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = &code, &msg
	} else {
		resp.Response = pb.CommandPartitionedTopicMetadataResponse_Success.Enum()
		resp.Partitions = ptr(uint32(n))
	}
	c.send(pb.BaseCommand_builder{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(),
		PartitionMetadataResponse: resp.Build()}.Build())
}

func (c *conn) partitions(name string) (int, error) {
	// Pulsar counts these against the same bound as lookups.
	release, err := c.srv.topics.LookupPermits().Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	topic, err := parseTopic(name)
	if err != nil {
		return 0, err
	}
	if err := c.authorize(auth.ActionLookup, topic); err != nil {
		return 0, err
	}
	return c.srv.topics.Partitions(c.ctx, topic)
}

// authorize checks the connection's role for act on topic, when
// authorization is on.
func (c *conn) authorize(act auth.Action, topic topology.TopicName) error {
	return c.authorized(func(a *auth.Authorizer) error { return a.Can(c.ctx, c.role, act, topic) })
}

// authorizeListTopics checks the connection's role for listing the topics
// of tenant/namespace, when authorization is on.
func (c *conn) authorizeListTopics(tenant, namespace string) error {
	return c.authorized(func(a *auth.Authorizer) error { return a.CanListTopics(c.ctx, c.role, tenant, namespace) })
}

// authorized runs check when authorization is on, giving a refusal the
// AuthorizationError code.
func (c *conn) authorized(check func(*auth.Authorizer) error) error {
	a := c.srv.cfg.Authz
	if a == nil {
		return nil
	}
	if err := check(a); err != nil {
		return fmt.Errorf("%w: %v", wire.ErrAuthorization, err)
	}
	return nil
}

// parseTopic normalises a topic name from the wire, giving a bad one the
// InvalidTopicName code.
func parseTopic(name string) (topology.TopicName, error) {
	t, err := topology.ParseTopicName(name)
	if err != nil {
		return t, fmt.Errorf("%w: %v", wire.ErrInvalidTopicName, err)
	}
	return t, nil
}

func ptr[T any](v T) *T { return &v }

// assignedURLs are the assignedBrokerServiceUrl and
// assignedBrokerServiceUrlTls of a CLOSE_PRODUCER or CLOSE_CONSUMER
// sending the client to dest, or nils, which make the client look the
// topic up again.
//
// With advertised listeners the URLs must be those of the listener the
// client uses. Pulsar knows it from the bind address the connection came
// in on (PIP-95's bindAddresses); a Meridian broker serves every listener
// on one port, so it takes the listener the connection's own lookups
// named. A connection that has carried no lookup (the client looked the
// topic up through another broker) gets nils when dest has listeners: a
// lookup, which names the client's listener, is always right, where the
// internal URLs may not be reachable from the client at all.
func (c *conn) assignedURLs(dest loadmgr.Owner) (plain, tls *string) {
	var listener string
	if l := c.lookupListener.Load(); l != nil {
		listener = *l
	} else if len(dest.Listeners) > 0 {
		return nil, nil
	}
	l, err := dest.Listener(listener)
	if err != nil {
		return nil, nil
	}
	plain = ptr(l.ServiceURL)
	if l.ServiceURLTLS != "" {
		tls = ptr(l.ServiceURLTLS)
	}
	return plain, tls
}
