package e2e

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Shape is what a Link does to the bytes it carries. It applies to each
// direction separately, and can be changed while the link runs (SetShape):
// bytes read after the change get the new shape.
type Shape struct {
	// Latency is the one-way delay added to every byte; a round trip
	// through the link takes at least twice this. Zero adds none.
	Latency time.Duration
	// Jitter adds a further delay drawn uniformly from [0, Jitter) to each
	// read. Bytes are never reordered (TCP cannot be): a read that would
	// overtake the one before waits for it.
	Jitter time.Duration
	// BytesPerSecond caps each direction of the link, shared by all its
	// connections, like the capacity of one line. Zero is no cap.
	BytesPerSecond int64
	// Loss is the fraction of reads, in [0, 1), that the line drops. A
	// proxy cannot drop bytes from a TCP stream, so it does what TCP does
	// with a lost segment: delivers it one retransmission timeout late
	// (retransmitAfter), and the bytes behind it wait, in order.
	Loss float64
}

// retransmitAfter is how much later a lost read arrives on a line with
// the given one-way latency: a round trip plus Linux's minimum
// retransmission timeout (TCP_RTO_MIN, 200ms), the time TCP takes to
// notice a loss and resend.
func retransmitAfter(latency time.Duration) time.Duration {
	return 2*latency + 200*time.Millisecond
}

// Validate reports a negative field or a loss outside [0, 1).
func (s Shape) Validate() error {
	if s.Latency < 0 || s.Jitter < 0 || s.BytesPerSecond < 0 {
		return fmt.Errorf("%w: Shape fields must not be negative, got %+v", ErrBadConfig, s)
	}
	if s.Loss < 0 || s.Loss >= 1 {
		return fmt.Errorf("%w: Shape.Loss must be in [0, 1), got %v", ErrBadConfig, s.Loss)
	}
	return nil
}

// LinkConfig describes one Link.
type LinkConfig struct {
	// Name says which link this is in errors (e.g. "r1->r2/broker-0").
	Name string
	// Listen is the address the link accepts connections on; port 0 picks
	// a free one (Addr tells which).
	Listen string
	// Upstream is the address each accepted connection is forwarded to.
	Upstream string
	// DialTimeout bounds the dial to Upstream; a connection whose dial
	// fails is closed. Default 5s; at least 10ms.
	DialTimeout time.Duration
	// Shape is the link's shape at start.
	Shape Shape
	// Seed seeds the jitter's random source, so that a run can be repeated.
	Seed uint64
	// Local, if set, is asked about each accepted connection's peer (the
	// client's socket) and self (the link's end of it): a connection it
	// calls local is not on the path the link stands for
	// (a region's own clients, on the region's network, reaching a
	// broker whose link is the way in from the other regions). Such a
	// connection is forwarded as it is: no shape, no byte count, and Cut
	// and Partition leave it alone; only Close ends it.
	Local func(peer, self net.Addr) bool
	// Source, if set, is asked once about each accepted connection that
	// is not local (its peer and self, as Local): it names where the connection comes from (the
	// bed names the region of the process holding the peer's socket), so
	// that CutFrom cuts the connections of one source only.
	Source func(peer, self net.Addr) string
}

// DefaultLinkConfig returns a link from listen to upstream that adds
// nothing: no latency, no jitter, no cap.
func DefaultLinkConfig(name, listen, upstream string) LinkConfig {
	return LinkConfig{Name: name, Listen: listen, Upstream: upstream, DialTimeout: 5 * time.Second}
}

// Validate reports a missing address or a field out of bounds.
func (c LinkConfig) Validate() error {
	switch {
	case c.Listen == "" || c.Upstream == "":
		return fmt.Errorf("%w: link %q needs both Listen and Upstream addresses", ErrBadConfig, c.Name)
	case c.DialTimeout < 10*time.Millisecond:
		return fmt.Errorf("%w: link %q: DialTimeout must be at least 10ms, got %v", ErrBadConfig, c.Name, c.DialTimeout)
	}
	return c.Shape.Validate()
}

