package bkproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Dialer opens transport connections. *net.Dialer implements it; tests inject
// one that fails, delays or cuts connections.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// ConnConfig configures a client connection.
type ConnConfig struct {
	// Dialer opens the TCP connection. Nil means a plain *net.Dialer.
	Dialer Dialer
	// MaxInFlight bounds the requests outstanding on the connection. A caller
	// beyond it waits (until its ctx is done) for a slot: this is the
	// connection's backpressure. Each in-flight add holds its payload, so the
	// memory bound is MaxInFlight × the largest entry. 1..65536.
	MaxInFlight int
	// Logger receives connection-level events. Nil discards them.
	Logger *slog.Logger
	// TLS, when set, runs the protocol over TLS: RootCAs verify the
	// bookie's certificate (its ServerName defaults to the host of the
	// address dialled), and Certificates hold the client certificate of a
	// bookie that requires mutual TLS. Nil: plain TCP, the default.
	TLS *tls.Config
	// Token, when set, is sent in an AuthRequest (AuthMethodToken) before
	// anything else on each connection, and a refusal fails the dial with
	// ErrUnauthorized. Empty: no AuthRequest, for bookies that require
	// none. At most MaxCredentialsSize bytes.
	Token []byte
}

// DefaultConnConfig returns a ConnConfig with the given dialer and 1024
// requests in flight.
func DefaultConnConfig(d Dialer) ConnConfig {
	return ConnConfig{Dialer: d, MaxInFlight: 1024}
}

// Validate checks the bounds documented on each field.
func (c ConnConfig) Validate() error {
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<16 {
		return fmt.Errorf("bkproto: MaxInFlight %d out of range 1..65536", c.MaxInFlight)
	}
	if len(c.Token) > MaxCredentialsSize {
		return fmt.Errorf("bkproto: Token of %d bytes, limit %d", len(c.Token), MaxCredentialsSize)
	}
	return nil
}

// Conn is a client connection to one bookie. It is safe for concurrent use
// and pipelined: any number of goroutines may issue requests at once, each is
// tagged with a fresh request id, and each caller gets the response carrying
// its id whatever order the bookie answers in.
//
// Two goroutines own the socket: the writer, which alone writes frames and
// flushes whenever its queue drains (so concurrent requests share syscalls),
// and the reader, which alone reads and routes responses to their callers
// through the pending map. Both stop when the connection fails or Close is
// called, and Close waits for them. A transport or protocol error fails every
// request in flight with ErrConnClosed; the connection is then dead and the
// caller dials again.
type Conn struct {
	nc     net.Conn
	log    *slog.Logger
	sendq  chan []byte
	slots  chan struct{}
	nextID atomic.Uint64

	mu struct {
		sync.Mutex
		pending map[uint64]chan Message
	}

	done    chan struct{}
	errOnce sync.Once
	err     error // set once, before done is closed
	wg      sync.WaitGroup
}

// Dial connects to the bookie at addr through d (nil: a plain *net.Dialer)
// with the default configuration.
func Dial(ctx context.Context, addr string, d Dialer) (*Conn, error) {
	return DialConfig(ctx, addr, DefaultConnConfig(d))
}

// DialConfig connects to the bookie at addr with cfg.
func DialConfig(ctx context.Context, addr string, cfg ConnConfig) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := cfg.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bkproto: dial bookie %s: %w", addr, err)
	}
	if nc, err = handshake(ctx, nc, addr, cfg); err != nil {
		nc.Close()
		return nil, err
	}
	return NewConn(nc, cfg), nil
}

// handshake runs what a connection needs before its first request: the TLS
// handshake and the AuthRequest, each when cfg asks for it. It runs before
// the connection's goroutines start, so the AuthRequest is the first frame.
func handshake(ctx context.Context, nc net.Conn, addr string, cfg ConnConfig) (net.Conn, error) {
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				tc.ServerName = host
			}
		}
		tlsConn := tls.Client(nc, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return nc, fmt.Errorf("bkproto: TLS handshake with bookie %s: %w", addr, err)
		}
		nc = tlsConn
	}
	if len(cfg.Token) == 0 {
		return nc, nil
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(authTimeout))
	}
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(AppendFrame(nil, 0, &AuthRequest{Method: AuthMethodToken, Credentials: cfg.Token})); err != nil {
		return nc, fmt.Errorf("bkproto: authenticate to bookie %s: %w", addr, err)
	}
	f, err := ReadFrame(bufio.NewReaderSize(nc, 512), 4<<10)
	if err != nil {
		return nc, fmt.Errorf("bkproto: authenticate to bookie %s: %w", addr, err)
	}
	m, err := Decode(f)
	if err != nil {
		return nc, err
	}
	resp, ok := m.(*AuthResponse)
	if !ok {
		return nc, fmt.Errorf("%w: bookie %s answered an AuthRequest with %s", ErrMalformedFrame, addr, m.Type())
	}
	if err := resp.Err(); err != nil {
		return nc, fmt.Errorf("bkproto: bookie %s refused the credentials: %w", addr, err)
	}
	return nc, nil
}

