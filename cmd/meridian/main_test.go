package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/testkit"
)

// runMainEnv makes the test binary behave as the meridian binary: the
// process tests re-execute os.Args[0] with it set, so they need no separate
// build and run the code under test with the same flags (-race included).
const runMainEnv = "MERIDIAN_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is one run of `meridian <args>` (the re-executed test binary).
// Its stdout is scanned for the ready line; both streams go to a log file
// that is printed when the test fails.
type process struct {
	name    string
	cmd     *exec.Cmd
	ready   chan string // the first line that contains "ready"
	exited  chan struct{}
	exitErr error
}

// startProcess starts `meridian args...` and returns at once; waitReady
// waits for its ready line.
func startProcess(t testing.TB, name, logPath string, args ...string) *process {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{name: name, ready: make(chan string, 1), exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stderr = logf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !sent && strings.Contains(sc.Text(), "ready") {
				p.ready <- sc.Text()
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		<-scanned
		p.exitErr = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("--- %s log (%s) ---\n%s", name, filepath.Base(logPath), out)
		}
	})
	return p
}

// waitReady returns the ready line, or fails the test if the process exits
// or ctx ends first.
func (p *process) waitReady(ctx context.Context, t testing.TB) string {
	t.Helper()
	select {
	case line := <-p.ready:
		return line
	case <-p.exited:
		t.Fatalf("%s exited before it was ready: %v", p.name, p.exitErr)
	case <-ctx.Done():
		t.Fatalf("%s not ready: %v", p.name, ctx.Err())
	}
	return ""
}

// kill sends SIGKILL to the process by PID and waits for it to exit.
func (p *process) kill(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		return
	default:
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill %s (pid %d): %v", p.name, p.cmd.Process.Pid, err)
	}
	<-p.exited
}

// stop sends SIGTERM and waits up to timeout for the process to exit; it
// returns the exit error (nil for status 0).
func (p *process) stop(t testing.TB, timeout time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(timeout):
		p.kill(t)
		return fmt.Errorf("%s did not exit within %v of SIGTERM", p.name, timeout)
	}
}

// freePorts reserves n distinct free loopback ports (testkit.FreePorts).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := testkit.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// TestVersionLine: the version and revision from the link (build-image.sh)
// win over the build information; a build without either says so.
func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-05T07:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		info     *debug.BuildInfo
		ldV, ldR string
		want     string
	}{
		{nil, "", "", "meridian (devel) (revision unknown; "},
		{info, "", "", "meridian (devel) (revision 0123456789ab+dirty, 2026-12-05T07:00:00Z; "},
		{nil, "v1.2.3", "fedcba9876543210+dirty", "meridian v1.2.3 (revision fedcba987654+dirty; "},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "", "abc", "meridian v0.4.0 (revision abc; "},
	} {
		if got := versionLine(c.info, c.ldV, c.ldR); !strings.HasPrefix(got, c.want) {
			t.Errorf("versionLine(%v, %q, %q) = %q, want prefix %q", c.info != nil, c.ldV, c.ldR, got, c.want)
		}
	}
}
