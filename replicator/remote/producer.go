package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// producerID is the id of the one producer on a Producer's connection,
// which it does not share.
const producerID uint64 = 1

// Open's pause after a retriable answer starts at openRetryInitial and
// doubles up to openRetryMax, each pause jittered by ±50%.
const (
	openRetryInitial = 50 * time.Millisecond
	openRetryMax     = time.Second
)

// Producer publishes one source topic's stored entries to one remote
// region, in order, with a bounded window in flight (see the package
// comment).
//
// Ownership: Send is called by one goroutine at a time, the replication
// task, whose call order is the order on the wire. The Producer owns two
// goroutines, stopped and waited for by Close: the reader, which matches
// receipts to the in-flight entries in order, and the keep-alive. Lock
// order: docs/lock-order.md.
type Producer struct {
	cfg            Config
	log            *slog.Logger
	auth           authMethod
	s              *session // rd is the reader goroutine's alone
	lastSequenceID int64
	schemas        schemaMap    // source to remote schema versions; set by Open
	lastHeard      atomic.Int64 // Unix ns, on cfg.Clock, of the last frame received

	wmu sync.Mutex // serialises writes on s.w

	mu struct {
		sync.Mutex
		inflight []*Receipt // sent, awaiting their receipt, in send order
		bytes    int        // of inflight
		// room is closed (and replaced) whenever an entry leaves the
		// window, and closed for good when the producer fails.
		room    chan struct{}
		err     error // terminal: why the producer stopped
		closing bool
	}
	failed chan struct{} // closed with mu.err set
	wg     sync.WaitGroup
}

// MessageID is where the remote broker stored an entry.
type MessageID struct{ Ledger, Entry int64 }

// Duplicate reports whether the remote broker had stored the entry already
// and dropped this copy (Pulsar answers (-1, -1)): for the replicator it is
// delivered all the same.
func (id MessageID) Duplicate() bool { return id.Ledger == -1 && id.Entry == -1 }

// Receipt is the outcome of one Send. It completes exactly once: with the
// remote broker's MessageID when its SEND_RECEIPT arrives, or with the
// error that stopped the Producer (the entry may or may not have been
// stored; resend it on a new Producer). Outcomes follow send order: the
// receipts that succeed are a prefix of the entries sent, so a caller that
// advances its cursor over successful receipts in order never skips one.
type Receipt struct {
	firstIndex, lastIndex int64
	size                  int
	done                  chan struct{}
	id                    MessageID
	err                   error
}

// Done is closed when the receipt arrived or the entry failed.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Result returns the remote MessageID, or the error, once Done is closed.
func (r *Receipt) Result() (MessageID, error) {
	<-r.done
	return r.id, r.err
}

// Wait blocks until the receipt completes or ctx ends. A ctx error says
// nothing about the entry: it may still be acknowledged.
func (r *Receipt) Wait(ctx context.Context) (MessageID, error) {
	select {
	case <-r.done:
		return r.id, r.err
	case <-ctx.Done():
		return MessageID{}, ctx.Err()
	}
}

// SourceIndex is the entry's BrokerEntryMetadata index in the source
// topic (the SEND's highest_sequence_id).
func (r *Receipt) SourceIndex() int64 { return r.lastIndex }

func (r *Receipt) complete(id MessageID, err error) {
	r.id, r.err = id, err
	close(r.done)
}

