//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one meridian process, started and signalled by PID. It can
// be killed and started again on the same arguments and data; its log
// (stdout and stderr, every run appended) is Name.log in the bed's folder.
type Process struct {
	// Name is unique in the bed.
	Name string
	// ClientURL is an etcd member's client URL; "" for other processes.
	ClientURL string
	// FailpointEndpoint is a bookie's failpoint endpoint (host:port) when
	// its region has RegionConfig.BookieFailpoints; "" otherwise.
	FailpointEndpoint string
	// MetricsURL is the process's Prometheus /metrics, read directly (not
	// through a link): every process of the bed has one (a bookie's and a
	// replicator's on a free port, with /ready beside it).
	MetricsURL string

	region  string // the region it runs in; "" for the global etcd member
	tb      testing.TB
	bin     string
	args    []string
	logPath string

	// beforeStart, if set, runs before each run starts; afterExit, if
	// set, runs when a run has ended, before Exited is closed. The bed
	// sets them on brokers to make their links refuse while they are
	// down.
	beforeStart func() error
	afterExit   func()

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run ends
	exitErr error         // the current run's exit status, once exited
}

// Start runs the process, appending its output to its log. It fails the
// test if the process is running already.
func (p *Process) Start() {
	p.tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited != nil {
		select {
		case <-p.exited:
		default:
			p.tb.Fatalf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	if p.beforeStart != nil {
		if err := p.beforeStart(); err != nil {
			p.tb.Fatalf("start %s: %v", p.Name, err)
		}
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.tb.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test process dies without its cleanups (SIGKILL, a timeout's
	// panic), the kernel SIGKILLs its children, instead of leaving a
	// region running. The signal follows the thread that started the
	// child; Go ends threads only when a goroutine locked to one exits,
	// which nothing here does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.tb.Fatalf("start %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	// The run's waiter: it ends when the process does, and every owner
	// of a Process kills it at the end of the test.
	go func() {
		err := cmd.Wait()
		logf.Close()
		if p.afterExit != nil {
			p.afterExit()
		}
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
}

// PID is the current run's process id (0 before the first Start).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Exited is closed when the current run ends.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ExitErr is the current run's exit status once Exited is closed: nil for
// status 0.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

func (p *Process) running() bool {
	ch := p.Exited()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// signal sends sig to the current run, if it is running.
func (p *Process) signal(sig syscall.Signal) {
	p.tb.Helper()
	if !p.running() {
		return
	}
	pid := p.PID()
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.tb.Errorf("%v to %s (pid %d): %v", sig, p.Name, pid, err)
	}
}

// Kill SIGKILLs the process and waits until it is gone. Killing a process
// that is not running does nothing.
func (p *Process) Kill() {
	p.tb.Helper()
	if !p.running() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.Exited()
}

// Pause SIGSTOPs the process and waits until every thread of it has
// stopped (a signal is delivered asynchronously): it holds its sockets
// and leases but does nothing until Resume, like a process stuck in a
// long GC pause.
func (p *Process) Pause() {
	p.tb.Helper()
	p.signal(syscall.SIGSTOP)
	p.waitStopped(true)
}

// Resume SIGCONTs a paused process and waits until it runs again.
func (p *Process) Resume() {
	p.tb.Helper()
	p.signal(syscall.SIGCONT)
	p.waitStopped(false)
}

// waitStopped polls /proc until every thread of the process is stopped
// (state T), or none is.
func (p *Process) waitStopped(want bool) {
	p.tb.Helper()
	pid := p.PID()
	deadline := time.Now().Add(10 * time.Second)
	for p.running() {
		stat, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stat) == 0 {
			return // gone
		}
		stopped := 0
		for _, f := range stat {
			b, err := os.ReadFile(f)
			// The state follows the command name, which is in parentheses.
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && strings.HasPrefix(string(b[i+1:]), " T") {
				stopped++
			}
		}
		if (want && stopped == len(stat)) || (!want && stopped == 0) {
			return
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("%s (pid %d): %d of %d threads stopped after 10s, want %v", p.Name, pid, stopped, len(stat), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Terminate SIGTERMs the process: a clean stop. Wait tells how it ended.
func (p *Process) Terminate() { p.tb.Helper(); p.signal(syscall.SIGTERM) }

// Wait waits, until ctx ends, for the current run to exit, and returns its
// exit status (nil for 0).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.Exited():
		return p.ExitErr()
	case <-ctx.Done():
		return fmt.Errorf("%s (pid %d) is still running: %w", p.Name, p.PID(), ctx.Err())
	}
}

// Restart SIGKILLs the process, starts it again on the same arguments and
// data, and waits until the new run is ready.
func (p *Process) Restart(ctx context.Context) {
	p.tb.Helper()
	p.Kill()
	p.startReady(ctx)
}

// Upgrade stops the process as a rolling upgrade does, with SIGTERM (a
// broker hands its bundles over first), waits until it has exited, and
// starts bin in its place on the same arguments and data, waiting until
// the new run is ready.
func (p *Process) Upgrade(ctx context.Context, bin string) {
	p.tb.Helper()
	p.Terminate()
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.Wait(wait); err != nil {
		p.tb.Errorf("%s after SIGTERM: %v", p.Name, err)
		p.Kill()
	}
	p.mu.Lock()
	p.bin = bin
	p.mu.Unlock()
	p.startReady(ctx)
}

// startReady starts a run of a stopped process and waits until it is ready.
func (p *Process) startReady(ctx context.Context) {
	p.tb.Helper()
	from := p.LogSize()
	p.Start()
	p.WaitReady(ctx, from)
}

// LogSize is the log's current length: pass it to WaitLog to look only at
// what a later run prints.
func (p *Process) LogSize() int64 {
	fi, err := os.Stat(p.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogTail is the last n bytes of the log.
func (p *Process) LogTail(n int) string {
	out, _ := os.ReadFile(p.logPath)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

// WaitLog waits until the log holds a line containing want after byte
// offset from, and returns that line. The log is all a process tells the
// bed, so this polls it. It fails the test if the process exits first or
// ctx ends.
func (p *Process) WaitLog(ctx context.Context, from int64, want string) string {
	p.tb.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	exited := p.Exited()
	for {
		b, _ := os.ReadFile(p.logPath)
		if int64(len(b)) > from {
			for line := range strings.SplitSeq(string(b[from:]), "\n") {
				if strings.Contains(line, want) {
					return line
				}
			}
		}
		select {
		case <-exited:
			p.tb.Fatalf("%s exited (%v) before logging %q", p.Name, p.ExitErr(), want)
		case <-ctx.Done():
			p.tb.Fatalf("%s never logged %q: %v", p.Name, want, ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitReady waits for the ready line of a run started after log offset
// from.
func (p *Process) WaitReady(ctx context.Context, from int64) string {
	p.tb.Helper()
	return p.WaitLog(ctx, from, readyLine)
}

// SetFailpoints replaces the failpoints of a running bookie whose region has
// RegionConfig.BookieFailpoints, with spec in `meridian bookie --failpoints`
// syntax (e.g. "journal-fsync=delay:50ms", "journal-write=enospc"); ""
// clears them. It returns the set the bookie reports armed. It may be
// called from any goroutine.
func (p *Process) SetFailpoints(ctx context.Context, spec string) (string, error) {
	if p.FailpointEndpoint == "" {
		return "", fmt.Errorf("%s has no failpoint endpoint: set RegionConfig.BookieFailpoints", p.Name)
	}
	method := http.MethodPut
	if spec == "" {
		method = http.MethodDelete
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.FailpointEndpoint+"/failpoints", strings.NewReader(spec))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: set failpoints %q: %w", p.Name, spec, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("%s: set failpoints %q: %w", p.Name, spec, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: set failpoints %q: %s: %s", p.Name, spec, resp.Status, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}
