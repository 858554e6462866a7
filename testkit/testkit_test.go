package testkit

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// failingTB records a Fatalf and ends the goroutine that called it, as
// testing.T does.
type failingTB struct {
	testing.TB
	msg string
}

func (f *failingTB) Helper() {}
func (f *failingTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitOn runs waitFor on a goroutine of its own, as a test would on its own,
// and returns what it failed with ("" if it returned).
func waitOn(deadline time.Duration, what string, cond func() bool) string {
	tb := &failingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(tb, deadline, what, cond)
	}()
	<-done
	return tb.msg
}

func TestWaitForReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	if msg := waitOn(time.Minute, "the third look", func() bool { calls++; return calls == 3 }); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3: WaitFor returns as soon as it holds", calls)
	}
	WaitFor(t, "a condition that holds", func() bool { return true })
}

func TestWaitForFailsNamingWhat(t *testing.T) {
	start := time.Now()
	msg := waitOn(50*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(msg, "the moon") {
		t.Fatalf("failure %q does not say what it waited for", msg)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its 50ms deadline", took)
	}
}

func TestWaitCondSeesEachChange(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	n, seen := 0, []int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			mu.Lock()
			n++
			c.Broadcast()
			for len(seen) == 0 || seen[len(seen)-1] != n { // until the waiter has looked
				c.Wait()
			}
			mu.Unlock()
		}
	}()
	WaitCond(t, c, "the third change", func() bool {
		seen = append(seen, n)
		c.Broadcast()
		return n == 3
	})
	<-done
	if seen[0] == 0 { // it looked before the first change
		seen = seen[1:]
	}
	if !slices.Equal(seen, []int{1, 2, 3}) {
		t.Fatalf("saw %v: not each change as it happened", seen)
	}
}

func TestWaitCondFailsNamingWhat(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	tb := &failingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitCond(tb, 50*time.Millisecond, c, "a signal", func() bool { return false })
	}()
	<-done
	if !strings.Contains(tb.msg, "a signal") {
		t.Fatalf("failure %q does not say what it waited for", tb.msg)
	}
	if !mu.TryLock() {
		t.Fatal("it failed holding the lock")
	}
}

// testM is a package's tests: Run runs run and returns code.
type testM struct {
	code int
	run  func()
}

func (m testM) Run() int {
	m.run()
	return m.code
}

// Main closes what the tests shared, last first, before it looks for
// leaked goroutines: a shared server's goroutines are no leak.
func TestRunClosesSharedBeforeLeakCheck(t *testing.T) {
	var shared closers
	var order []string
	stop := make(chan struct{})
	stopped := make(chan struct{})
	m := testM{run: func() {
		go func() { <-stop; close(stopped) }() // a shared server
		shared.add(func() error { order = append(order, "server"); close(stop); <-stopped; return nil })
		shared.add(func() error { order = append(order, "client"); return nil })
	}}
	var out strings.Builder
	if code := run(m, &shared, &out); code != 0 {
		t.Fatalf("run = %d: %s", code, out.String())
	}
	if !slices.Equal(order, []string{"client", "server"}) {
		t.Fatalf("closed %v, want the last registered first", order)
	}
}

func TestRunFails(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for _, tc := range []struct {
		name string
		m    testM
		want string // in what run reports; "" for nothing
	}{
		{"a goroutine outlives the tests", testM{run: func() { go func() { <-release }() }}, "goroutines outlived the tests"},
		{"a shared server fails to close", testM{run: func() {}}, "closing what the tests shared: closed badly"},
		{"a test fails", testM{code: 1, run: func() {}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shared closers
			closed := false
			shared.add(func() error {
				closed = true
				if tc.name == "a shared server fails to close" {
					return errors.New("closed badly")
				}
				return nil
			})
			var out strings.Builder
			if code := run(tc.m, &shared, &out); code != 1 {
				t.Fatalf("run = %d, want 1", code)
			}
			if !closed {
				t.Fatal("what the tests shared was not closed")
			}
			if tc.want == "" && out.Len() > 0 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("run reported %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// TestFailureLogShowsTheTailOfAFailedTest: a failed test logs the last
// lines written to its FailureLog, a passing one nothing.
func TestFailureLogShowsTheTailOfAFailedTest(t *testing.T) {
	for _, fail := range []bool{false, true} {
		rec := &recordingTB{TB: t}
		w := FailureLog(rec)
		for i := range failureLogLines + 5 {
			fmt.Fprintf(w, "line %d\n", i)
		}
		rec.failed = fail
		rec.runCleanups()
		switch {
		case !fail && rec.logged != "":
			t.Fatalf("a passing test logged %q", rec.logged)
		case fail && (!strings.Contains(rec.logged, fmt.Sprintf("line %d\n", failureLogLines+4)) ||
			!strings.Contains(rec.logged, "line 5\n") || strings.Contains(rec.logged, "line 4\n")):
			t.Fatalf("a failed test logged %.200q…; want lines 5 to %d", rec.logged, failureLogLines+4)
		}
	}
}

// recordingTB records what FailureLog asks of a test.
type recordingTB struct {
	testing.TB
	failed   bool
	cleanups []func()
	logged   string
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool     { return r.failed }
func (r *recordingTB) Logf(format string, args ...any) {
	r.logged += fmt.Sprintf(format, args...) + "\n"
}
func (r *recordingTB) runCleanups() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}
