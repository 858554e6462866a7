package bookie

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/linger"
)

// serverConn is one client connection. Its reader goroutine decodes requests
// and dispatches them; reads are served inline, while adds, fences and LAC
// writes go to the journal and are answered by whichever journal goroutine
// applies them, when durable, and long-polls are answered from a timer or a
// LAC update. Every answer goes through out to the writer goroutine, the
// only one that writes to the socket; a group commit's answers go as one
// reply. So responses leave in completion order, not request order.
//
// Bounds: the reader takes a slot from slots before dispatching a request and
// the writer returns it after writing the response, so at most
// MaxConnInFlight requests are outstanding and out (of that capacity) never
// blocks a responder. In particular the journal goroutine never waits on a
// slow client.
type serverConn struct {
	b     *Bookie
	nc    net.Conn
	log   *slog.Logger
	out   chan reply
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
	// authed is whether the connection has authenticated, or needs not
	// (Config.AuthToken empty). The reader goroutine alone reads and sets
	// it: no request reaches dispatch before it is true.
	authed bool

	// timers are the connection's pending long-poll timeouts, stopped when
	// it closes so that none fires after the bookie has stopped.
	timers struct {
		sync.Mutex
		m      map[*lacWaiter]clockwork.Timer
		closed bool
	}
}

// reply is what a connection's writer sends in one write: n response
// frames, each holding one of the connection's slots. A reply of none
// (closeAfter) makes the writer close the connection after writing
// everything before it, lingering until the peer has read it: a refused
// peer may have pipelined requests after the one refused, and closing
// with those unread would reset the connection and lose the refusal
// (package linger).
type reply struct {
	frames []byte
	n      int
}

var closeAfter = reply{}

// replies gathers answers given together, a group commit's, by connection,
// so that each connection gets them in one reply: one hand-off to its writer
// and one write(2), instead of one of each per add. A batch's answers go to
// few connections (a broker keeps one to each bookie), so a slice serves.
type replies []connReply

type connReply struct {
	c *serverConn
	reply
}

func (r *replies) add(c *serverConn, requestID uint64, m bkproto.Message) {
	i := slices.IndexFunc(*r, func(p connReply) bool { return p.c == c })
	if i < 0 {
		i = len(*r)
		*r = append(*r, connReply{c: c})
	}
	p := &(*r)[i]
	p.frames = bkproto.AppendFrame(p.frames, requestID, m)
	p.n++
}

// send hands each connection its reply. It never blocks: out holds a slot's
// worth of room for every response (see serverConn).
func (r replies) send() {
	for _, p := range r {
		p.c.out <- p.reply
	}
}

func (c *serverConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
		c.timers.Lock()
		pending := c.timers.m
		c.timers.m = nil
		c.timers.closed = true
		c.timers.Unlock()
		for w, t := range pending {
			t.Stop()
			if w.claim() {
				c.b.store.forgetWaiter(w)
			}
		}
	})
}

func (c *serverConn) respond(requestID uint64, m bkproto.Message) {
	c.out <- reply{frames: bkproto.AppendFrame(nil, requestID, m), n: 1}
}

func (c *serverConn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	write := func(r reply) bool {
		if r.n == 0 { // closeAfter: the reader has stopped
			if bw.Flush() == nil && linger.CloseWrite(c.nc) {
				linger.Drain(c.nc)
			}
			c.close()
			return false
		}
		_, err := bw.Write(r.frames)
		for range r.n {
			<-c.slots
		}
		if err != nil {
			c.close()
			return false
		}
		return true
	}
	for {
		select {
		case <-c.done:
			return
		case f := <-c.out:
			if !write(f) {
				return
			}
		drain:
			for {
				select {
				case f := <-c.out:
					if !write(f) {
						return
					}
				default:
					break drain
				}
			}
			if err := bw.Flush(); err != nil {
				c.close()
				return
			}
		}
	}
}

