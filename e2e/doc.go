// Package e2e is Meridian's multi-region end-to-end test bed and the tests
// that run on it. The bed runs regions of real `meridian` processes (etcd,
// bookies, brokers) on loopback ports, puts a shaped TCP proxy (a Link) on
// every path between regions, drives pulsar-client-go workloads that
// record everything the clients saw, and checks that history for lost,
// duplicated, reordered and misplaced messages. Faults are injected by PID
// (SIGKILL, SIGSTOP and SIGCONT, restarts) and on links (cut, partition,
// latency, bandwidth).
//
// One file per concern (those marked e2e build only with that tag):
//
//   - link.go: the TCP proxy (latency, jitter, bandwidth cap, cut and
//     restore, partition and heal, byte counts), changeable while it runs;
//     procnet.go tells the test's own sockets from the bed's (OwnPeer), for
//     the clients that bypass the links (BedConfig.LocalClients);
//   - checker.go: the recorded history and the properties checked over it;
//   - launcher.go (e2e): building the binary, and the bed with its regions
//     and brokers, which cuts whole regions off;
//   - process.go (e2e): one meridian process, started, signalled and
//     restarted by PID, and its log;
//   - workload.go (e2e): producers, consumers and read-back that record the
//     history; paced.go paces another system's client as a producer is;
//   - geo.go and geolag.go (e2e): the three-region bed of the
//     geo-replication scenarios and its lag measurements, which
//     e2e/sidebyside shares through GeoBed;
//   - nemesis.go: the seeded schedule of random faults that TestNemesis runs;
//   - trend.go: the soak's judgement of a resource's growth, with cpu.go
//     (e2e) reading processes' CPU time from /proc; docsection.go writes
//     figures into docs/BENCHMARKS.md;
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
// upgrade_test.go runs docs/operations.md's rolling upgrade under load,
// from the binary of an older revision (BuildMeridianAt) to this build,
// replacing each process in place (Process.Upgrade).
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
// and the parent-death signal. The link, the checker, the nemesis schedule,
// the trend and docsection start no processes, so their unit tests run in
// the default suite; the rest is slow and needs `-tags e2e`:
//
//	go test -tags e2e -race -run 'TestTestbed|TestScenarioRegionFaults' -v ./e2e/
//
// The tests live in this package, beside the bed, because no package
// outside e2e may import it (arch_test.go). The bed's own tools live under
// it and may: e2e/sidebyside (a module of its own: the side-by-side
// benchmarks, on GeoBed), e2e/compat (pulsar-client-go's suites against
// Meridian), e2e/plot (the charts of docs/BENCHMARKS.md) and e2e/deploy (a
// module of its own: deploy/'s dashboard and rules against a running
// region).
package e2e
