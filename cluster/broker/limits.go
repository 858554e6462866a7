package broker

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/topology"
)

// Bounded work. Every resource a client can make the broker spend has a
// bound, with Pulsar's setting and answer where Pulsar has one:
//
//   - connections: MaxConnections and MaxConnectionsPerIP. One past either
//     is answered an ERROR before CONNECT and closed (admitConnection);
//   - a connection before its CONNECT: one frame of at most
//     maxFrameSizeBeforeConnect, within ConnectTimeout, and the frame
//     reader never allocates ahead of the bytes that arrived (wire.Reader),
//     so a client that has not authenticated holds what it sent, at most
//     about maxFrameSizeBeforeConnect;
//   - lookups: ServiceConfig.MaxConcurrentLookups over the whole broker,
//     binary and HTTP lookups alike. One past it is answered
//     TooManyRequests (HTTP 429) at once (LookupPermits);
//   - topic loads: ServiceConfig.MaxConcurrentTopicLoads. One past it waits
//     for a slot, its PRODUCER and SUBSCRIBE replies held meanwhile
//     (Service.loadSlot);
//   - a connection's requests that wait on other services, each in a
//     goroutine: MaxRequestsPerConnection. At the bound the connection's
//     reader stops reading until one is answered (acquireRequestSlot);
//   - a connection's SENDs awaiting their receipt: MaxPendingPublishes and
//     MaxPendingPublishBytes. At either bound the reader stops reading until
//     half of them are answered (awaitPublishRoom). A producer's own queue
//     of them holds what is in flight, at most maxReceipts (receipts.go);
//   - a connection's producers and consumers: MaxProducersPerConnection and
//     MaxConsumersPerConnection. One past either is answered NotAllowed
//     (register); a topic's and a subscription's are Pulsar's policies,
//     with the broker's defaults in ServiceConfig.Policies.
//
// Pausing the reader is TCP's own backpressure: the client's frames wait in
// the socket buffers and then in the client, whose sends block or time out
// as they do against a slow broker, and nothing fails that would not fail
// anyway. The broker holds at most the bound plus one frame per connection.

// maxFrameSizeBeforeConnect bounds the first frame of a connection, its
// CONNECT: room for a client's bearer token many times over (a JWT is a
// few KiB), far from the MiBs of a message frame that an unauthenticated
// client could otherwise make the broker buffer.
const maxFrameSizeBeforeConnect = 64 << 10

// refuseTimeout bounds how long the broker spends telling a refused
// connection why; refusals in progress are bounded by maxRefusing, past
// which a refused connection is closed without a word; refusals are
// logged at most once per refusalLogEvery.
const (
	refuseTimeout   = time.Second
	maxRefusing     = 64
	refusalLogEvery = 10 * time.Second
)

// serverLimits is the Server's share of the bounds: what spans connections.
type serverLimits struct {
	connectionsRefused atomic.Int64
	lastRefusalLog     atomic.Int64 // unix nanoseconds of the last warning about one
	readPauses         atomic.Int64

	mu struct {
		sync.Mutex
		conns    int            // admitted connections still open
		perIP    map[string]int // the same, by remote IP
		refusing map[net.Conn]struct{}
		closed   bool // the Server is closing: refuse without a word
	}
}

// LimitCounts counts what the broker's bounds have turned away or held
// back since it started.
type LimitCounts struct {
	// ConnectionsRefused: connections closed on arrival, past
	// MaxConnections or MaxConnectionsPerIP.
	ConnectionsRefused int64
	// LookupsRefused: lookups (binary and HTTP) answered TooManyRequests,
	// past MaxConcurrentLookups.
	LookupsRefused int64
	// ReadPauses: times a connection's reader stopped reading, at
	// MaxRequestsPerConnection or at its pending publishes' bounds.
	ReadPauses int64
}

// LimitCounts returns the counts so far.
func (s *Server) LimitCounts() LimitCounts {
	return LimitCounts{
		ConnectionsRefused: s.limits.connectionsRefused.Load(),
		LookupsRefused:     s.topics.LookupPermits().Refused(),
		ReadPauses:         s.limits.readPauses.Load(),
	}
}

// admitConnection counts a new connection from addr against MaxConnections
// and MaxConnectionsPerIP. Admitted, it returns the function that uncounts
// it when the connection ends; refused, an error saying which bound, in
// Pulsar's words.
func (s *Server) admitConnection(addr net.Addr) (release func(), err error) {
	ip := addr.String()
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	l := &s.limits
	l.mu.Lock()
	defer l.mu.Unlock()
	if max := s.cfg.MaxConnections; max > 0 && l.mu.conns >= max {
		return nil, fmt.Errorf("%w: Reached the maximum number of connections", wire.ErrNotAllowed)
	}
	if max := s.cfg.MaxConnectionsPerIP; max > 0 && l.mu.perIP[ip] >= max {
		return nil, fmt.Errorf("%w: Reached the maximum number of connections on address %s", wire.ErrNotAllowed, ip)
	}
	if l.mu.perIP == nil {
		l.mu.perIP = make(map[string]int)
	}
	l.mu.conns++
	l.mu.perIP[ip]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.mu.conns--
		if l.mu.perIP[ip]--; l.mu.perIP[ip] == 0 {
			delete(l.mu.perIP, ip)
		}
	}, nil
}