func (c *serverConn) readLoop() {
	closeNow := true
	defer func() {
		if closeNow {
			c.close()
		}
	}()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		// Until it has authenticated, a connection costs no more than an
		// AuthRequest: a larger frame closes it before its body is read.
		limit := bkproto.MaxFrameSize
		if !c.authed {
			limit = bkproto.MaxAuthFrameSize
		}
		f, err := bkproto.ReadFrame(br, limit)
		arrived := c.b.clock.Now()
		if err != nil {
			select {
			case <-c.done:
			default:
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					c.log.Warn("closing bookie connection: bad frame", "err", err)
				}
			}
			return
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.done:
			return
		}
		m, err := bkproto.Decode(f)
		if err == nil && f.Type&bkproto.ResponseBit != 0 {
			err = fmt.Errorf("%w: a client sent a response (%s)", bkproto.ErrMalformedFrame, f.Type)
		}
		if err != nil {
			c.log.Warn("closing bookie connection: malformed request", "err", err)
		} else if auth, ok := m.(*bkproto.AuthRequest); ok {
			if err = c.authenticate(auth); err == nil {
				c.respond(f.RequestID, &bkproto.AuthResponse{})
				continue
			}
		} else if !c.authed {
			err = fmt.Errorf("%w: this bookie requires an AuthRequest first on every connection (the region's bookie token)", bkproto.ErrUnauthorized)
		}
		if err != nil {
			if errors.Is(err, bkproto.ErrUnauthorized) {
				c.b.m.authFailures.Inc()
				c.log.Warn("closing bookie connection: not authenticated", "err", err)
			}
			if resp := refusal(f.Type, err); resp != nil {
				c.respond(f.RequestID, resp)
			} else {
				<-c.slots
			}
			// The writer closes the connection once the answer is out;
			// the deadline bounds that wait on a peer that does not read.
			c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.out <- closeAfter
			closeNow = false
			return
		}
		c.b.dispatch(c, f.RequestID, m, arrived)
	}
}

// authenticate checks an AuthRequest against Config.AuthToken. A bookie
// that requires no token accepts any AuthRequest, so that a client given
// the region's token also works with bookies that do not check it yet.
func (c *serverConn) authenticate(req *bkproto.AuthRequest) error {
	want := c.b.cfg.AuthToken
	switch {
	case want == "":
	case req.Method != bkproto.AuthMethodToken:
		return fmt.Errorf("%w: auth method %q; this bookie takes %q", bkproto.ErrUnauthorized, req.Method, bkproto.AuthMethodToken)
	case subtle.ConstantTimeCompare(req.Credentials, []byte(want)) != 1:
		return fmt.Errorf("%w: wrong token", bkproto.ErrUnauthorized)
	}
	c.authed = true
	return nil
}

// refusal is the response to a request type that closes the connection:
// Unauthorized, or BadRequest for a malformed frame; nil if the type is not
// a request we know.
func refusal(t bkproto.MsgType, err error) bkproto.Message {
	r := bkproto.Result{Status: bkproto.StatusBadRequest, Message: err.Error()}
	if errors.Is(err, bkproto.ErrUnauthorized) {
		r.Status = bkproto.StatusUnauthorized
	}
	switch t {
	case bkproto.TypeAddEntry:
		return &bkproto.AddResponse{Result: r}
	case bkproto.TypeReadEntry:
		return &bkproto.ReadResponse{Result: r}
	case bkproto.TypeReadLAC:
		return &bkproto.ReadLACResponse{Result: r}
	case bkproto.TypeFence:
		return &bkproto.FenceResponse{Result: r}
	case bkproto.TypeWriteLAC:
		return &bkproto.WriteLACResponse{Result: r}
	case bkproto.TypeAuth:
		return &bkproto.AuthResponse{Result: r}
	}
	return nil
}

func result(err error) bkproto.Result {
	if err == nil {
		return bkproto.Result{}
	}
	return bkproto.Result{Status: bkproto.StatusOf(err), Message: err.Error()}
}

// dispatch serves one request, whose frame was read at arrived. It runs on
// the connection's reader goroutine and must not block except to hand work
// to the journal.
func (b *Bookie) dispatch(c *serverConn, id uint64, m bkproto.Message, arrived time.Time) {
	switch req := m.(type) {
	case *bkproto.AddRequest:
		b.handleAdd(c, id, req, arrived)
	case *bkproto.ReadRequest:
		switch {
		case req.Fence:
			b.handleFencingRead(c, id, req)
		case req.Wait > 0:
			b.handleWaitingRead(c, id, req)
		default:
			start := b.clock.Now()
			resp := b.readResponse(req.LedgerID, req.EntryID)
			ok := resp.Result.Status == bkproto.StatusOK
			b.m.bk.readEntry.observe(b.clock.Since(start), ok)
			b.m.bk.readEntryRequest.observe(b.clock.Since(arrived), ok)
			c.respond(id, resp)
		}
	case *bkproto.ReadLACRequest:
		b.handleReadLAC(c, id, req)
	case *bkproto.FenceRequest:
		b.journalOp(c, id, record{kind: recFence, ledgerID: req.LedgerID, masterKey: req.MasterKey}, func(res opResult) bkproto.Message {
			return &bkproto.FenceResponse{Result: result(res.err), LedgerID: req.LedgerID, LastAddConfirmed: res.lac}
		})
	case *bkproto.WriteLACRequest:
		if req.LedgerID < 0 || req.LastAddConfirmed < bkproto.NoEntry {
			c.respond(id, &bkproto.WriteLACResponse{Result: result(fmt.Errorf("%w: negative ledger id or LAC", bkproto.ErrBadRequest)), LedgerID: req.LedgerID})
			return
		}
		b.journalOp(c, id, record{kind: recLAC, ledgerID: req.LedgerID, lac: req.LastAddConfirmed, masterKey: req.MasterKey},
			func(res opResult) bkproto.Message {
				return &bkproto.WriteLACResponse{Result: result(res.err), LedgerID: req.LedgerID}
			})
	}
}

