// Package linger closes a TCP connection without losing its last frames.
//
// A socket closed with bytes unread in its receive buffer sends a reset,
// and a reset makes the peer's kernel discard what it has not yet delivered
// to the peer: the last answers a server wrote before it closed, often the
// error that says why it closed. So a server that ends a connection while
// its peer may still be sending (pipelined requests) ends it in two steps:
// it half-closes its sending side after its last frame (CloseWrite), then
// discards what the peer still sends until the peer closes its side, having
// read the end, or a timeout passes (Drain). This is the "lingering close"
// of HTTP servers.
//
// Both steps bound socket I/O, so they run on the wall clock, as the
// socket's deadlines do, not on a process's injected clock.
package linger

import (
	"io"
	"net"
	"time"
)

// Timeout bounds how long Drain waits for a peer to close its side once
// the server has ended its own.
const Timeout = 2 * time.Second

// CloseWrite ends nc's sending side (a FIN after the last frame; for TLS,
// close_notify first), reporting whether it could. A connection that cannot
// half-close is to be closed outright.
func CloseWrite(nc net.Conn) bool {
	cw, ok := nc.(interface{ CloseWrite() error })
	return ok && cw.CloseWrite() == nil
}

// Drain discards what the peer sends on nc until it closes its side, or
// Timeout passes. It does not close nc.
func Drain(nc net.Conn) {
	if err := nc.SetReadDeadline(time.Now().Add(Timeout)); err == nil {
		_, _ = io.Copy(io.Discard, nc)
	}
}