// refuse answers a connection that admitConnection refused as Pulsar does,
// with an ERROR (request id -1) before any CONNECT, and closes it. The
// answer is written by a goroutine owned by the Server (a TLS connection
// must first finish its handshake), within refuseTimeout; Close cuts it
// short.
func (s *Server) refuse(nc net.Conn, why error) {
	n := s.limits.connectionsRefused.Add(1)
	l := &s.limits
	// One warning per refusalLogEvery, not one per connection: a flood
	// of connections must not become a flood of log lines.
	if now := s.clock.Now().UnixNano(); now-l.lastRefusalLog.Load() >= int64(refusalLogEvery) {
		l.lastRefusalLog.Store(now)
		s.log.Warn("refusing connections", "remote", nc.RemoteAddr().String(), "err", why, "refused_so_far", n)
	}
	l.mu.Lock()
	if l.mu.refusing == nil {
		l.mu.refusing = make(map[net.Conn]struct{})
	}
	if l.mu.closed || len(l.mu.refusing) >= maxRefusing {
		l.mu.Unlock()
		nc.Close()
		return
	}
	l.mu.refusing[nc] = struct{}{}
	s.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.mu.refusing, nc)
			l.mu.Unlock()
			nc.Close()
		}()
		code, msg := wire.ToWire(why)
		if err := nc.SetDeadline(time.Now().Add(refuseTimeout)); err != nil {
			return
		}
		w := wire.NewWriter(nc)
		err := w.WriteCommand(pb.BaseCommand_builder{Type: pb.BaseCommand_ERROR.Enum(), Error: pb.CommandError_builder{
			RequestId: ptr(^uint64(0)), Error: code.Enum(), Message: &msg,
		}.Build()}.Build())
		if err == nil {
			err = w.Flush()
		}
		// Half-close and read until the client closes: closing with its
		// CONNECT unread would reset the connection, and a reset can
		// discard the ERROR before the client reads it.
		if cw, ok := nc.(interface{ CloseWrite() error }); ok && err == nil && cw.CloseWrite() == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		}
	}()
}

// closeRefusing cuts short the refusals in progress (Server.Close).
func (s *Server) closeRefusing() {
	l := &s.limits
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	for nc := range l.mu.refusing {
		nc.Close()
	}
}

// LookupPermits bounds the lookups a broker answers at once, whichever
// way they come (Pulsar's pendingLookupRequests semaphore): the Service
// owns one, the Server and the HTTP lookups take from it.
type LookupPermits struct {
	max     int64
	held    atomic.Int64
	refused atomic.Int64
}

// NewLookupPermits returns max permits (at least 1).
func NewLookupPermits(max int) *LookupPermits { return &LookupPermits{max: int64(max)} }

// Acquire takes a permit, returning the function that gives it back, or
// TooManyRequests (Pulsar's answer and text) when none is left.
func (p *LookupPermits) Acquire() (release func(), err error) {
	if p.held.Add(1) > p.max {
		p.held.Add(-1)
		p.refused.Add(1)
		return nil, fmt.Errorf("%w: Failed due to too many pending lookup requests", wire.ErrTooManyRequests)
	}
	var once sync.Once
	return func() { once.Do(func() { p.held.Add(-1) }) }, nil
}

// Refused is how many lookups Acquire has turned away.
func (p *LookupPermits) Refused() int64 { return p.refused.Load() }

// connLimits is a connection's share of the bounds.
type connLimits struct {
	// requests holds one token per request goroutine running; its
	// capacity is MaxRequestsPerConnection.
	requests chan struct{}
	// requestDone wakes a reader paused for a request slot.
	requestDone chan struct{}
	// pending counts the SENDs whose receipt has not gone out yet: the sum
	// of the connection's producers' owed (see notePublish).
	pending publishCount
	// answered wakes a reader paused on pending.
	answered chan struct{}
}

// publishCount is a number of SENDs and of their message bytes.
type publishCount struct{ sends, bytes atomic.Int64 }

func (p *publishCount) add(sends, bytes int64) {
	p.sends.Add(sends)
	p.bytes.Add(bytes)
}

func newConnLimits(cfg Config) connLimits {
	return connLimits{
		requests:    make(chan struct{}, cfg.MaxRequestsPerConnection),
		requestDone: make(chan struct{}, 1),
		answered:    make(chan struct{}, 1),
	}
}