func (b *Bookie) handleAdd(c *serverConn, id uint64, req *bkproto.AddRequest, arrived time.Time) {
	start := b.clock.Now()
	// answered records an add's answer in BookKeeper's request stats.
	answered := func(err error) {
		b.m.bk.addEntry.observe(b.clock.Since(start), err == nil)
		b.m.bk.addEntryRequest.observe(b.clock.Since(arrived), err == nil)
	}
	refuse := func(err error) {
		b.m.adds.WithLabelValues(bkproto.StatusOf(err).String()).Inc()
		answered(err)
		c.respond(id, &bkproto.AddResponse{Result: result(err), LedgerID: req.LedgerID, EntryID: req.EntryID})
	}
	switch {
	case req.LedgerID < 0 || req.EntryID < 0 || req.LastAddConfirmed < bkproto.NoEntry:
		refuse(fmt.Errorf("%w: negative ledger id, entry id or LAC", bkproto.ErrBadRequest))
		return
	case b.readOnly.Load():
		refuse(fmt.Errorf("%w: bookie %s's disk is full; write to another bookie", bkproto.ErrReadOnly, b.cfg.ID))
		return
	case b.decommissioning.Load() && !req.Recovery:
		refuse(fmt.Errorf("%w: bookie %s is being decommissioned; write to another bookie", bkproto.ErrReadOnly, b.cfg.ID))
		return
	case len(req.Payload) > b.cfg.MaxEntrySize:
		refuse(fmt.Errorf("%w: %d-byte entry, this bookie accepts at most %d", bkproto.ErrTooLarge, len(req.Payload), b.cfg.MaxEntrySize))
		return
	case bkproto.EntryChecksum(req.LedgerID, req.EntryID, req.Payload) != req.Checksum:
		b.m.checksumErrors.Inc()
		refuse(fmt.Errorf("%w: ledger %d entry %d arrived damaged", bkproto.ErrChecksumMismatch, req.LedgerID, req.EntryID))
		return
	}
	// Early answers only; the journal's apply stage decides for real. They
	// spare the journal the records of writers that would be refused.
	if !b.store.keyAllows(req.LedgerID, req.MasterKey) {
		refuse(keyError(req.LedgerID, req.MasterKey))
		return
	}
	if fenced, _, _ := b.store.ledger(req.LedgerID); fenced && !req.Recovery {
		refuse(fmt.Errorf("%w: ledger %d is fenced", bkproto.ErrFenced, req.LedgerID))
		return
	}
	rec := record{kind: recAdd, ledgerID: req.LedgerID, entryID: req.EntryID, lac: req.LastAddConfirmed,
		recovery: req.Recovery, checksum: req.Checksum, masterKey: req.MasterKey, payload: req.Payload}
	b.journalOp(c, id, rec, func(res opResult) bkproto.Message {
		b.m.adds.WithLabelValues(bkproto.StatusOf(res.err).String()).Inc()
		answered(res.err)
		if res.err == nil {
			b.m.addLatency.Observe(b.clock.Now().Sub(start).Seconds())
			b.m.bk.writeBytes.Add(float64(len(req.Payload)))
		}
		return &bkproto.AddResponse{Result: result(res.err), LedgerID: req.LedgerID, EntryID: req.EntryID}
	})
}

// journalOp sends a record through the journal and answers with answer's
// response once it is durable (or has failed).
func (b *Bookie) journalOp(c *serverConn, id uint64, rec record, answer func(opResult) bkproto.Message) {
	o := &op{rec: rec, conn: c, requestID: id, answer: answer}
	if err := b.journal.enqueue(b.ctx, o); err != nil {
		c.respond(id, answer(opResult{err: fmt.Errorf("%w: %w", bkproto.ErrInternal, err), lac: bkproto.NoEntry}))
	}
}

