// Package broker is Meridian's Pulsar protocol server: it accepts client
// connections, speaks the binary protocol of cluster/wire, and (as it grows)
// serves topics stored in managed ledgers, owned one broker at a time through
// etcd leases.
//
// # Connections
//
// Each connection has three goroutines, all owned by the Server, which
// stops and waits for them:
//
//   - the reader owns the connection's state. It reads frames, answers the
//     handshake, PING and other cheap commands inline, and hands commands
//     that may wait on other services (a lookup that reads etcd) to a
//     goroutine of their own, tracked by the connection, so that a slow
//     lookup never stops the connection's other traffic;
//   - the writer owns the socket's write side. It takes replies from a
//     queue bounded by count and messages from a queue bounded by count
//     and bytes (msgQueue), and flushes them, each flush under a write
//     deadline (Config.WriteTimeout, at most the keep-alive interval): a
//     peer that does not take its bytes in time is disconnected;
//   - the keep-alive queues a PING every KeepAliveInterval and closes the
//     connection when nothing has arrived for two intervals (the peer is
//     dead or the network is cut). It never writes, so neither the ping
//     nor the silence check waits behind a blocked write.
//
// A peer that does not read its replies fills the reply queue; the broker
// then closes that connection rather than hold memory for it. Bad input
// (garbage, an oversized frame, a command before CONNECT, an unknown
// command) closes the one connection it arrived on and nothing else.
//
// # Slow and frozen consumers
//
// A dispatcher never waits for a consumer. A consumer whose connection's
// message queue is full is skipped, and the round goes on with the others;
// for Key_Shared its keys wait for it (they are never handed to another
// consumer, which would break their order). When its queue drains to half,
// the writer wakes the dispatcher. When the connection is closed (write
// deadline, silence, or the client leaving), the consumer's unacknowledged
// messages go back to the subscription for the others. A frozen consumer
// is thus found one WriteTimeout after a write to it stalls, and at most
// two keep-alive intervals after it stops (the silence check).
//
// # Bounded closes
//
// Closing a subscription, a topic, a connection and the broker each takes
// a context with a deadline and returns by it whatever the peers do:
// telling a client to go only queues a frame, and no dispatch round waits
// on a consumer. The bounds are Config.CloseTimeout (one connection),
// ServiceConfig.CloseTimeout (one topic unloaded, or a reader's
// subscription), and the context given to Service.Close (the broker).
//
// # Moving a bundle
//
// An unload, a shed or a drain hands a bundle to another broker without a
// failed send: the request is written into the bundle's ownership key, the
// owner fences the bundle's topics (SENDs dropped unanswered for the client
// to resend, the taken ones receipted, dispatch stopped), persists and
// closes them, moves the key to the new owner's lease in one CAS, and only
// then sends CLOSE_PRODUCER and CLOSE_CONSUMER with the new owner's URL.
// handoff.go says it step by step.
//
// # Lock order
//
// Locks are taken in this order, never against it:
//
//	Topic.mu → subscription.roundMu → subscription.mu → cursor → managed ledger → ledger writer
//
// with these rules:
//   - Topic.mu may be held while taking a subscription's mu (idle, stats)
//     and while asking the managed ledger a cheap question; never
//     roundMu.
//   - roundMu (a dispatch round, a seek) is held across storage reads and
//     while taking mu, never the other way round.
//   - subscription.mu is held only for bookkeeping. Under it the cursor may
//     be asked its positions (stats; a Key_Shared consumer's joining, whose
//     read position must not move meanwhile), and frames may be queued on a
//     connection (which never waits); it is never held across a storage
//     read or a wait. A method that must be called with it held ends in
//     Locked.
//   - dedup.mu → cursor: a deduplication snapshot writes cursor properties.
//   - Leaves, under which nothing else is taken: Service.mu, Server.mu,
//     ownership.mu, ownership.probes.mu, ownership.rand, Service.handoffs,
//     a topic's sendGate.mu, conn.mu and a connection's msgQueue.mu (the
//     writer takes conn.mu only to find the subscriptions to wake, and
//     wakes them after releasing it).
//   - ownership.place (a one-slot semaphore) is held across one
//     placement's store calls, and taken with no lock held.
//
// The managed ledger's own order (cursor → managed ledger → ledger writer)
// is cluster/mledger's.
package broker
