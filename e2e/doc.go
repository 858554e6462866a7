// Package e2e is Meridian's multi-region end-to-end test bed and the tests
// that run on it. The bed runs regions of real `meridian` processes (etcd,
// bookies, brokers) on loopback ports, puts a shaped TCP proxy (a Link) on
// every path between regions, drives pulsar-client-go workloads that
// record everything the clients saw, and checks that history for lost,
// duplicated, reordered and misplaced messages. Faults are injected by PID
// (SIGKILL, SIGSTOP and SIGCONT, restarts) and on links (cut, partition,
// latency, bandwidth).
//
// One file per concern:
//
//   - link.go: the TCP proxy (latency, jitter, bandwidth cap, cut and
//     restore, partition and heal, byte counts), changeable while it runs;
//   - checker.go: the recorded history and the properties checked over it;
//   - launcher.go: building the binary, and the bed with its regions
//     and brokers, which cuts whole regions off (build tag e2e);
//   - process.go: one meridian process, started, signalled and
//     restarted by PID, and its log (build tag e2e);
//   - workload.go: producers, consumers and read-back that record the
//     history (build tag e2e);
//   - main_test.go builds the meridian binary once per run; the other
//     _test.go files with the e2e tag are the end-to-end tests.
//
// Every broker advertises the address of a Link in front of it, so that
// lookups, redirects and the cluster records name proxied addresses (see
// advertisedHost in launcher.go); each region reaches the global etcd
// through a Link of its own. While a broker's process is down its links
// stop listening, so that its advertised address refuses connections as
// a dead broker's port does (Link.Unlisten).
//
// failover_test.go runs issue 14's faults on a region of three brokers
// (SIGKILL, SIGSTOP past the lease, a rolling SIGTERM restart, an unload
// of every bundle, a scale-out) and reports the pause of each.
//
// Every fault scenario is named TestScenario... (scenario_test.go holds
// those with no other home: a full bookie disk, a slow and lossy region,
// a region etcd member's restart, the global etcd cut off), so that one
// command runs them all:
//
//	go test -tags e2e -count=1 -timeout 120m -run 'TestScenario' -v ./e2e/
//
// The launcher is for Linux: it uses the loopback address 127.0.0.2, /proc
// and the parent-death signal. The link and the checker are pure Go with
// no processes, so their unit tests run in the default suite; the rest is
// slow and needs `-tags e2e`:
//
//	go test -tags e2e -race -run 'TestTestbed|TestScenarioRegionFaults' -v ./e2e/
//
// Everything lives in this one package because nothing may import e2e
// (arch_test.go), not even another package under it.
package e2e