// wake signals a paused reader without ever blocking: one pending signal
// is enough, since the reader checks its condition again on each.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// acquireRequestSlot takes a request slot for a new request goroutine, on
// the reader. At MaxRequestsPerConnection it stops reading until a request
// ends; it reports false if the connection closes first.
func (c *conn) acquireRequestSlot() bool {
	try := func() bool {
		select {
		case c.limits.requests <- struct{}{}:
			return true
		default:
			return false
		}
	}
	if try() {
		return true
	}
	c.srv.limits.readPauses.Add(1)
	c.log.Debug("pausing reads: requests at their bound", "requests", cap(c.limits.requests))
	return c.pauseReading(c.limits.requestDone, try)
}

func (c *conn) releaseRequestSlot() {
	<-c.limits.requests
	wake(c.limits.requestDone)
}

// notePublish counts a SEND of p against the connection's pending
// publishes, on the reader, before the SEND is queued (so that its receipt
// never settles what was not yet counted).
//
// Each producer keeps what it owes (owed) besides the connection's total,
// so that the SENDs of a producer that ends unanswered (closed, or
// disconnected by the broker) leave the total with it: its receipt
// goroutine hands back what it owes when it exits (settleOwed), and a SEND
// counted after that is handed back here. A producer's receiptsDone is set
// before its last settleOwed, so one of the two always sees the other's
// count.
func (c *conn) notePublish(p *producer, bytes int) {
	p.owed.add(1, int64(bytes))
	c.limits.pending.add(1, int64(bytes))
	if p.receiptsDone.Load() {
		p.settleOwed()
	}
}

// awaitPublishRoom pauses the reader while the connection's pending
// publishes are at MaxPendingPublishes or MaxPendingPublishBytes, until
// half of them are answered, as Pulsar does (resuming at half, it does not
// pause again at the very next SEND). It reports false if the connection
// closes first.
func (c *conn) awaitPublishRoom() bool {
	maxSends, maxBytes := int64(c.srv.cfg.MaxPendingPublishes), c.srv.cfg.MaxPendingPublishBytes
	sends, bytes := c.limits.pending.sends.Load(), c.limits.pending.bytes.Load()
	if (maxSends == 0 || sends < maxSends) && (maxBytes == 0 || bytes < maxBytes) {
		return true
	}
	c.srv.limits.readPauses.Add(1)
	c.log.Debug("pausing reads: pending publishes at their bound", "sends", sends, "bytes", bytes)
	return c.pauseReading(c.limits.answered, func() bool {
		return (maxSends == 0 || c.limits.pending.sends.Load() <= maxSends/2) &&
			(maxBytes == 0 || c.limits.pending.bytes.Load() <= maxBytes/2)
	})
}

// pauseReading blocks the reader until ready holds, checking again at
// each signal on wakeup; it reports false if the connection closes first.
//
// While the reader is paused the peer's frames, its PONGs among them, wait
// unread, so its silence says nothing: the pause keeps the keep-alive's
// silence check from closing the connection (Pulsar's keep-alive likewise
// skips a connection whose reads are paused). What ends a pause is the
// broker's own work, whose bounds are their own.
func (c *conn) pauseReading(wakeup <-chan struct{}, ready func() bool) bool {
	tick := c.srv.clock.NewTicker(c.srv.cfg.KeepAliveInterval)
	defer tick.Stop()
	for !ready() {
		c.lastReceived.Store(c.srv.clock.Now().UnixNano())
		select {
		case <-wakeup:
		case <-tick.Chan():
		case <-c.ctx.Done():
			return false
		}
	}
	c.lastReceived.Store(c.srv.clock.Now().UnixNano())
	return true
}

// settle hands back sends (and their bytes) that p has answered, waking a
// reader paused on them.
func (p *producer) settle(sends, bytes int64) {
	p.owed.add(-sends, -bytes)
	p.c.limits.pending.add(-sends, -bytes)
	wake(p.c.limits.answered)
	wake(p.receipted)
}

// settleOwed hands back all that p owes: its receipt goroutine has ended,
// and what it has not answered it never will.
func (p *producer) settleOwed() {
	sends, bytes := p.owed.sends.Swap(0), p.owed.bytes.Swap(0)
	if sends != 0 || bytes != 0 {
		p.c.limits.pending.add(-sends, -bytes)
		wake(p.c.limits.answered)
	}
}

// loadSlots bounds the topic loads that run at once. A load past the bound
// queues for a slot: Go's channel gives blocked senders their turn in
// arrival order, as Pulsar's queue of pending loads does.
type loadSlots struct {
	slots  chan struct{} // one token per load running
	queued atomic.Int64  // loads that have had to wait, ever
}

func newLoadSlots(n int) loadSlots { return loadSlots{slots: make(chan struct{}, n)} }

// acquire waits for a slot to load t, within ctx (the load's timeout),
// returning the function that frees it.
func (l *loadSlots) acquire(ctx context.Context, t topology.TopicName) (release func(), err error) {
	release = func() { <-l.slots }
	select {
	case l.slots <- struct{}{}:
		return release, nil
	default:
	}
	l.queued.Add(1)
	select {
	case l.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: topic %s waited for one of the %d topic load slots (maxConcurrentTopicLoadRequest): %v",
			wire.ErrServiceNotReady, t, cap(l.slots), ctx.Err())
	}
}
