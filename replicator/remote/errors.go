package remote

import "errors"

// Sentinel errors; every error of this package wraps one of them (and, for
// an answer from the remote broker, also the wire sentinel of its
// ServerError code, e.g. wire.ErrAuthentication). Classify with errors.Is.
var (
	// ErrInvalidConfig: a Config that cannot work (no source region, no
	// topic, no broker URL for the chosen transport, an unsupported
	// authentication plugin or unreadable TLS trust file).
	ErrInvalidConfig = errors.New("remote: invalid config")
	// ErrBadEntry: Send was given bytes that are not a stored entry (bad
	// framing, no BrokerEntryMetadata index, or a failed checksum). The
	// entry must not be skipped silently: it is a storage fault.
	ErrBadEntry = errors.New("remote: bad entry")
	// ErrAlreadyReplicated: the entry arrived by replication
	// (replicated_from is set) and is never sent on, so that replication
	// cannot loop.
	ErrAlreadyReplicated = errors.New("remote: entry was replicated from another region")
	// ErrConnect: the remote region could not be reached, or refused the
	// handshake, the lookup or the producer. Retry with backoff unless the
	// wrapped wire error is final (authentication, authorization,
	// TopicNotFound, TopicTerminated, ProducerFenced).
	ErrConnect = errors.New("remote: cannot open the producer")
	// ErrDisconnected: the connection ended or went silent past the
	// keep-alive timeout.
	ErrDisconnected = errors.New("remote: connection lost")
	// ErrSendFailed: the remote broker answered SEND_ERROR.
	ErrSendFailed = errors.New("remote: send failed")
	// ErrProducerClosedByBroker: the remote broker sent CLOSE_PRODUCER
	// (the topic is unloaded or moves to another broker).
	ErrProducerClosedByBroker = errors.New("remote: producer closed by the remote broker")
	// ErrProtocol: the remote broker broke the protocol (a receipt out of
	// order, a reply without its required fields, too many redirects).
	ErrProtocol = errors.New("remote: protocol violation")
	// ErrSchema: a source schema could not be registered on the remote
	// topic (refused as incompatible there, for one), or an entry carries
	// a schema version the Producer did not register when it opened (a
	// schema added since): open a new Producer, which registers it.
	ErrSchema = errors.New("remote: schema not replicated")
	// ErrClosed: the Producer was closed by its owner.
	ErrClosed = errors.New("remote: producer closed")
)