// Bytes are the bytes a link delivered, per direction: Up from the
// connecting side to Upstream, Down back.
type Bytes struct{ Up, Down int64 }

// Link is a TCP proxy standing for one network path: every connection
// accepted on its address is forwarded to its upstream, with the link's
// Shape applied, and counted. Cut breaks every connection and refuses new
// ones (they are accepted and closed at once) until Restore; Partition
// holds every byte, closing nothing, until Heal.
//
// Goroutines: one accepts; each connection has one per direction reading
// and one per direction writing. Close stops and waits for all of them.
// Between a direction's reader and writer is a queue of at most
// queuedReads reads, so a slow (capped or delayed) link pushes back on
// its sender through TCP instead of buffering without bound.
type Link struct {
	cfg  LinkConfig
	addr string // the listening address, kept across Unlisten and Listen
	wg   sync.WaitGroup
	up   direction
	down direction

	mu struct {
		sync.Mutex
		shape Shape
		cut   bool
		// cutFrom holds the sources CutFrom cut, until RestoreFrom.
		cutFrom map[string]bool
		// healed is nil unless the link is partitioned; Heal closes it.
		healed chan struct{}
		// healedFrom holds, for each source PartitionFrom partitioned,
		// the channel HealFrom closes.
		healedFrom map[string]chan struct{}
		rng        *rand.Rand
		conns      map[*linkConn]struct{}
		local      map[*linkConn]struct{} // see LinkConfig.Local
		closed     bool
		// ln is the listening socket; nil between Unlisten and Listen.
		ln net.Listener
	}
}

// direction is one way through the link.
type direction struct {
	bytes atomic.Int64
	// next is when the line is free again under the bandwidth cap;
	// guarded by Link.mu.
	next time.Time
}

const (
	queuedReads = 64
	readSize    = 32 << 10
)

// StartLink listens on cfg.Listen and forwards from there.
func StartLink(cfg LinkConfig) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("e2e: link %s: %w", cfg.Name, err)
	}
	l := &Link{cfg: cfg, addr: ln.Addr().String()}
	l.mu.ln = ln
	l.mu.shape = cfg.Shape
	l.mu.rng = rand.New(rand.NewPCG(cfg.Seed, 0x6c696e6b))
	l.mu.conns = map[*linkConn]struct{}{}
	l.mu.local = map[*linkConn]struct{}{}
	l.mu.cutFrom = map[string]bool{}
	l.mu.healedFrom = map[string]chan struct{}{}
	l.wg.Add(1)
	go l.accept(ln)
	return l, nil
}

// Name is the link's name.
func (l *Link) Name() string { return l.cfg.Name }

// Addr is the address the link accepts connections on.
func (l *Link) Addr() string { return l.addr }

// Upstream is the address the link forwards to.
func (l *Link) Upstream() string { return l.cfg.Upstream }

// Bytes returns the bytes delivered so far, per direction.
func (l *Link) Bytes() Bytes { return Bytes{Up: l.up.bytes.Load(), Down: l.down.bytes.Load()} }

// Shape returns the link's current shape.
func (l *Link) Shape() Shape {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.shape
}

// SetShape changes the link's shape; it applies to bytes read from now on.
func (l *Link) SetShape(s Shape) error {
	if err := s.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrLinkClosed
	}
	l.mu.shape = s
	return nil
}

// Cut breaks every connection through the link (both ends see them close)
// and refuses new ones until Restore.
func (l *Link) Cut() {
	l.mu.Lock()
	l.mu.cut = true
	l.mu.Unlock()
	l.teardownWhere(func(*linkConn) bool { return true })
}

// CutFrom is Cut for the connections whose LinkConfig.Source is source:
// they are broken, and new ones refused until RestoreFrom(source). The
// others go on.
func (l *Link) CutFrom(source string) {
	l.mu.Lock()
	l.mu.cutFrom[source] = true
	l.mu.Unlock()
	l.teardownWhere(func(c *linkConn) bool { return c.source == source })
}