// authTimeout bounds the AuthRequest's round trip when the dial's context
// has no deadline.
const authTimeout = 10 * time.Second

// NewConn runs the protocol over an established connection, which the Conn
// then owns. cfg must be valid.
func NewConn(nc net.Conn, cfg ConnConfig) *Conn {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Conn{
		nc:    nc,
		log:   log.With("bookie", nc.RemoteAddr().String()),
		sendq: make(chan []byte, cfg.MaxInFlight),
		slots: make(chan struct{}, cfg.MaxInFlight),
		done:  make(chan struct{}),
	}
	c.mu.pending = make(map[uint64]chan Message)
	c.wg.Add(2)
	go c.writeLoop()
	go c.readLoop()
	return c
}

// RemoteAddr is the bookie's address.
func (c *Conn) RemoteAddr() string { return c.nc.RemoteAddr().String() }

// Done is closed once the connection has failed or been closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (it wraps ErrConnClosed), or nil while it
// is alive.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close closes the connection, fails the requests in flight and waits for the
// connection's goroutines to stop.
func (c *Conn) Close() error {
	c.fail(nil)
	c.wg.Wait()
	return nil
}

func (c *Conn) fail(cause error) {
	c.errOnce.Do(func() {
		if cause == nil {
			c.err = ErrConnClosed
		} else {
			c.err = fmt.Errorf("%w: %w", ErrConnClosed, cause)
			c.log.Warn("bookie connection failed", "err", cause)
		}
		close(c.done)
		c.nc.Close()
	})
}

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case <-c.done:
			return
		case f := <-c.sendq:
			if _, err := bw.Write(f); err != nil {
				c.fail(err)
				return
			}
		drain:
			for {
				select {
				case f := <-c.sendq:
					if _, err := bw.Write(f); err != nil {
						c.fail(err)
						return
					}
				default:
					break drain
				}
			}
			if err := bw.Flush(); err != nil {
				c.fail(err)
				return
			}
		}
	}
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		f, err := ReadFrame(br, MaxFrameSize)
		if err != nil {
			c.fail(err)
			return
		}
		if f.Type&ResponseBit == 0 {
			c.fail(fmt.Errorf("%w: bookie sent a request (%s)", ErrMalformedFrame, f.Type))
			return
		}
		m, err := Decode(f)
		if err != nil {
			c.fail(err)
			return
		}
		c.mu.Lock()
		ch, ok := c.mu.pending[f.RequestID]
		delete(c.mu.pending, f.RequestID)
		c.mu.Unlock()
		if ok {
			ch <- m // buffered 1, and each id is answered once
		}
		// An unknown id belongs to a caller that gave up; drop it.
	}
}

// call sends req and waits for the response of the matching type.
func (c *Conn) call(ctx context.Context, req Message) (Message, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.err
	}
	defer func() { <-c.slots }()

	id := c.nextID.Add(1)
	ch := make(chan Message, 1)
	c.mu.Lock()
	c.mu.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.mu.pending, id)
		c.mu.Unlock()
	}

	select {
	case c.sendq <- AppendFrame(nil, id, req):
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-c.done:
		forget()
		return nil, c.err
	}

	select {
	case m := <-ch:
		if m.Type() != req.Type()|ResponseBit {
			err := fmt.Errorf("%w: %s answered with %s", ErrMalformedFrame, req.Type(), m.Type())
			c.fail(err)
			return nil, err
		}
		return m, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-c.done:
		forget()
		return nil, c.err
	}
}

// AddEntry stores one entry on the bookie and returns once the bookie has it
// on its fsynced journal. It computes req.Checksum from the ids and payload.
// Errors: ErrFenced, ErrReadOnly, ErrTooLarge, ErrBadRequest, ErrInternal,
// ErrChecksumMismatch (the payload was damaged on the way), ErrConnClosed.
func (c *Conn) AddEntry(ctx context.Context, req AddRequest) error {
	if len(req.Payload) > MaxPayloadSize {
		return fmt.Errorf("%w: %d-byte payload, protocol limit %d", ErrTooLarge, len(req.Payload), MaxPayloadSize)
	}
	if len(req.MasterKey) > MaxMasterKeySize {
		return fmt.Errorf("%w: %d-byte master key, limit %d", ErrBadRequest, len(req.MasterKey), MaxMasterKeySize)
	}
	req.Checksum = EntryChecksum(req.LedgerID, req.EntryID, req.Payload)
	m, err := c.call(ctx, &req)
	if err != nil {
		return err
	}
	resp := m.(*AddResponse)
	if err := resp.Err(); err != nil {
		return err
	}
	if resp.LedgerID != req.LedgerID || resp.EntryID != req.EntryID {
		return c.mismatch(&req, resp.LedgerID, resp.EntryID)
	}
	return nil
}

