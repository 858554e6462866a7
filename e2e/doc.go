// Package e2e holds Meridian's multi-process end-to-end tests. They run on
// the test bed of package e2e/testbed: TestMain builds the meridian binary
// once, each test starts regions of its commands as separate processes on
// loopback ports, behind shaped TCP links, injects faults (SIGKILL,
// SIGSTOP, restarts, cut links) by PID, records what pulsar-client-go
// clients see, and checks that history. They run only with `-tags e2e`,
// because they are slow:
//
//	go test -tags e2e -race -run 'TestTestbed|TestRegionFaults' -v ./e2e/
package e2e
