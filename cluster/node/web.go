package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// HTTPConfig bounds one of the node's HTTP servers: the broker's web server
// (admin API, HTTP lookups, /metrics) and a region's metrics listener.
// Without these a client holds a file descriptor and a goroutine for as
// long as it likes: by never finishing its header or its body, by keeping
// an idle connection open, or by never reading the answer. Each bound
// closes the connection once passed; MaxConnections makes new connections
// wait in the listen backlog instead of being accepted.
type HTTPConfig struct {
	// ReadHeaderTimeout bounds reading a request's header, from the
	// request's first byte. Default 10s; at least 100ms.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, header and body: a body
	// (a schema, a policy: at most admin.Config.MaxBodyBytes) that
	// trickles in slower is cut. Default 60s; at least ReadHeaderTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its header to the end
	// of its answer, so that a client that does not read cannot hold its
	// connection: above the admin API's RequestTimeout (30s) and a 30s CPU
	// profile (--enable-pprof). Default 2m; at least 1s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection may wait for its
	// next request. Default 60s; at least 100ms.
	IdleTimeout time.Duration
	// MaxConnections bounds the server's open connections (Pulsar's
	// maxHttpServerConnections, 2048): past it a new connection waits in
	// the listen backlog until one closes. 0 is no bound.
	MaxConnections int
}

// DefaultHTTPConfig returns the defaults documented on HTTPConfig.
func DefaultHTTPConfig() HTTPConfig {
	return HTTPConfig{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       60 * time.Second,
		MaxConnections:    2048,
	}
}

// Validate checks every field against its bounds.
func (c HTTPConfig) Validate() error {
	switch {
	case c.ReadHeaderTimeout < 100*time.Millisecond:
		return fmt.Errorf("node: HTTPConfig.ReadHeaderTimeout %v, want at least 100ms", c.ReadHeaderTimeout)
	case c.ReadTimeout < c.ReadHeaderTimeout:
		return fmt.Errorf("node: HTTPConfig.ReadTimeout %v, want at least ReadHeaderTimeout (%v)", c.ReadTimeout, c.ReadHeaderTimeout)
	case c.WriteTimeout < time.Second:
		return fmt.Errorf("node: HTTPConfig.WriteTimeout %v, want at least 1s", c.WriteTimeout)
	case c.IdleTimeout < 100*time.Millisecond:
		return fmt.Errorf("node: HTTPConfig.IdleTimeout %v, want at least 100ms", c.IdleTimeout)
	case c.MaxConnections < 0:
		return fmt.Errorf("node: HTTPConfig.MaxConnections %d, want 0 (no bound) or more", c.MaxConnections)
	}
	return nil
}

// orDefault is c, or the defaults for a zero HTTPConfig (a RegionConfig
// written as a literal).
func (c HTTPConfig) orDefault() HTTPConfig {
	if c == (HTTPConfig{}) {
		return DefaultHTTPConfig()
	}
	return c
}

// server is an http.Server of h within c's timeouts.
func (c HTTPConfig) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
	}
}

// listener bounds ln's open connections to MaxConnections.
func (c HTTPConfig) listener(ln net.Listener) net.Listener {
	if c.MaxConnections == 0 {
		return ln
	}
	return netutil.LimitListener(ln, c.MaxConnections)
}

// tlsListener serves TLS with cfg over ln, its open connections bounded
// as listener bounds them. The bound sits beneath TLS, never around it:
// http.Server gives a handler the connection's TLS state (Request.TLS, and
// with it the client certificate that the "tls" provider takes the role
// from) only when the accepted connection is itself a *tls.Conn, and a
// bounding wrapper around one hides it, so every certificate-authenticated
// request would be anonymous.
func (c HTTPConfig) tlsListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return tls.NewListener(c.listener(ln), cfg)
}
