// Package broker is Meridian's Pulsar protocol server: it accepts client
// connections, speaks the binary protocol of cluster/wire, and (as it grows)
// serves topics stored in managed ledgers, owned one broker at a time through
// etcd leases.
//
// # Connections
//
// Each connection has two goroutines, both owned by the Server, which stops
// and waits for them:
//
//   - the reader owns the connection's state. It reads frames, answers the
//     handshake, PING and other cheap commands inline, and hands commands
//     that may wait on other services (a lookup that reads etcd) to a
//     goroutine of their own, tracked by the connection, so that a slow
//     lookup never stops the connection's other traffic;
//   - the writer owns the socket's write side. It takes frames from a queue
//     bounded by count, writes all that are queued, then flushes once, and
//     runs the keep-alive: a PING every KeepAliveInterval, and the
//     connection closed when nothing has arrived for two intervals (the
//     peer is dead or the network is cut).
//
// A peer that does not read its replies fills the queue; the broker then
// closes that connection rather than hold memory for it. Bad input (garbage,
// an oversized frame, a command before CONNECT, an unknown command) closes
// the one connection it arrived on and nothing else.
package broker
