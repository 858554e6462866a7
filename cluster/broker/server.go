package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/jonboulle/clockwork"
)

// Server serves the Pulsar protocol on listeners. It owns every connection
// and every goroutine it starts; Close stops them and waits.
type Server struct {
	cfg    Config
	topics Topics
	log    *slog.Logger
	clock  clockwork.Clock // Config.Clock
	limits serverLimits    // connections and lookups (limits.go)

	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
	}
}

// NewServer returns a Server answering with cfg and topics.
func NewServer(cfg Config, topics Topics, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, topics: topics, log: log, clock: cfg.Clock}
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	return s, nil
}

// Serve accepts connections on ln until Close, then returns ErrServerClosed.
// It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			delete(s.mu.listeners, ln)
			s.mu.Unlock()
			ln.Close()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("broker: accept on %s: %w", ln.Addr(), err)
		}
		s.start(nc)
	}
}

// start registers and runs a connection, unless the server is closing or
// the connection is past MaxConnections or MaxConnectionsPerIP.
func (s *Server) start(nc net.Conn) {
	release, err := s.admitConnection(nc.RemoteAddr())
	if err != nil {
		s.refuse(nc, err)
		return
	}
	c := newConn(s, nc)
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		nc.Close()
		release()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.run()
		release() // first: once Connections drops, a new one is admitted
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
	}()
}

// Connections returns the number of open connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// Close stops accepting, ends every connection and waits, until ctx ends,
// for every goroutine the server started. A connection ends as shutdown
// ends it: what is queued for its client is written first (the receipts
// and CLOSE frames a drain queued before), and it closes once the client
// has closed its side, or linger.Timeout after. What may outlast that is a
// request still in a call of Topics that does not heed the connection's
// context. If ctx ends first, the connections still open are cut off and
// Close returns ErrCloseIncomplete with how many are still winding down;
// they finish on their own, and a later Close waits for them again.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.closeRefusing()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.mu.conns {
		c.close()
	}
	s.mu.Unlock()
	return fmt.Errorf("%w: %d connections still closing: %w", ErrCloseIncomplete, s.Connections(), ctx.Err())
}
