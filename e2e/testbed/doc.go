// Package testbed is Meridian's multi-region end-to-end test bed: it runs
// regions of real `meridian` processes (etcd, bookies, brokers) on loopback
// ports, puts a shaped TCP proxy (a Link) on every path between regions,
// drives pulsar-client-go workloads that record everything the clients saw,
// and checks that history for lost, duplicated, reordered and misplaced
// messages.
//
// One file per concern:
//
//   - link.go: the TCP proxy (latency, jitter, bandwidth cap, cut and
//     restore, partition and heal, byte counts), changeable while it runs;
//   - checker.go: the recorded history and the properties checked over it;
//   - launcher.go: processes, regions and the bed that owns them
//     (build tag e2e);
//   - workload.go: producers, consumers and read-back that record the
//     history (build tag e2e).
//
// Every broker advertises the address of a Link in front of it, so that
// lookups, redirects and the cluster records name proxied addresses (see
// advertisedHost in launcher.go); each region reaches the global etcd
// through a Link of its own.
//
// The launcher is for Linux: it uses the loopback address 127.0.0.2, /proc
// and the parent-death signal.
//
// The link and the checker are pure Go with no processes, so their unit
// tests run in the default suite; the rest needs `-tags e2e`.
package testbed
