package broker

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// Config configures a broker's protocol server.
type Config struct {
	// ServiceURL is the pulsar:// URL clients are sent to for the topics this
	// broker owns: its advertised address, not the listen address.
	ServiceURL string
	// ServiceURLTLS is the pulsar+ssl:// URL, if TLS is served.
	ServiceURLTLS string
	// ProxyThroughServiceURL answers every lookup of a topic this broker
	// owns with Pulsar's proxyThroughServiceUrl, so that the client reaches
	// it through the service URL it was given rather than the advertised
	// address. For a region of one broker behind a port mapping (a
	// container, whose clients reach it on a host port the broker cannot
	// know); with several brokers the client would land on whichever the
	// service URL reaches. Default false.
	ProxyThroughServiceURL bool
	// KeepAliveInterval is how often the broker pings an idle client; a
	// connection on which nothing arrives for two intervals is closed.
	// Shorter detects dead peers sooner at the cost of more pings. Pulsar's
	// default is 30s; at least 100ms.
	KeepAliveInterval time.Duration
	// ConnectTimeout bounds how long a new connection may take to send
	// CONNECT. Default 10s; at least 100ms.
	ConnectTimeout time.Duration
	// MaxMessageSize is announced in CONNECTED; clients refuse to send
	// larger messages. Pulsar's default is 5 MiB; at most 100 MiB.
	MaxMessageSize int
	// WriteQueue and WriteQueueBytes bound the replies and other commands
	// waiting to be written to one connection, by count and by their
	// encoded bytes (a TOPIC_LIST or GET_SCHEMA reply can be large). A
	// client that does not read fills it and is disconnected. An empty
	// queue always takes one command, whatever its size. Defaults 1024 and
	// 8 MiB; at least 16 and 64 KiB.
	WriteQueue      int
	WriteQueueBytes int
	// WriteTimeout bounds each flush to a connection: a peer that does not
	// take its bytes within it is disconnected, and its consumers'
	// unacknowledged messages go back to their subscriptions for the other
	// consumers. Zero means KeepAliveInterval; at least 100ms and at most
	// KeepAliveInterval, so that a stuck peer is found no later than the
	// keep-alive would find a silent one.
	WriteTimeout time.Duration
	// MessageQueue and MessageQueueBytes bound the MESSAGE frames waiting
	// to be written to one connection, by count and by the bytes of their
	// messages. A consumer whose connection's queue is full is skipped by
	// its dispatcher until the queue drains to half, so memory per
	// connection stays bounded and no other consumer waits for it. An
	// empty queue always takes one message, however large. Defaults 1000
	// and 8 MiB; at least 1 and 1 KiB.
	MessageQueue      int
	MessageQueueBytes int
	// CloseTimeout bounds closing one connection: detaching its producers
	// and consumers, and closing a reader's subscription that ends with
	// it. Default 10s; at least 100ms.
	CloseTimeout time.Duration
	// ServerVersion is announced in CONNECTED.
	ServerVersion string
	// OperationTimeout bounds how long a PRODUCER or SUBSCRIBE reply is
	// held while its topic loads: pulsar-client-go's default operation
	// timeout, 30s, so the client gets an answer rather than a timeout.
	// At least 1s.
	OperationTimeout time.Duration
	// Auth authenticates clients at CONNECT; nil accepts everyone with an
	// empty role (Pulsar's authenticationEnabled=false).
	Auth *auth.Authenticator
	// AuthRefreshInterval is how often a connection's expiring credentials
	// (a token's exp) are checked; once they have expired the client is
	// asked for fresh ones, and a connection that has not sent them by the
	// next check is closed (Pulsar's authenticationRefreshCheckSeconds,
	// default 60s; see reauth.go). 0 never checks.
	AuthRefreshInterval time.Duration
	// Authz authorizes lookups, producers and consumers by role; nil
	// allows everything (Pulsar's authorizationEnabled=false).
	Authz *auth.Authorizer

	// MaxConnections bounds the broker's open connections (Pulsar's
	// brokerMaxConnections); 0 is no bound. A connection past it is
	// answered an ERROR (NotAllowedError, "Reached the maximum number of
	// connections") before CONNECT, and closed, as on Pulsar. Pulsar's
	// default is no bound; Meridian's is 10000, so that a flood of sockets
	// cannot exhaust the broker's memory or file descriptors by default.
	MaxConnections int
	// MaxConnectionsPerIP bounds the open connections from one remote IP
	// address (Pulsar's brokerMaxConnectionsPerIp), refused the same way;
	// 0 is no bound. Default 2000: one address cannot take every slot, and
	// many clients behind one NAT address still fit.
	MaxConnectionsPerIP int
	// MaxPendingPublishes bounds the SENDs of one connection whose receipt
	// has not gone out yet (Pulsar's maxPendingPublishRequestsPerConnection,
	// 1000; 0 is no bound, as on Pulsar). At the bound the broker stops
	// reading the connection, so the client's sends wait in its own queue
	// rather than fail; it reads again once half of them are answered.
	MaxPendingPublishes int
	// MaxPendingPublishBytes bounds the message bytes of those SENDs in
	// the same way: reading pauses once they reach it (so a connection
	// holds at most this plus one message) and resumes below half. It
	// keeps a connection of large messages from holding MaxPendingPublishes
	// times MaxMessageSize. Pulsar bounds these bytes per broker instead
	// (maxMessagePublishBufferSizeInMB). Default 64 MiB; 0 is no bound.
	MaxPendingPublishBytes int64
	// MaxRequestsPerConnection bounds the requests of one connection that
	// wait on other services at once (lookups, PRODUCER, SUBSCRIBE, schema
	// and seek requests: each runs in a goroutine of its own). At the bound
	// the broker stops reading the connection until one of them is
	// answered, so that a client cannot make it start goroutines without
	// end. Pulsar has no such setting (its requests are callbacks, not
	// goroutines). Default 1000; at least 1.
	MaxRequestsPerConnection int
	// MaxProducersPerConnection and MaxConsumersPerConnection bound the
	// producers and the consumers one connection holds at once; a PRODUCER
	// or SUBSCRIBE past either is answered NotAllowedError ("Reached the
	// maximum number of producers on this connection"). Each costs a
	// goroutine and its state, a producer also its receipts in flight, so
	// the bound keeps one client's share of the broker's memory in
	// proportion. Pulsar has no such setting (it bounds producers and
	// consumers per topic: ServiceConfig.Policies' MaxProducersPerTopic
	// and the others). Default 10000 each, many times what one client
	// opens on one broker (pulsar-client-go opens one connection per
	// broker for all its producers and consumers); 0 is no bound.
	MaxProducersPerConnection int
	MaxConsumersPerConnection int

	// Clock drives the connections' behaviour over time: the keep-alive
	// (its pings, the silence that closes a connection, and the pause of
	// a connection whose reads are held), the credential refresh checks,
	// the refusal log's pace, and the times producers and consumers report
	// they connected at. Socket deadlines (ConnectTimeout, the write
	// timeout, the linger after a close) bound real network I/O and stay
	// on the wall clock. Required: DefaultConfig sets the wall clock, and
	// the assembly hands the region's one clock, as it does
	// ServiceConfig.Clock.
	Clock clockwork.Clock
}

