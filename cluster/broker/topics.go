package broker

import (
	"context"

	"github.com/meridian-mq/meridian/cluster/broker/schema"
	"github.com/meridian-mq/meridian/cluster/wire/pb"

	"github.com/meridian-mq/meridian/topology"
)

// Topics is what connections ask of the rest of the broker: where a topic is
// served, and how it is partitioned. Both may wait on the metadata store, so
// connections call them off their reader goroutine. Errors should wrap a
// wire sentinel (wire.ErrServiceNotReady, wire.ErrTopicNotFound, ...), whose
// code the client acts on.
type Topics interface {
	// Lookup returns the broker that serves topic.
	Lookup(ctx context.Context, topic topology.TopicName, opts LookupOptions) (Location, error)
	// Partitions returns topic's partition count, 0 when it is not
	// partitioned.
	Partitions(ctx context.Context, topic topology.TopicName) (int, error)
	// Topic returns the topic loaded on this broker, loading it (and
	// creating it, when create is set and policy allows) if this broker
	// owns it. It waits while the topic loads.
	Topic(ctx context.Context, topic topology.TopicName, create bool) (*Topic, error)
	// TopicsOfNamespace lists the persistent topics of a namespace.
	TopicsOfNamespace(ctx context.Context, tenant, ns string) ([]string, error)
	// Schema returns topic's schema at the encoded version, or its latest
	// when version is empty (GET_SCHEMA).
	Schema(ctx context.Context, topic topology.TopicName, version []byte) (schema.Info, schema.Version, error)
	// GetOrCreateSchema registers a schema if it is new and compatible,
	// returning its version (GET_OR_CREATE_SCHEMA).
	GetOrCreateSchema(ctx context.Context, topic topology.TopicName, s *pb.Schema) (schema.Version, error)
	// LookupPermits bounds the lookups answered at once; the Server takes
	// one for each LOOKUP and PARTITIONED_METADATA, and the HTTP lookups
	// take theirs from the same.
	LookupPermits() *LookupPermits
}

// LookupOptions qualify a lookup.
type LookupOptions struct {
	// Replication marks a replicator's lookup (the LOOKUP carried
	// wire.LookupPropertyReplication): it is answered with this region's
	// owner of the topic, never redirected to the namespace's active
	// region, since every region of the set must get the entries.
	Replication bool
	// Listener is the advertised listener the client names (Pulsar's
	// advertisedListenerName, the client's ListenerName): the answer is
	// the owner's URLs of that listener. Empty, the owner's own URLs (its
	// internal listener's). A redirect to the namespace's active region
	// is that region's cluster record's URLs whatever the name: the client
	// looks up there again, with its name.
	Listener string
}

// Location is where a topic is served.
type Location struct {
	ServiceURL    string
	ServiceURLTLS string
	// WebURL is the owner's HTTP address (HTTP lookups answer it).
	WebURL string
	// Redirect is true when the answer is another broker that must itself
	// be asked (the client looks up again there), false when the client
	// should connect to ServiceURL and use the topic.
	Redirect bool
}