// RestoreFrom lets the connections of source through again after CutFrom.
func (l *Link) RestoreFrom(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.cutFrom, source)
}

// teardownWhere breaks the link's (non-local) connections that match.
func (l *Link) teardownWhere(match func(*linkConn) bool) {
	l.mu.Lock()
	var conns []*linkConn
	for c := range l.mu.conns {
		if match(c) {
			conns = append(conns, c)
		}
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.teardown()
	}
}

// Partition holds every byte in the link, both ways, without closing any
// connection, like a network that drops every packet: the ends notice
// only by their own timeouts and keepalives. New connections are accepted
// and dialled, but carry nothing. Heal delivers what was held (as TCP
// would retransmit it), within the queue's bound; beyond it the senders
// are held back.
func (l *Link) Partition() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.healed == nil {
		l.mu.healed = make(chan struct{})
	}
}

// Heal ends a Partition.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.healed != nil {
		close(l.mu.healed)
		l.mu.healed = nil
	}
}

// PartitionFrom is Partition for the connections whose LinkConfig.Source
// is source, until HealFrom(source). The others go on.
func (l *Link) PartitionFrom(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.healedFrom[source] == nil {
		l.mu.healedFrom[source] = make(chan struct{})
	}
}

// HealFrom ends PartitionFrom(source).
func (l *Link) HealFrom(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if healed := l.mu.healedFrom[source]; healed != nil {
		close(healed)
		delete(l.mu.healedFrom, source)
	}
}

// partitioned returns the channel whose close ends the partition c is
// held by (Heal's, or HealFrom's of c's source), or nil if c is not held.
func (l *Link) partitioned(c *linkConn) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.healed != nil {
		return l.mu.healed
	}
	return l.mu.healedFrom[c.source]
}

// Restore lets connections through again after Cut.
func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.cut = false
}

// IsCut reports whether the link is cut.
func (l *Link) IsCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.cut
}

// Close stops accepting, breaks every connection and waits for the
// link's goroutines.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	local := make([]*linkConn, 0, len(l.mu.local))
	for c := range l.mu.local {
		local = append(local, c)
	}
	ln := l.mu.ln
	l.mu.ln = nil
	l.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	l.Cut()
	for _, c := range local {
		c.teardown()
	}
	l.wg.Wait()
	return err
}

// Unlisten closes the link's listening socket and keeps its
// connections: connecting to Addr is then refused by the kernel, as on a
// host port nothing listens on, until Listen. A link stands for a network
// path, and the path to a process that has exited ends in a refusal, not
// in a connection accepted and closed at once (what the link does while
// its upstream refuses): the bed unlistens a broker's links while its
// process is down, so that whoever connects to its advertised address (a
// client, or another broker asking whether the owner is alive) sees what
// it would see on a real network.
func (l *Link) Unlisten() {
	l.mu.Lock()
	ln := l.mu.ln
	l.mu.ln = nil
	l.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// Listen listens on Addr again after Unlisten; on a link that listens it
// does nothing.
func (l *Link) Listen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.mu.closed:
		return ErrLinkClosed
	case l.mu.ln != nil:
		return nil
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("e2e: link %s: listen again on %s: %w", l.cfg.Name, l.addr, err)
	}
	l.mu.ln = ln
	// Close sets closed under mu before it waits, so this Add never
	// races its Wait.
	l.wg.Add(1)
	go l.accept(ln)
	return nil
}