func (b *Bookie) readResponse(ledgerID, entryID int64) *bkproto.ReadResponse {
	payload, sum, lac, err := b.store.read(ledgerID, entryID)
	b.m.reads.WithLabelValues(bkproto.StatusOf(err).String()).Inc()
	b.m.bk.readBytes.Add(float64(len(payload)))
	return &bkproto.ReadResponse{Result: result(err), LedgerID: ledgerID, EntryID: entryID,
		LastAddConfirmed: lac, Checksum: sum, Payload: payload}
}

// handleFencingRead persists the fence first (through the journal), then
// reads: the answer proves that no later non-recovery add will be accepted.
func (b *Bookie) handleFencingRead(c *serverConn, id uint64, req *bkproto.ReadRequest) {
	b.journalOp(c, id, record{kind: recFence, ledgerID: req.LedgerID, masterKey: req.MasterKey}, func(res opResult) bkproto.Message {
		if res.err != nil {
			b.m.reads.WithLabelValues(bkproto.StatusOf(res.err).String()).Inc()
			return &bkproto.ReadResponse{Result: result(res.err), LedgerID: req.LedgerID, EntryID: req.EntryID, LastAddConfirmed: res.lac}
		}
		return b.readResponse(req.LedgerID, req.EntryID)
	})
}

func (b *Bookie) handleReadLAC(c *serverConn, id uint64, req *bkproto.ReadLACRequest) {
	answer := func(lac int64, err error) {
		c.respond(id, &bkproto.ReadLACResponse{Result: result(err), LedgerID: req.LedgerID, LastAddConfirmed: lac})
	}
	if !req.LongPoll || req.Timeout <= 0 {
		_, lac, ok := b.store.ledger(req.LedgerID)
		if !ok {
			answer(lac, fmt.Errorf("%w: ledger %d", bkproto.ErrNoSuchLedger, req.LedgerID))
			return
		}
		answer(lac, nil)
		return
	}
	b.longPoll(c, req.LedgerID, req.Previous, req.Timeout, answer)
}

// handleWaitingRead serves a long-poll read (ReadRequest.Wait): once the
// LAC reaches the entry, or the wait ends, it answers as a plain read. The
// read runs on its own goroutine: the LAC update that wakes it runs on the
// store's apply path, which must not wait on a read.
func (b *Bookie) handleWaitingRead(c *serverConn, id uint64, req *bkproto.ReadRequest) {
	b.longPoll(c, req.LedgerID, req.EntryID-1, req.Wait, func(lac int64, err error) {
		if err != nil && !errors.Is(err, bkproto.ErrNoSuchLedger) {
			c.respond(id, &bkproto.ReadResponse{Result: result(err), LedgerID: req.LedgerID, EntryID: req.EntryID, LastAddConfirmed: lac})
			return
		}
		go c.respond(id, b.readResponse(req.LedgerID, req.EntryID))
	})
}

// longPoll calls answer once the ledger's LAC exceeds previous, or timeout
// passes (with the LAC then, or ErrNoSuchLedger for a ledger this bookie
// still holds nothing of), or the ledger is deleted (ErrNoSuchLedger). A
// connection that closes first answers nobody. Whoever claims the waiter
// first answers it; the timer belongs to the connection, which stops it.
func (b *Bookie) longPoll(c *serverConn, ledgerID, previous int64, timeout time.Duration, answer func(lac int64, err error)) {
	w := &lacWaiter{ledgerID: ledgerID, previous: previous}
	w.answer = func(lac int64, err error) {
		c.timers.Lock()
		if t := c.timers.m[w]; t != nil {
			t.Stop()
			delete(c.timers.m, w)
		}
		c.timers.Unlock()
		answer(lac, err)
	}
	if !b.store.waitLAC(w) {
		return // answered already
	}
	c.timers.Lock()
	defer c.timers.Unlock()
	if c.timers.closed {
		if w.claim() {
			b.store.forgetWaiter(w)
		}
		return
	}
	if c.timers.m == nil {
		c.timers.m = make(map[*lacWaiter]clockwork.Timer)
	}
	c.timers.m[w] = b.clock.AfterFunc(timeout, func() {
		c.timers.Lock()
		delete(c.timers.m, w)
		c.timers.Unlock()
		if !w.claim() {
			return
		}
		b.store.forgetWaiter(w)
		_, lac, ok := b.store.ledger(ledgerID)
		if !ok {
			answer(lac, fmt.Errorf("%w: ledger %d", bkproto.ErrNoSuchLedger, ledgerID))
			return
		}
		answer(lac, nil)
	})
}
