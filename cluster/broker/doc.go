// Package broker is Meridian's Pulsar protocol server: it accepts client
// connections, speaks the binary protocol of cluster/wire, and serves
// topics stored in managed ledgers (cluster/mledger), each owned by one
// broker of the region at a time. Which broker owns what is the load
// manager's business (the loadmgr subpackage); this package asks it before
// it loads a topic, and lets go of topics when it says so.
//
// # The map
//
// Server and connections:
//
//	server.go      the listener: accepts connections, within the Server's limits
//	conn.go        one client connection: its reader, the handshake, command routing
//	writer.go      a connection's writer and keep-alive
//	msgqueue.go    a connection's bounded queue of messages to consumers
//	limits.go      the bounds on connections, requests, publishes, loads, lookups
//	config.go      Config: the protocol server's settings
//	topics.go      Topics: what the Server needs of the topic service
//
// Topics and producers:
//
//	service.go     Service: lookups, loading and unloading topics; ServiceConfig
//	topic.go       Topic: a loaded topic, its producers, subscriptions and SEND gate
//	producer.go    one producer: SENDs, receipts, access modes
//	dedup.go       message deduplication (with the design it rejected)
//	replication.go the replication cursors a topic keeps for its remote regions
//	replsubs.go    replicated subscriptions: their states to and from the other regions
//	quota.go       backlog quotas
//	expiry.go      message expiry: subscriptions consume what outlived the TTL
//	schemas.go     the schema commands, over the schema subpackage
//	trace.go       spans of publish and delivery for traced messages
//
// Dispatch:
//
//	subscription.go a subscription's dispatcher goroutine: requests, rounds, seek
//	dispatch.go     the delivery state the dispatcher owns (a state machine)
//	dispatchrate.go dispatch rates: the topic's and each subscription's token buckets
//	consumer.go     one consumer, and the consumer-side commands
//	keyshared.go    Key_Shared's hash ranges
//	entry.go        an entry on its way to a consumer
//
// Operations and observability:
//
//	operations.go  what the admin API does to topics and subscriptions
//	metrics.go     the broker's meridian_* metrics and Pulsar-named topic figures
//	collector.go   the Prometheus collector of the Pulsar series
//	replstats.go   replication figures in topic stats
//	handoff.go     the broker's side of the load manager (loadmgr.Topics)
//
// Subpackages: loadmgr (ownership, placement, load reports, shedding, split,
// hand-offs), auth (credentials and authorization), schema (the schema
// registry), replsub (what a replicated subscription's state is and the
// rules by which states meet, with no I/O), brokertest (a broker on
// in-memory bookies, for tests).
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
// loadmgr/handoff.go says it step by step, and handoff.go does the
// broker's steps.
//
// # Lock order
//
// The broker's locks are in the process's lock order, docs/lock-order.md,
// with the rules for holding them.
package broker