// accept serves one listening socket until it is closed.
func (l *Link) accept(ln net.Listener) {
	defer l.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			// The listener fails only once it is closed (Close,
			// Unlisten); a transient accept error would end the link
			// early, and the test using it would fail on the refused
			// connections.
			return
		}
		c := &linkConn{client: client, done: make(chan struct{})}
		c.local = l.cfg.Local != nil && l.cfg.Local(client.RemoteAddr(), client.LocalAddr())
		if !c.local && l.cfg.Source != nil {
			c.source = l.cfg.Source(client.RemoteAddr(), client.LocalAddr())
		}
		l.mu.Lock()
		conns := l.mu.conns
		if c.local {
			conns = l.mu.local
		}
		refuse := l.mu.closed || (!c.local && (l.mu.cut || l.mu.cutFrom[c.source]))
		if !refuse {
			conns[c] = struct{}{}
			l.wg.Add(1)
		}
		l.mu.Unlock()
		if refuse {
			client.Close()
			continue
		}
		go l.serve(c)
	}
}

// linkConn is one connection through the link: the accepted client side
// and the dialled server side.
type linkConn struct {
	client, server net.Conn
	local          bool   // see LinkConfig.Local
	source         string // see LinkConfig.Source; "" when local or unnamed
	done           chan struct{}
	once           sync.Once
	mu             sync.Mutex // guards server while it is dialled
}

// teardown closes both sides; every goroutine of the connection then ends.
func (c *linkConn) teardown() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		if c.server != nil {
			c.server.Close()
		}
		c.mu.Unlock()
	})
}

func (l *Link) serve(c *linkConn) {
	defer l.wg.Done()
	defer func() {
		c.teardown()
		l.mu.Lock()
		delete(l.mu.conns, c)
		delete(l.mu.local, c)
		l.mu.Unlock()
	}()
	server, err := net.DialTimeout("tcp", l.cfg.Upstream, l.cfg.DialTimeout)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.server = server
	c.mu.Unlock()
	select {
	case <-c.done: // cut while dialling
		server.Close()
		return
	default:
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pipe(c, c.client, server, &l.up) }()
	go func() { defer wg.Done(); l.pipe(c, server, c.client, &l.down) }()
	wg.Wait()
}

// chunk is one read, due at the far side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe moves src's bytes to dst in the link's shape until src ends (then
// it half-closes dst) or the connection is torn down.
func (l *Link) pipe(c *linkConn, src, dst net.Conn, dir *direction) {
	queue := make(chan chunk, queuedReads)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		var last time.Time
		for {
			buf := make([]byte, readSize)
			n, err := src.Read(buf)
			if n > 0 {
				if !c.local {
					last = l.due(dir, n, last)
				}
				select {
				case queue <- chunk{data: buf[:n], due: last}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					c.teardown()
				}
				return
			}
		}
	}()
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for ch := range queue {
		for healed := l.partitioned(c); healed != nil && !c.local; healed = l.partitioned(c) {
			select {
			case <-healed:
			case <-c.done:
				return
			}
		}
		if wait := time.Until(ch.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-c.done:
				return
			}
		}
		n, err := dst.Write(ch.data)
		if !c.local {
			dir.bytes.Add(int64(n))
		}
		if err != nil {
			c.teardown()
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		// Pass the end of src on; the other direction may go on.
		_ = tc.CloseWrite()
	}
}

// due returns when n bytes read now are delivered: after the line has
// carried them at the capped rate (queued behind earlier bytes of any
// connection), plus the latency, a jitter and, for a lost read, its
// retransmission, and never before the read before them (last).
func (l *Link) due(dir *direction, n int, last time.Time) time.Time {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.shape
	sent := now
	if s.BytesPerSecond > 0 {
		start := now
		if dir.next.After(start) {
			start = dir.next
		}
		sent = start.Add(time.Duration(float64(n) / float64(s.BytesPerSecond) * float64(time.Second)))
		dir.next = sent
	}
	delay := s.Latency
	if s.Jitter > 0 {
		delay += time.Duration(l.mu.rng.Int64N(int64(s.Jitter)))
	}
	if s.Loss > 0 && l.mu.rng.Float64() < s.Loss {
		delay += retransmitAfter(s.Latency)
	}
	due := sent.Add(delay)
	if due.Before(last) {
		due = last
	}
	return due
}
