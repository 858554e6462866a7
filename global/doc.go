// Package global is Meridian's global configuration: the records every
// region shares under /meridian/global/ (DESIGN §3), and how a topic's
// effective policy is resolved from them.
//
//   - Records: ClusterData (the cluster registry, one entry per region),
//     TenantInfo, a namespace's Policies (including Meridian's active
//     region, DESIGN §6, and its fallback regions, kept in Extra so that
//     older brokers carry them through their updates) and a topic's
//     TopicPolicies (partitioned-topic metadata and topic-level
//     overrides). Their JSON is Pulsar's, so the
//     admin API serves them as Pulsar does; in etcd each carries "v":1.
//   - Store: validated create, read, update and delete, every write a
//     conditional one. It is the admin API's write path.
//   - Cache: a watched local copy that the data path reads without ever
//     waiting on the global etcd, which keeps serving the last known state
//     while that store is unreachable; with Await (read your own admin
//     write) and bounded, coalescing subscriptions.
//   - Resolve: topic override, then namespace, then BrokerDefaults
//     (Pulsar's broker defaults); replication clusters bounded by the
//     tenant's allowed clusters.
//   - Store.Ensure: the idempotent bootstrap of standalone and dev mode.
//
// Region numbers (regionnumber.go) are assigned here once per region; a
// region's ledger ids carry its number (cluster/ledger's LedgerID).
//
// records.go holds the records and their validation, store.go the Store,
// cache.go the Cache, resolve.go Resolve, bootstrap.go Ensure, and
// dispatchrate.go the replicator dispatch rates, which live in the records'
// Extra maps.
//
// Key layout under the prefix (segments URL-escaped, meta.Key):
//
//	clusters/<region>
//	tenants/<tenant>
//	namespaces/<tenant>/<namespace>
//	topics/<tenant>/<namespace>/<domain>/<topic>
//	region-numbers/<region>        and the counter region-number-counter
//	subscription-states/<tenant>/<namespace>/<domain>/<topic>/<subscription>/<region>
//	                               a replicated subscription's state in one
//	                               region (subscriptionstates.go)
//
// The topic key has the domain (persistent, non-persistent) as its own
// segment, as Pulsar's own metadata layout does, so that persistent://t/n/x
// and non-persistent://t/n/x never share a record. A partition has no record
// of its own: its partitioned topic's applies.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package global
