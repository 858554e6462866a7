package remote

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/global"
)

// ProducerNamePrefix starts the name of every replication producer: the
// destination broker recognises meridian.repl.<source-region> as a
// replicator, keeps the metadata as sent and deduplicates on the source
// position. It is the value of cluster/broker's ReplicationProducerPrefix,
// which this package may not import (DESIGN §2).
const ProducerNamePrefix = "meridian.repl."

// Config configures one Producer: one source region, one destination topic,
// one remote region.
type Config struct {
	// SourceRegion is the region the entries were stored in. It names the
	// producer (meridian.repl.<SourceRegion>) and becomes every message's
	// replicated_from. Required.
	SourceRegion string
	// Topic is the destination topic, fully qualified
	// (persistent://tenant/ns/name, or one partition ...-partition-N): the
	// same name as the source topic. Required.
	Topic string
	// Incarnation is the source topic's incarnation (its managed-ledger
	// record's creation revision), so that the destination tells apart
	// the entries of a source topic deleted and created again, whose
	// offsets start at 0 again (wire.ReplicationSource). Required, >= 1.
	Incarnation int64
	// Cluster is the remote region's record from the global cluster
	// registry: BrokerServiceURL (or BrokerServiceURLTLS when
	// BrokerClientTLSEnabled), the authentication plugin and parameters,
	// and the TLS trust settings. Required.
	Cluster global.ClusterData
	// Schemas are the source topic's schemas, oldest first. Open registers
	// each on the remote topic, and every entry's schema_version is
	// rewritten to the remote's version of the same schema; an entry with
	// a version not among them fails Send with ErrSchema. Nil sends
	// schema_version unchanged.
	Schemas []SourceSchema

	// MaxInFlightEntries bounds the entries sent and not yet acknowledged
	// by the remote broker; Send waits for room. It must cover a WAN round
	// trip at the replication rate (10k entries/s × 40 ms RTT = 400).
	// Default 1000, at least 1.
	MaxInFlightEntries int
	// MaxInFlightBytes bounds the bytes of those entries. An entry larger
	// than the bound is sent alone. Default 64 MiB, at least 1 KiB.
	MaxInFlightBytes int
	// OperationTimeout bounds the dial, each handshake, lookup and producer
	// exchange, the whole of Open, and each write. Default 30 s, at least
	// 10 ms.
	OperationTimeout time.Duration
	// MaxLookupRedirects is how many LOOKUP redirects Open follows before
	// giving up with ErrProtocol. Default 20 (pulsar-client-go's), at
	// least 1.
	MaxLookupRedirects int
	// KeepAliveInterval is how often the Producer pings the remote broker;
	// a connection that delivers nothing for twice as long is taken as
	// lost (ErrDisconnected), so a half-open TCP connection over a WAN
	// fails within two intervals. Default 30 s (Pulsar's), at least 10 ms.
	KeepAliveInterval time.Duration
	// ClientVersion is announced in CONNECT. Default "meridian-replicator".
	ClientVersion string
	// Dial opens TCP connections; nil dials with net.Dialer. Tests and the
	// WAN emulation inject their own.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Logger receives connection events, tagged with the region and topic.
	// Nil discards them.
	Logger *slog.Logger
	// Clock drives Open's pauses between retriable answers and the
	// keep-alive (its pings and the silence that ends the connection).
	// OperationTimeout bounds real network I/O (it is the connection's
	// write deadline too) and stays on the wall clock. The replicator
	// sets its worker's clock here. Required; DefaultConfig sets the wall
	// clock.
	Clock clockwork.Clock
}

// DefaultConfig returns the defaults for a producer of sourceRegion's
// entries to topic in the remote region described by cluster.
func DefaultConfig(sourceRegion, topic string, cluster global.ClusterData) Config {
	return Config{
		SourceRegion:       sourceRegion,
		Topic:              topic,
		Cluster:            cluster,
		MaxInFlightEntries: 1000,
		MaxInFlightBytes:   64 << 20,
		OperationTimeout:   30 * time.Second,
		MaxLookupRedirects: 20,
		KeepAliveInterval:  30 * time.Second,
		ClientVersion:      "meridian-replicator",
		Clock:              clockwork.NewRealClock(),
	}
}

// Validate checks the bounds above and that the cluster record has a URL
// for the transport it asks for and an authentication this producer
// speaks.
func (c Config) Validate() error {
	switch {
	case c.SourceRegion == "":
		return fmt.Errorf("%w: SourceRegion is required", ErrInvalidConfig)
	case c.Incarnation < 1:
		return fmt.Errorf("%w: Incarnation %d, want the source topic's record revision (>= 1)", ErrInvalidConfig, c.Incarnation)
	case !strings.HasPrefix(c.Topic, "persistent://") && !strings.HasPrefix(c.Topic, "non-persistent://"):
		return fmt.Errorf("%w: Topic %q is not a full topic name (persistent://tenant/namespace/topic)", ErrInvalidConfig, c.Topic)
	case c.MaxInFlightEntries < 1:
		return fmt.Errorf("%w: MaxInFlightEntries %d, want at least 1", ErrInvalidConfig, c.MaxInFlightEntries)
	case c.MaxInFlightBytes < 1<<10:
		return fmt.Errorf("%w: MaxInFlightBytes %d, want at least 1024", ErrInvalidConfig, c.MaxInFlightBytes)
	case c.OperationTimeout < 10*time.Millisecond:
		return fmt.Errorf("%w: OperationTimeout %v, want at least 10ms", ErrInvalidConfig, c.OperationTimeout)
	case c.MaxLookupRedirects < 1:
		return fmt.Errorf("%w: MaxLookupRedirects %d, want at least 1", ErrInvalidConfig, c.MaxLookupRedirects)
	case c.KeepAliveInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: KeepAliveInterval %v, want at least 10ms", ErrInvalidConfig, c.KeepAliveInterval)
	case c.Clock == nil:
		return fmt.Errorf("%w: Clock is required (DefaultConfig sets the wall clock)", ErrInvalidConfig)
	}
	if _, err := serviceHosts(c.Cluster); err != nil {
		return err
	}
	if _, err := newAuth(c.Cluster.AuthenticationPlugin, c.Cluster.AuthenticationParameters); err != nil {
		return err
	}
	return nil
}
