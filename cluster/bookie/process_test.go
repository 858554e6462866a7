//go:build e2e

package bookie

// Multi-process tests: the real `meridian bookie` binary against an embedded
// etcd, with faults injected through MERIDIAN_FAILPOINTS. They build the
// binary, so they run only with -tags e2e:
//
//	go test -tags e2e -race -run Process ./cluster/bookie/
//
// TestProcessFailpointEndpoint switches the failpoints of a running process
// through --failpoint-endpoint instead.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

var buildOnce struct {
	sync.Once
	path string
	err  error
}

func meridianBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "meridian-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "meridian")
		goBin, err := exec.LookPath("go") // go test puts its own toolchain first on PATH
		if err != nil {
			buildOnce.err = fmt.Errorf("no go toolchain on PATH: %v", err)
			return
		}
		cmd := exec.Command(goBin, "build", "-o", buildOnce.path, "github.com/meridian-mq/meridian/cmd/meridian")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

// startEtcd starts an etcd of the test's own: the bookie process's
// registration outlives a SIGKILL by its lease's TTL, so tests do not share
// one.
func startEtcd(t *testing.T) (*meta.Embed, meta.Store) {
	t.Helper()
	e := metatest.Start(t, metatest.FastEmbedConfig())
	return e, metatest.Dial(t, e.Endpoints())
}

type bookieProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	exited chan struct{}
	err    error // Wait's result, valid after exited
}

// startProc runs `meridian bookie` and waits for its ready line. The test's
// cleanup kills it by PID if it is still running.
// Further flags for the bookie go in extra.
func startProc(t *testing.T, e *meta.Embed, dataDir, failpoints string, extra ...string) *bookieProc {
	t.Helper()
	args := []string{"bookie", "--region", "e2e", "--id", "proc-bookie",
		"--etcd", strings.Join(e.Endpoints(), ","), "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--lease-ttl", "60s", "--log-level", "info", "--metrics-listen", ""}
	cmd := exec.Command(meridianBinary(t), append(args, extra...)...)
	cmd.Env = append(os.Environ(), failpointsEnvName+"="+failpoints)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &bookieProc{cmd: cmd, stderr: &strings.Builder{}, exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), " ready: "); ok {
				ready <- addr
			}
		}
		io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	select {
	case p.addr = <-ready:
	case <-p.exited:
		t.Fatalf("bookie exited before it was ready: %v\n%s", p.err, p.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("bookie not ready\n%s", p.stderr)
	}
	return p
}

const failpointsEnvName = FailpointsEnv

// waitFatalExit waits for the bookie to exit after a failed fsync, which
// must be non-zero.
func waitFatalExit(t *testing.T, ctx context.Context, p *bookieProc) {
	t.Helper()
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatal("the bookie did not exit after a failed fsync")
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a non-zero exit code", p.err)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestProcessFsyncFailureExitsNonZero(t *testing.T) {
	ctx := testCtx(t)
	e, store := startEtcd(t)
	p := startProc(t, e, t.TempDir(), "journal-fsync=error@20")
	c := dial(t, p.addr)
	var acked int64
	for ; acked < 1000; acked++ {
		err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: acked, LastAddConfirmed: acked - 1, Payload: []byte("x")})
		if err != nil {
			break
		}
	}
	if acked == 1000 {
		t.Fatal("the fsync failpoint never fired")
	}
	waitFatalExit(t, ctx, p)
	if !strings.Contains(p.stderr.String(), "journal fsync failed") {
		t.Fatalf("stderr does not say why:\n%s", p.stderr)
	}
	// Its registration is gone (revoked on the way out).
	if _, err := store.Get(ctx, bkproto.BookieKey("e2e", "proc-bookie")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("registration after the fatal exit: %v", err)
	}
}

func TestProcessKillAndRestart(t *testing.T) {
	ctx := testCtx(t)
	e, store := startEtcd(t)
	dir := t.TempDir()
	p := startProc(t, e, dir, "")
	c := dial(t, p.addr)
	const n = 300
	acked := make(chan int64, n)
	for i := range int64(50) {
		mustAdd(t, ctx, c, 2, i, 2000)
		acked <- i
	}
	// Then many adds in flight, and a SIGKILL while some are acked and
	// some are not.
	var wg sync.WaitGroup
	var mu sync.Mutex
	more := 0
	kill := make(chan struct{})
	for i := int64(50); i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 2, EntryID: i, LastAddConfirmed: i - 1, Payload: payloadOf(2, i, 2000)}) == nil {
				acked <- i
				mu.Lock()
				if more++; more == 20 {
					close(kill)
				}
				mu.Unlock()
			}
		}()
	}
	<-kill
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	wg.Wait()
	close(acked)
	<-p.exited
	c.Close()

	p2 := startProc(t, e, dir, "")
	c2 := dial(t, p2.addr)
	count := 0
	for i := range acked {
		mustRead(t, ctx, c2, 2, i, 2000)
		count++
	}
	t.Logf("%d of %d adds were acknowledged before the SIGKILL; all are readable after the restart", count, n)
	// The restarted process replaces the crashed run's registration well
	// within the 60s lease TTL: it revokes the old lease (named in its LEASE
	// file) instead of waiting for it to expire.
	key := bkproto.BookieKey("e2e", "proc-bookie")
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	watch := store.Watch(wctx, key, 0)
	for {
		kv, err := store.Get(wctx, key)
		if err == nil {
			if reg, err := bkproto.ParseRegistration(kv.Value); err == nil && reg.Address == p2.addr {
				break
			}
		}
		select {
		case _, ok := <-watch:
			if !ok {
				t.Fatal("watch ended")
			}
		case <-wctx.Done():
			t.Fatalf("the restarted bookie did not replace its crashed run's registration: %s", kv.Value)
		}
	}
	syscall.Kill(p2.cmd.Process.Pid, syscall.SIGTERM)
	<-p2.exited
	if p2.err != nil {
		t.Fatalf("SIGTERM exit: %v\n%s", p2.err, p2.stderr)
	}
}

