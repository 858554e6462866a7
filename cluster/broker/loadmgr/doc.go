// Package loadmgr is a broker's load manager: which broker of the region
// serves each bundle of topics, and how bundles move between brokers. It is
// Pulsar's load manager in Meridian's terms, with etcd as its only state.
//
// # What it does
//
//   - Ownership (ownership.go). The broker registers under a session lease,
//     /meridian/regions/<r>/brokers/<id>, and claims bundles under the same
//     lease, /meridian/regions/<r>/owners/<tenant>/<ns>/<bundle>. A claim is
//     created only when absent, so a bundle has one owner; when the lease
//     ends every claim goes with it, and the broker unloads everything
//     before it claims again.
//   - Placement (placement.go). A lookup of a bundle nobody holds places it
//     on the least-loaded live broker that is not draining; a lookup of a
//     bundle whose owner is dead (its port refuses a probe, probe.go) takes
//     it over by revoking the owner's lease, well within the lease's TTL.
//   - Load reports (loadreport.go). Every ReportInterval the broker writes
//     its load, in the shape of Pulsar's LocalBrokerData, into its
//     registration (registry.go), where placement and the shedder read it;
//     after each report it splits the bundles it owns that grew past the
//     bounds (split.go).
//   - The leader (leader.go). One broker per region is elected; it runs the
//     shedder (shedder.go), which moves bundles off overloaded brokers and
//     onto ones that joined, and keeps the region's cluster record naming
//     its live brokers (clusterrecord.go).
//   - Hand-offs (handoff.go). An admin unload, a shed or a drain writes a
//     request into the bundle's ownership key; its owner fences and seals
//     the bundle's topics, moves the key to the new owner's lease in one
//     compare-and-swap, and only then tells the clients where to go. No
//     SEND fails on the way.
//
// # How the broker drives it, and it the broker
//
// The broker asks its Manager who owns a bundle (BundleOwner for a lookup,
// ClaimBundle for a topic it is asked to load) and starts and closes it
// with itself. The Manager never holds a topic: it reaches the broker's
// topics through Topics, a narrow interface defined here and implemented by
// the broker (sample their load, hand off one bundle's topics, unload them
// all), as etcd's lessor reaches its server's keys through a RangeDeleter.
// So this package imports neither the broker nor storage; its tests drive it
// with a Topics of their own over the in-memory metadata store.
//
// # Files
//
//	manager.go       the Manager, its lifecycle, and the Topics interface
//	config.go        Config, LookupConfig, BalanceConfig (broker.conf's names)
//	ownership.go     the session lease, registration and bundle claims
//	probe.go         the probe of an owner that may be dead
//	placement.go     choosing a broker for an unowned bundle
//	registry.go      the registration record and its load report
//	loadreport.go    making and publishing the load report
//	leader.go        the region leader's election and its duties
//	shedder.go       the shedder's plan and its rounds
//	split.go         bundle split
//	clusterrecord.go the region's cluster record
//	handoff.go       unload requests, hand-offs and drain
//	metrics.go       meridian_broker_ownership_changes_total and the others, and Pulsar's pulsar_lb_* (usage, unloads, splits)
//	errors.go        the sentinel errors
//
// # Locks
//
// The process's lock order is written in one place, docs/lock-order.md;
// this package's locks are leaves there but for ownership.place, a one-slot
// semaphore held across one placement's store calls and taken with no lock
// held.
package loadmgr
