// Package bkproto is the bookie RPC protocol: the frame codec, the request
// and response messages, the status codes and their sentinel errors, the
// entry checksum, the bookie registration value, and a pipelined client
// connection (Conn) that the ledger client uses.
//
// The protocol is a stream of length-prefixed frames over TCP (see
// AppendFrame for the layout). Many requests may be in flight on one
// connection; each carries a request id that its response echoes, and the
// bookie answers in whatever order its work completes: a fast read overtakes
// an add waiting for its journal fsync, and a LAC long-poll does not hold up
// anything behind it.
//
// # Who may write
//
// Two checks, as in BookKeeper. Every add, fence (FenceRequest, fencing
// read) and LAC write carries the ledger's master key, which the ledger
// client derives from the password in the ledger's metadata: the bookie
// binds the key of the first such request to the ledger and refuses every
// later one that carries another key, or none, with ErrUnauthorized; the
// recovery flag grants nothing without the key. A client that reaches the
// port but cannot read the ledger's metadata thus cannot overwrite, fence
// or advance a ledger. And a bookie may require its clients to
// authenticate: mutual TLS (ConnConfig.TLS), and/or a token shared by the
// region's clients, sent in an AuthRequest as the connection's first frame
// (ConnConfig.Token); until it is accepted nothing reaches the add, read
// or fence paths.
//
// Every decoding failure is an error, never a panic: a peer that sends an
// oversized or malformed frame gets its connection closed.
//
// frame.go holds the framing, messages.go the requests, the responses and
// the entry checksum, errors.go the status codes, and conn.go the client
// connection. registration.go is the bookie's registration value and the
// keys of the region's bookies and ledgers, which the bookie and the ledger
// client both use.
//
// The package imports nothing else of Meridian's, so the ledger client can use
// it without the bookie server.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package bkproto