// DefaultConfig returns the defaults for a broker advertised at serviceURL.
func DefaultConfig(serviceURL string) Config {
	return Config{
		ServiceURL:        serviceURL,
		KeepAliveInterval: 30 * time.Second,
		ConnectTimeout:    10 * time.Second,
		MaxMessageSize:    wire.DefaultMaxMessageSize,
		WriteQueue:        1024,
		WriteQueueBytes:   8 << 20,
		MessageQueue:      1000,
		MessageQueueBytes: 8 << 20,
		CloseTimeout:      10 * time.Second,
		ServerVersion:     "Meridian",
		OperationTimeout:  30 * time.Second,

		AuthRefreshInterval: 60 * time.Second,

		MaxConnections:           10000,
		MaxConnectionsPerIP:      2000,
		MaxPendingPublishes:      1000,
		MaxPendingPublishBytes:   64 << 20,
		MaxRequestsPerConnection: 1000,

		MaxProducersPerConnection: 10000,
		MaxConsumersPerConnection: 10000,

		Clock: clockwork.NewRealClock(),
	}
}

// Validate checks every field against its bounds.
func (c Config) Validate() error {
	switch {
	case c.ServiceURL == "":
		return fmt.Errorf("%w: ServiceURL is required", ErrInvalidConfig)
	case c.Clock == nil:
		return fmt.Errorf("%w: Clock is required (DefaultConfig sets the wall clock)", ErrInvalidConfig)
	case c.KeepAliveInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: KeepAliveInterval %v, want at least 100ms", ErrInvalidConfig, c.KeepAliveInterval)
	case c.ConnectTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: ConnectTimeout %v, want at least 100ms", ErrInvalidConfig, c.ConnectTimeout)
	case c.MaxMessageSize <= 0 || c.MaxMessageSize > 100<<20:
		return fmt.Errorf("%w: MaxMessageSize %d, want 1 to 100 MiB", ErrInvalidConfig, c.MaxMessageSize)
	case c.OperationTimeout < time.Second:
		return fmt.Errorf("%w: OperationTimeout %v, want at least 1s", ErrInvalidConfig, c.OperationTimeout)
	case c.WriteQueue < 16:
		return fmt.Errorf("%w: WriteQueue %d, want at least 16", ErrInvalidConfig, c.WriteQueue)
	case c.WriteQueueBytes < 64<<10:
		return fmt.Errorf("%w: WriteQueueBytes %d, want at least 64 KiB", ErrInvalidConfig, c.WriteQueueBytes)
	case c.AuthRefreshInterval != 0 && c.AuthRefreshInterval < 100*time.Millisecond:
		return fmt.Errorf("%w: AuthRefreshInterval %v, want 0 (never) or at least 100ms", ErrInvalidConfig, c.AuthRefreshInterval)
	case c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0:
		return fmt.Errorf("%w: MaxConnections %d, MaxConnectionsPerIP %d: want 0 (no bound) or more", ErrInvalidConfig, c.MaxConnections, c.MaxConnectionsPerIP)
	case c.MaxPendingPublishes < 0:
		return fmt.Errorf("%w: MaxPendingPublishes %d, want 0 (no bound) or more", ErrInvalidConfig, c.MaxPendingPublishes)
	case c.MaxPendingPublishBytes < 0:
		return fmt.Errorf("%w: MaxPendingPublishBytes %d, want 0 (no bound) or more", ErrInvalidConfig, c.MaxPendingPublishBytes)
	case c.MaxProducersPerConnection < 0 || c.MaxConsumersPerConnection < 0:
		return fmt.Errorf("%w: MaxProducersPerConnection %d, MaxConsumersPerConnection %d: want 0 (no bound) or more",
			ErrInvalidConfig, c.MaxProducersPerConnection, c.MaxConsumersPerConnection)
	case c.MaxRequestsPerConnection < 1:
		return fmt.Errorf("%w: MaxRequestsPerConnection %d, want at least 1", ErrInvalidConfig, c.MaxRequestsPerConnection)
	case c.WriteTimeout != 0 && (c.WriteTimeout < 100*time.Millisecond || c.WriteTimeout > c.KeepAliveInterval):
		return fmt.Errorf("%w: WriteTimeout %v, want 100ms to KeepAliveInterval (%v), or 0 for KeepAliveInterval",
			ErrInvalidConfig, c.WriteTimeout, c.KeepAliveInterval)
	case c.MessageQueue < 1:
		return fmt.Errorf("%w: MessageQueue %d, want at least 1", ErrInvalidConfig, c.MessageQueue)
	case c.MessageQueueBytes < 1<<10:
		return fmt.Errorf("%w: MessageQueueBytes %d, want at least 1 KiB", ErrInvalidConfig, c.MessageQueueBytes)
	case c.CloseTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: CloseTimeout %v, want at least 100ms", ErrInvalidConfig, c.CloseTimeout)
	}
	return nil
}

// writeTimeout is the deadline of one flush (see WriteTimeout).
func (c Config) writeTimeout() time.Duration {
	if c.WriteTimeout == 0 {
		return c.KeepAliveInterval
	}
	return c.WriteTimeout
}

// maxFrameSize leaves Pulsar's 10 KiB of room around a message of the
// announced maximum size.
func (c Config) maxFrameSize() int { return c.MaxMessageSize + 10<<10 }