func TestProcessDiskFullAndCorruption(t *testing.T) {
	ctx := testCtx(t)
	e, store := startEtcd(t)
	p := startProc(t, e, t.TempDir(), "journal-write=enospc@10;entry-corrupt=3:1")
	c := dial(t, p.addr)
	var acked int64
	var err error
	for ; acked < 1000; acked++ {
		if err = c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 3, EntryID: acked, LastAddConfirmed: acked - 1, Payload: payloadOf(3, acked, 100)}); err != nil {
			break
		}
	}
	wantErr(t, "add on a full disk", err, bkproto.ErrReadOnly)
	if acked < 3 {
		t.Fatalf("only %d adds before ENOSPC", acked)
	}
	mustRead(t, ctx, c, 3, 0, 100)
	_, err = c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 3, EntryID: 1})
	wantErr(t, "corrupted entry", err, bkproto.ErrChecksumMismatch)
	key := bkproto.BookieKey("e2e", "proc-bookie")
	waitRegistration(t, ctx, store, key, store.Watch(ctx, key, 0), true)
	select {
	case <-p.exited:
		t.Fatalf("a full disk stopped the bookie: %v", p.err)
	default:
	}
}

// freePort reserves a free loopback port and releases it for the process
// to bind; another process could take it in between, and then the bookie
// fails to start and the test says so.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// procFailpoints sends one request to a process's failpoint endpoint and
// returns the armed set it answers with.
func procFailpoints(t *testing.T, ctx context.Context, endpoint, method, spec string) string {
	t.Helper()
	code, body := failpointCall(t, ctx, endpoint, method, spec)
	if code != http.StatusOK {
		t.Fatalf("%s %q: %d: %s", method, spec, code, body)
	}
	return strings.TrimSpace(body)
}

// TestProcessFailpointEndpoint switches a running `meridian bookie`'s disk
// faults through --failpoint-endpoint: a slow sync shows in the add
// latency and clearing it restores it; ENOSPC makes it read-only (in its
// registration too) and clearing it makes it writable again; a failed fsync
// ends it non-zero.
func TestProcessFailpointEndpoint(t *testing.T) {
	ctx := testCtx(t)
	e, store := startEtcd(t)
	endpoint := freePort(t)
	p := startProc(t, e, t.TempDir(), "", "--failpoint-endpoint", endpoint, "--read-only-probe-interval", "1s")
	if got := procFailpoints(t, ctx, endpoint, http.MethodGet, ""); got != "" {
		t.Fatalf("armed at start: %q", got)
	}
	c := dial(t, p.addr)
	entry := int64(0)
	add := func() (time.Duration, error) {
		start := time.Now()
		err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 5, EntryID: entry, LastAddConfirmed: entry - 1, Payload: payloadOf(5, entry, 100)})
		if err == nil {
			entry++
		}
		return time.Since(start), err
	}
	for range 20 {
		if _, err := add(); err != nil {
			t.Fatal(err)
		}
	}

	const delay = 300 * time.Millisecond
	if got := procFailpoints(t, ctx, endpoint, http.MethodPut, "journal-fsync=delay:"+delay.String()); got != "journal-fsync=delay:300ms" {
		t.Fatalf("PUT answered %q", got)
	}
	for range 3 {
		took, err := add()
		if err != nil {
			t.Fatal(err)
		}
		if took < delay {
			t.Fatalf("an add under a %s sync delay took %s", delay, took)
		}
	}
	procFailpoints(t, ctx, endpoint, http.MethodDelete, "")
	fast := false
	for range 50 {
		took, err := add()
		if err != nil {
			t.Fatal(err)
		}
		if took < delay/2 {
			fast = true
			break
		}
	}
	if !fast {
		t.Fatal("no add faster than the delay in 50 after the clear")
	}

	key := bkproto.BookieKey("e2e", "proc-bookie")
	procFailpoints(t, ctx, endpoint, http.MethodPut, "journal-write=enospc")
	_, err := add()
	wantErr(t, "add on a full disk", err, bkproto.ErrReadOnly)
	waitRegistration(t, ctx, store, key, store.Watch(ctx, key, 0), true)
	procFailpoints(t, ctx, endpoint, http.MethodDelete, "")
	waitRegistration(t, ctx, store, key, store.Watch(ctx, key, 0), false)
	if _, err := add(); err != nil {
		t.Fatalf("add once the disk has room again: %v", err)
	}

	procFailpoints(t, ctx, endpoint, http.MethodPut, "journal-fsync=error")
	if _, err := add(); err == nil {
		t.Fatal("an add whose fsync failed was acknowledged")
	}
	waitFatalExit(t, ctx, p)
}
