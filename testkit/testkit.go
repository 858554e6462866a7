// Package testkit is what every package's tests share, whatever their row of
// DESIGN §2's table: one way to wait for a condition (WaitFor) and one
// TestMain (Main) that fails a run whose goroutines outlive its tests, a
// stand-in peer on a loopback port (ListenLoopback), and a throwaway
// certificate authority for TLS tests (CA). It
// imports nothing of Meridian's, so that the tests of topology, telemetry
// and cluster/wire may use it too; the embedded-etcd harness, which needs
// cluster/meta, is cluster/meta/metatest, built on this. Only tests, and
// other kits, import it (arch_test.go holds them to that).
//
// tailscale's tstest.WaitFor is the model: one helper, one default.
package testkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// WaitDeadline is how long WaitFor and WaitCond wait before they fail the
// test.
//
// It is the longest bound the copies it replaced had, a minute (cluster/node's
// waits for a second region's replicator to take a task, through leases and
// etcd watches, and the managed ledger's etcd load test; the others had 5,
// 10, 20 and 30 seconds). A test waits that long only when it is about to
// fail, so a generous bound costs a passing run nothing, while a short one
// fails good runs on a loaded machine: CI runs the suite under -race on 2
// cores with several test binaries at once, where a step that takes
// milliseconds alone (an etcd election, a lease's expiry, a broker's first
// load report) can take seconds, and this repository's history has flakes
// of that kind (the defragment test failed 1 run in 3 under load; perf's
// deadline timer fired late on a busy CI machine). A minute still ends
// well within go test's default 10-minute timeout, with a message that
// names what never happened instead of a dump of every goroutine.
const WaitDeadline = time.Minute

// pollInterval is how often WaitFor looks at its condition: short next to
// anything a test waits for, long enough that a condition that makes an RPC
// (an etcd Get, an admin REST call) does not load the machine.
const pollInterval = 5 * time.Millisecond

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test, naming what, if it does not within WaitDeadline. It is for states
// that have no event to wait on (a queue's length, a record in etcd, a
// metric); where there is a channel to receive from, receive from it.
//
// cond runs on the test's goroutine, so it may call t.Fatal.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, WaitDeadline, what, cond)
}

func waitFor(t testing.TB, deadline time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > deadline {
			t.Fatalf("waited %v for %s", deadline, what)
		}
		<-tick.C
	}
}

// WaitCond waits until cond holds, as WaitFor does, for a state guarded by
// c.L whose every change is signalled on c (a fake server's count of the
// frames it got, say): it checks cond with c.L held, at once and after each
// c.Broadcast, so it sees each change as it happens instead of at the next
// poll. It fails the test, naming what, after WaitDeadline.
func WaitCond(t testing.TB, c *sync.Cond, what string, cond func() bool) {
	t.Helper()
	waitCond(t, WaitDeadline, c, what, cond)
}

func waitCond(t testing.TB, deadline time.Duration, c *sync.Cond, what string, cond func() bool) {
	t.Helper()
	expired := false // guarded by c.L
	timer := time.AfterFunc(deadline, func() {
		c.L.Lock()
		defer c.L.Unlock()
		expired = true
		c.Broadcast()
	})
	defer timer.Stop()
	c.L.Lock()
	defer c.L.Unlock()
	for !cond() {
		if expired {
			t.Fatalf("waited %v for %s", deadline, what)
		}
		c.Wait()
	}
}

// Main is a package's TestMain:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// It runs the tests, then closes what they shared (see AfterTests), last
// registered first, and then, if all passed, fails the run when a goroutine
// outlives them (goleak, with opts for the goroutines of other modules that
// are known to outlive their Close). It exits the process with the result.
//
// m is the package's *testing.M, or a wrapper whose Run starts what the tests
// share around m.Run and stops it before returning, so that the leak check
// comes after.
func Main(m goleak.TestingM, opts ...goleak.Option) {
	os.Exit(run(m, &afterTests, os.Stderr, opts...))
}

// AfterTests registers close to run once the package's tests have finished,
// before Main looks for leaked goroutines: a server the tests share, started
// on first use, registers its Close here. An error fails the run.
// Registrations are closed last first, as deferred calls are.
func AfterTests(close func() error) { afterTests.add(close) }

// afterTests holds what this test binary's tests registered with AfterTests.
var afterTests closers

type closers struct {
	mu   sync.Mutex
	list []func() error
}

func (c *closers) add(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, f)
}

// close runs and forgets the registered closers, last first, and joins
// their errors.
func (c *closers) close() error {
	c.mu.Lock()
	list := c.list
	c.list = nil
	c.mu.Unlock()
	var errs []error
	for i := len(list) - 1; i >= 0; i-- {
		errs = append(errs, list[i]())
	}
	return errors.Join(errs...)
}

// run is Main without the exit: the tests' exit code, made 1 by a failed
// close or a leaked goroutine, which it reports on stderr.
func run(m goleak.TestingM, shared *closers, stderr io.Writer, opts ...goleak.Option) int {
	code := m.Run()
	if err := shared.close(); err != nil {
		fmt.Fprintln(stderr, "testkit: closing what the tests shared:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(stderr, "testkit: goroutines outlived the tests:", err)
			code = 1
		}
	}
	return code
}