// Open looks cfg.Topic up on the remote region's brokers (following
// redirects), connects to the owner, and creates the replication producer.
// Answers that mean "try again soon" (ServiceNotReady, ProducerBusy while
// the previous connection's producer is being released, TooManyRequests)
// are retried with a growing, jittered pause until OperationTimeout; any other
// failure is returned at once: ErrConnect with the remote's wire error
// (e.g. wire.ErrAuthentication) or the network error, ErrProtocol for a
// broker that misbehaves, ErrInvalidConfig for credentials or a trust
// file that cannot be read.
func Open(ctx context.Context, cfg Config) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The caller's logger names the region and topic (the replicator's
	// task logger does).
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	auth, _ := newAuth(cfg.Cluster.AuthenticationPlugin, cfg.Cluster.AuthenticationParameters)
	ctx, cancel := context.WithTimeout(ctx, cfg.OperationTimeout)
	defer cancel()
	// Jittered, so that the tasks of a region that all found the remote
	// not ready do not all ask again at the same instant. The intervals are
	// options, not fields set afterwards: the constructor's Reset has
	// already taken the initial interval, and a field set later waited
	// the library's default (500ms) before the first retry.
	retry := backoff.NewExponentialBackOff(backoff.WithInitialInterval(openRetryInitial), backoff.WithMaxInterval(openRetryMax),
		backoff.WithMaxElapsedTime(0), backoff.WithClockProvider(cfg.Clock))
	for {
		s, success, schemas, err := openOnce(ctx, cfg, auth)
		if err == nil {
			return start(cfg, log, auth, s, success, schemas), nil
		}
		if !retriable(err) {
			return nil, err
		}
		pause := retry.NextBackOff()
		log.Debug("remote producer not ready, retrying", "error", err, "pause", pause)
		t := cfg.Clock.NewTimer(pause)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (gave up after %v): %w", err, cfg.OperationTimeout, ctx.Err())
		}
	}
}

// retriable reports whether a failed Open should be tried again at once
// (within its timeout) rather than handed to the caller's backoff.
func retriable(err error) bool {
	return errors.Is(err, wire.ErrServiceNotReady) || errors.Is(err, wire.ErrProducerBusy) ||
		errors.Is(err, wire.ErrTooManyRequests)
}

// openOnce is one lookup, the registration of the source's schemas, and
// the producer's creation.
func openOnce(ctx context.Context, cfg Config, auth authMethod) (*session, *pb.CommandProducerSuccess, schemaMap, error) {
	s, err := lookup(ctx, cfg, auth)
	if err != nil {
		return nil, nil, nil, err
	}
	var schemas schemaMap
	if cfg.Schemas != nil {
		if schemas, err = s.registerSchemas(ctx, cfg.Topic, cfg.Schemas); err != nil {
			s.conn.Close()
			return nil, nil, nil, err
		}
	}
	success, err := s.createProducer(ctx, cfg.Topic, ProducerNamePrefix+cfg.SourceRegion, producerID)
	if err != nil {
		s.conn.Close()
		return nil, nil, nil, err
	}
	return s, success, schemas, nil
}

