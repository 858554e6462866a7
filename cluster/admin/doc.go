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
// # Policies: enforced, stored with a warning, or refused
//
// Many of Pulsar's namespace and topic policies are kept in the global
// record's Extra map, validated for their shape, and answered back
// (stored.go lists them in one table). The broker enforces those that
// global.Resolve reads: the producer, consumer and subscription limits, the
// unacked-message limits per consumer and per subscription (a topic's over
// its namespace's), schema validation enforced, auto subscription creation,
// the publish rate, the subscribe rate, maxTopicsPerNamespace (checked by
// broker.Service.AdmitTopics, which the create routes call too),
// maxMessageSize and persistence; the replicator
// enforces the replicator dispatch rate (dispatchrate.go). The others are
// listed in global.UnbuiltPolicies: a set of one is accepted, as Pulsar
// tools expect, but answered with an HTTP Warning naming what is not
// built, logged, and counted by meridian_policies_not_built. Policies with
// no effect that no tool needs are refused with 405 and change nothing
// (unbuilt.go).
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
// topic-level overrides global resolves), stored.go, dispatchrate.go and
// unbuilt.go;
// statistics in stats.go and replication.go (a topic's replication stats).
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package admin