// Entry is an entry read from a bookie.
type Entry struct {
	LedgerID int64
	EntryID  int64
	// LastAddConfirmed is the bookie's LAC for the ledger when it answered.
	LastAddConfirmed int64
	Payload          []byte
}

// ReadEntry reads one entry and verifies its checksum. On an error status
// and on a checksum mismatch the returned Entry still carries the bookie's
// LastAddConfirmed. With req.Wait it is a long-poll read (ReadRequest.Wait);
// ctx should outlast the wait. Errors: ErrNoSuchEntry, ErrNoSuchLedger,
// ErrChecksumMismatch (on the bookie or on receipt: read another replica),
// ErrInternal, ErrConnClosed.
func (c *Conn) ReadEntry(ctx context.Context, req ReadRequest) (Entry, error) {
	m, err := c.call(ctx, &req)
	if err != nil {
		return Entry{}, err
	}
	resp := m.(*ReadResponse)
	e := Entry{LedgerID: resp.LedgerID, EntryID: resp.EntryID, LastAddConfirmed: resp.LastAddConfirmed}
	if err := resp.Err(); err != nil {
		return e, err
	}
	if resp.LedgerID != req.LedgerID || resp.EntryID != req.EntryID {
		return Entry{}, c.mismatch(&req, resp.LedgerID, resp.EntryID)
	}
	if sum := EntryChecksum(resp.LedgerID, resp.EntryID, resp.Payload); sum != resp.Checksum {
		return e, fmt.Errorf("%w: ledger %d entry %d from %s: computed %#x, bookie sent %#x",
			ErrChecksumMismatch, req.LedgerID, req.EntryID, c.RemoteAddr(), sum, resp.Checksum)
	}
	e.Payload = resp.Payload
	return e, nil
}

// ReadLAC returns the bookie's LastAddConfirmed for the ledger (NoEntry if it
// has none). With req.LongPoll it returns once that exceeds req.Previous or
// req.Timeout has passed; ctx should outlast req.Timeout.
func (c *Conn) ReadLAC(ctx context.Context, req ReadLACRequest) (int64, error) {
	m, err := c.call(ctx, &req)
	if err != nil {
		return NoEntry, err
	}
	resp := m.(*ReadLACResponse)
	if err := resp.Err(); err != nil {
		return NoEntry, err
	}
	return resp.LastAddConfirmed, nil
}

// Fence fences the ledger on this bookie and returns, once the fence is
// persisted, the bookie's LAC for it. Fencing a ledger the bookie has never
// seen is allowed (it may have missed every add) and answers NoEntry.
// req.MasterKey must be the ledger's (ErrUnauthorized otherwise).
func (c *Conn) Fence(ctx context.Context, req FenceRequest) (int64, error) {
	if len(req.MasterKey) > MaxMasterKeySize {
		return NoEntry, fmt.Errorf("%w: %d-byte master key, limit %d", ErrBadRequest, len(req.MasterKey), MaxMasterKeySize)
	}
	m, err := c.call(ctx, &req)
	if err != nil {
		return NoEntry, err
	}
	resp := m.(*FenceResponse)
	if err := resp.Err(); err != nil {
		return NoEntry, err
	}
	return resp.LastAddConfirmed, nil
}

// WriteLAC sends an explicit LAC and returns once the bookie has persisted
// it. Errors: ErrFenced, ErrReadOnly, ErrBadRequest, ErrInternal,
// ErrConnClosed.
func (c *Conn) WriteLAC(ctx context.Context, req WriteLACRequest) error {
	if len(req.MasterKey) > MaxMasterKeySize {
		return fmt.Errorf("%w: %d-byte master key, limit %d", ErrBadRequest, len(req.MasterKey), MaxMasterKeySize)
	}
	m, err := c.call(ctx, &req)
	if err != nil {
		return err
	}
	return m.(*WriteLACResponse).Err()
}

// mismatch reports (and dies of) a response naming another entry than its
// request: the bookie or the stream is broken.
func (c *Conn) mismatch(req Message, ledgerID, entryID int64) error {
	err := fmt.Errorf("%w: %s answered for ledger %d entry %d", ErrMalformedFrame, req.Type(), ledgerID, entryID)
	c.fail(err)
	return err
}