// lookup finds the broker that owns cfg.Topic and returns a session to it.
// It tries the service URL's hosts in order, then follows Redirect answers
// (passing their authoritative flag on, as Pulsar clients do) up to
// MaxLookupRedirects, reusing the connection when the answer is the broker
// already connected. Pulsar's proxy mode (proxy_through_service_url) is
// not supported: the replicator connects to the broker named, which
// Meridian's brokers always ask for.
func lookup(ctx context.Context, cfg Config, auth authMethod) (*session, error) {
	hosts, err := serviceHosts(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	var s *session
	var errs []error
	for _, ep := range hosts {
		if s, err = dialSession(ctx, cfg, auth, ep); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if s == nil {
		return nil, errors.Join(errs...)
	}
	authoritative := false
	for redirects := 0; ; redirects++ {
		resp, err := s.lookup(ctx, cfg.Topic, cfg.SourceRegion, authoritative)
		if err != nil {
			s.conn.Close()
			return nil, err
		}
		if resp.GetResponse() == pb.CommandLookupTopicResponse_Failed {
			s.conn.Close()
			return nil, fmt.Errorf("%w: lookup of %s on %s: %w", ErrConnect, cfg.Topic, s.ep,
				&wire.ServerError{Code: resp.GetError(), Message: resp.GetMessage()})
		}
		target, err := redirectTarget(cfg.Cluster.BrokerClientTLSEnabled, resp.GetBrokerServiceUrl(), resp.GetBrokerServiceUrlTls())
		if err != nil {
			s.conn.Close()
			return nil, err
		}
		redirect := resp.GetResponse() == pb.CommandLookupTopicResponse_Redirect
		if redirect && redirects >= cfg.MaxLookupRedirects {
			s.conn.Close()
			return nil, fmt.Errorf("%w: lookup of %s redirected more than %d times", ErrProtocol, cfg.Topic, cfg.MaxLookupRedirects)
		}
		if target != s.ep {
			s.conn.Close()
			if s, err = dialSession(ctx, cfg, auth, target); err != nil {
				return nil, err
			}
		}
		if !redirect {
			return s, nil
		}
		authoritative = resp.GetAuthoritative()
	}
}

func start(cfg Config, log *slog.Logger, auth authMethod, s *session, success *pb.CommandProducerSuccess, schemas schemaMap) *Producer {
	p := &Producer{cfg: cfg, log: log, auth: auth, s: s, lastSequenceID: success.GetLastSequenceId(), schemas: schemas, failed: make(chan struct{})}
	p.mu.room = make(chan struct{})
	p.lastHeard.Store(cfg.Clock.Now().UnixNano())
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.readLoop()
	}()
	go func() {
		defer p.wg.Done()
		p.keepAlive()
	}()
	log.Info("remote producer connected", "broker", s.ep.String(), "producer", success.GetProducerName(),
		"last_sequence_id", p.lastSequenceID)
	return p
}

// LastSequenceID is the remote broker's last_sequence_id for this
// producer name when it was created: -1 when it has none.
func (p *Producer) LastSequenceID() int64 { return p.lastSequenceID }

// Broker is the address of the remote broker the producer is connected to.
func (p *Producer) Broker() string { return p.s.ep.String() }

// Done is closed once the Producer has stopped: Err says why. Every entry
// then in flight has failed; open a new Producer and resend them.
func (p *Producer) Done() <-chan struct{} { return p.failed }

// Err returns why the Producer stopped, or nil while it runs.
func (p *Producer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.err
}

// Send sends one stored entry (the managed ledger's bytes, which are not
// retained or modified) and returns its Receipt. It waits while the window
// is full, until ctx ends. It fails at once, without sending, for an entry
// that is not a valid stored entry (ErrBadEntry), one that came by
// replication (ErrAlreadyReplicated), one larger than the remote accepts,
// one whose schema version was not registered at Open (ErrSchema: a schema
// added since; a new Producer registers it), and once the Producer has
// stopped.
//
// When ctx holds a span (the replicator's replicate span of a traced
// entry), the entry carries its context to the destination in
// wire.PropReplicationTraceParent.
func (p *Producer) Send(ctx context.Context, entry []byte) (*Receipt, error) {
	out, err := prepareTraced(entry, p.cfg.SourceRegion, p.cfg.Incarnation, p.schemas, traceParentOf(ctx))
	if err != nil {
		return nil, err
	}
	if len(out.message) > p.s.maxMessageSize {
		return nil, fmt.Errorf("%w: entry %d is %d bytes, above the remote broker's limit of %d", ErrBadEntry,
			out.lastIndex, len(out.message), p.s.maxMessageSize)
	}
	r := &Receipt{firstIndex: out.firstIndex, lastIndex: out.lastIndex, size: len(out.message), done: make(chan struct{})}
	if err := p.reserve(ctx, r); err != nil {
		return nil, err
	}
	// reserve returned holding wmu, so that the wire order is the window's.
	send := pb.CommandSend_builder{
		ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(uint64(out.firstIndex)),
		HighestSequenceId: proto.Uint64(uint64(out.lastIndex)), NumMessages: proto.Int32(out.numMessages),
	}
	if out.chunk {
		send.IsChunk = proto.Bool(true)
	}
	cmd := pb.BaseCommand_builder{Type: pb.BaseCommand_SEND.Enum(), Send: send.Build()}.Build()
	err = p.writeFrame(cmd, out.message)
	p.wmu.Unlock() // before fail, which takes mu: the order is mu, then wmu
	if err != nil {
		p.fail(err) // fails r too: it is in the window
	}
	return r, nil
}

// reserve waits for room in the window and appends r to it. It returns
// with wmu held, taken before mu is released.
func (p *Producer) reserve(ctx context.Context, r *Receipt) error {
	for {
		p.mu.Lock()
		switch {
		case p.mu.err != nil:
			err := p.mu.err
			p.mu.Unlock()
			return err
		case p.mu.closing:
			p.mu.Unlock()
			return ErrClosed
		}
		n := len(p.mu.inflight)
		if n < p.cfg.MaxInFlightEntries && (n == 0 || p.mu.bytes+r.size <= p.cfg.MaxInFlightBytes) {
			p.mu.inflight = append(p.mu.inflight, r)
			p.mu.bytes += r.size
			p.wmu.Lock()
			p.mu.Unlock()
			return nil
		}
		room := p.mu.room
		p.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// InFlight returns the entries and bytes sent and not yet acknowledged.
func (p *Producer) InFlight() (entries, bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.inflight), p.mu.bytes
}

// write sends one simple command.
func (p *Producer) write(cmd *pb.BaseCommand) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.writeFrame(cmd, nil)
}

// writeFrame writes and flushes one command (with its message, if any),
// within OperationTimeout. The caller holds wmu.
func (p *Producer) writeFrame(cmd *pb.BaseCommand, message []byte) error {
	var err error
	if message != nil {
		err = p.s.w.WritePayloadCommand(cmd, nil, message)
	} else {
		err = p.s.w.WriteCommand(cmd)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	// A deadline on the socket: the wall clock's, as the network's is.
	p.s.conn.SetWriteDeadline(time.Now().Add(p.cfg.OperationTimeout))
	if err := p.s.w.Flush(); err != nil {
		return fmt.Errorf("%w: write to %s: %w", ErrDisconnected, p.s.ep, err)
	}
	return nil
}

// readLoop reads the remote broker's frames until the connection ends.
func (p *Producer) readLoop() {
	for {
		var f wire.Frame
		if err := p.s.rd.ReadFrame(&f); err != nil {
			p.fail(fmt.Errorf("%w: read from %s: %w", ErrDisconnected, p.s.ep, err))
			return
		}
		p.lastHeard.Store(p.cfg.Clock.Now().UnixNano())
		if err := p.handle(f.Command); err != nil {
			p.fail(err)
			return
		}
	}
}

// handle acts on one frame from the remote broker; an error stops the
// Producer.
func (p *Producer) handle(cmd *pb.BaseCommand) error {
	switch cmd.GetType() {
	case pb.BaseCommand_SEND_RECEIPT:
		if rc := cmd.GetSendReceipt(); rc.GetProducerId() == producerID {
			return p.receipt(rc)
		}
	case pb.BaseCommand_SEND_ERROR:
		if se := cmd.GetSendError(); se.GetProducerId() == producerID {
			// Any SEND_ERROR stops the Producer: the entries after the
			// failed one may be stored, but the destination must see the
			// source order, so the caller resends from the failed one and
			// the destination drops the copies it already has.
			return fmt.Errorf("%w: entry with sequence id %d: %w", ErrSendFailed, se.GetSequenceId(),
				&wire.ServerError{Code: se.GetError(), Message: se.GetMessage()})
		}
	case pb.BaseCommand_CLOSE_PRODUCER:
		if cp := cmd.GetCloseProducer(); cp.GetProducerId() == producerID {
			err := fmt.Errorf("%w: %s", ErrProducerClosedByBroker, p.s.ep)
			if u := cp.GetAssignedBrokerServiceUrl(); u != "" {
				err = fmt.Errorf("%w (the topic moves to %s)", err, u)
			}
			return err
		}
	case pb.BaseCommand_PING:
		return p.write(pong)
	case pb.BaseCommand_AUTH_CHALLENGE:
		return p.write(authResponse(p.cfg.ClientVersion, p.auth))
	case pb.BaseCommand_ERROR:
		e := cmd.GetError()
		p.log.Warn("remote broker error", "broker", p.s.ep.String(), "code", e.GetError().String(), "message", e.GetMessage())
	}
	return nil
}

// receipt completes the oldest entry in flight, which the receipt must be
// for: a broker answers a producer's SENDs in order.
func (p *Producer) receipt(rc *pb.CommandSendReceipt) error {
	p.mu.Lock()
	if len(p.mu.inflight) == 0 {
		p.mu.Unlock()
		return fmt.Errorf("%w: receipt for sequence id %d with nothing in flight", ErrProtocol, rc.GetSequenceId())
	}
	r := p.mu.inflight[0]
	if int64(rc.GetSequenceId()) != r.firstIndex {
		p.mu.Unlock()
		return fmt.Errorf("%w: receipt for sequence id %d, but the oldest entry in flight is %d", ErrProtocol, rc.GetSequenceId(), r.firstIndex)
	}
	p.mu.inflight[0] = nil
	p.mu.inflight = p.mu.inflight[1:]
	p.mu.bytes -= r.size
	close(p.mu.room)
	p.mu.room = make(chan struct{})
	p.mu.Unlock()
	id := rc.GetMessageId()
	r.complete(MessageID{Ledger: int64(id.GetLedgerId()), Entry: int64(id.GetEntryId())}, nil)
	return nil
}

// keepAlive pings the remote broker every KeepAliveInterval, and stops the
// Producer when nothing has arrived for two intervals.
func (p *Producer) keepAlive() {
	t := p.cfg.Clock.NewTicker(p.cfg.KeepAliveInterval)
	defer t.Stop()
	for {
		select {
		case <-p.failed:
			return
		case <-t.Chan():
		}
		silent := p.cfg.Clock.Since(time.Unix(0, p.lastHeard.Load()))
		if silent > 2*p.cfg.KeepAliveInterval {
			p.fail(fmt.Errorf("%w: nothing from %s for %v", ErrDisconnected, p.s.ep, silent.Round(time.Millisecond)))
			return
		}
		if err := p.write(ping); err != nil {
			p.fail(err)
			return
		}
	}
}

// fail stops the Producer with err (the first error wins): it closes the
// connection, which ends the reader, and fails every entry in flight, in
// order.
func (p *Producer) fail(err error) {
	p.mu.Lock()
	if p.mu.err != nil {
		p.mu.Unlock()
		return
	}
	p.mu.err = err
	pending := p.mu.inflight
	p.mu.inflight, p.mu.bytes = nil, 0
	close(p.mu.room)
	close(p.failed)
	p.mu.Unlock()
	p.s.conn.Close()
	for _, r := range pending {
		r.complete(MessageID{}, fmt.Errorf("entry %d not acknowledged by the remote region: %w", r.lastIndex, err))
	}
	if !errors.Is(err, ErrClosed) {
		p.log.Warn("remote producer stopped", "broker", p.s.ep.String(), "in_flight", len(pending), "error", err)
	}
}

// Close stops accepting entries, waits until those in flight are
// acknowledged or ctx ends, closes the producer and the connection, and
// waits for the Producer's goroutines. Entries still in flight then fail
// with ErrClosed, and Close reports how many.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.mu.closing = true
	if p.mu.err == nil {
		close(p.mu.room) // a Send waiting for room sees ErrClosed now
		p.mu.room = make(chan struct{})
	}
	p.mu.Unlock()
	var unacked int
	for {
		p.mu.Lock()
		unacked = len(p.mu.inflight)
		stopped, room := p.mu.err != nil, p.mu.room
		p.mu.Unlock()
		if unacked == 0 || stopped {
			break
		}
		select {
		case <-room:
			continue
		case <-ctx.Done():
		}
		break
	}
	if p.Err() == nil && ctx.Err() == nil {
		// Best effort: the broker frees the producer name at once rather
		// than when it notices the connection is gone.
		_ = p.write(pb.BaseCommand_builder{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: pb.CommandCloseProducer_builder{
			ProducerId: proto.Uint64(producerID), RequestId: proto.Uint64(0),
		}.Build()}.Build())
	}
	p.fail(ErrClosed)
	p.wg.Wait()
	if unacked > 0 && ctx.Err() != nil {
		return fmt.Errorf("%w with %d entries unacknowledged: %w", ErrClosed, unacked, ctx.Err())
	}
	return nil
}

// Probe asks the remote region, through its broker service URL, who owns
// cfg.Topic, following redirects to the owner's connection, and hangs up:
// a region whose brokers answer a lookup for the topic's bundle serves
// it. It is how regions watch each other for automatic failover
// (cluster/broker's failover.go); a TCP probe would be fooled by a proxy
// that stays up in front of dead brokers. The whole probe is bounded by
// cfg.OperationTimeout; cfg.Incarnation is not used.
func Probe(ctx context.Context, cfg Config) error {
	cfg.Incarnation = max(cfg.Incarnation, 1)
	if err := cfg.Validate(); err != nil {
		return err
	}
	auth, _ := newAuth(cfg.Cluster.AuthenticationPlugin, cfg.Cluster.AuthenticationParameters)
	ctx, cancel := context.WithTimeout(ctx, cfg.OperationTimeout)
	defer cancel()
	s, err := lookup(ctx, cfg, auth)
	if err != nil {
		return err
	}
	return s.conn.Close()
}
