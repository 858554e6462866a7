// Package admin is Meridian's Pulsar-compatible admin REST API, served by
// every broker on its web port: the /admin/v2 and /lookup/v2 paths that
// pulsar-client-go's pulsaradmin package (v0.19.0) calls, and the HTTP
// surface of a client whose service URL is http:// (DESIGN §5: lookups,
// partitioned metadata with checkAllowAutoCreation, namespace topics and
// schemas).
//
// # Shape
//
// New returns one http.Handler built on net/http's ServeMux patterns. Every
// route is a function that returns an error; the one table in errors.go
// turns errors into Pulsar's status codes and a {"reason": ...} body, so
// that a status is decided in exactly one place. A request is
// authenticated (Bearer token, Basic, TLS client certificate, or the
// anonymous role) before it is routed, and each route authorizes its own
// operation through the Authorizer hook.
//
// # State
//
// The admin API keeps no state of its own beyond the rate samples of
// topic statistics (see stats.go) and the broker's dynamic configuration,
// which lives in this broker's memory only and changes no behaviour (see
// brokerconfig.go). Reads of clusters, tenants, namespaces
// and partitioned metadata come from the broker's watched global cache, so
// they answer while the global store is unreachable; writes go to the
// global store, and a write returns only once this broker's cache shows
// it, so that a client reads its own writes from the same broker. Topic
// operations run on the broker that owns the topic: another broker's
// topic is answered with a 307 redirect to the owner's web URL, as Pulsar
// does, and the client follows it.
//
// # Stored, not enforced
//
// Many of Pulsar's namespace and topic policies (the subscription's
// unacked-message limit, the consumers' dispatch, publish and subscribe
// rates, offload and compaction thresholds, persistence, delayed delivery,
// max message size, schema validation, the deduplication snapshot interval,
// subscription expiration, properties) are accepted, validated for their
// JSON shape, stored in the global record's Extra map and answered back, but
// nothing acts on them. stored.go lists them in one table. The producer,
// consumer and subscription limits, a topic's unacked-message limit per
// consumer and auto subscription creation are stored the same way, and the
// broker enforces them; so is the replicator dispatch rate
// (dispatchrate.go), which the replicator enforces.
//
// # Bad input changes nothing
//
// Bodies are decoded and checked before anything is written, and every
// write is a single conditional update of one global record, validated by
// the global store as a whole: a refused request leaves the stored
// configuration as it was.
//
// # Where things are
//
// handler.go builds the handler, authenticates and routes; config.go is its
// Config and the Authorizer; errors.go the status table. Each group of
// routes has its file: tenants.go (tenants, clusters, brokers), namespaces.go,
// activeregion.go (a namespace's active region and fallback regions,
// Meridian's own endpoint), topics.go, messages.go (peek and message lookups, with trail.go's
// headers), schemas.go, lookup.go, bundles.go, loadbalance.go,
// brokerstats.go and brokerconfig.go. Policies are in topicpolicies.go (the
// topic-level overrides global resolves), stored.go and dispatchrate.go;
// statistics in stats.go and replication.go (a topic's replication stats).
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package admin
