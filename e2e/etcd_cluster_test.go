//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// buildMeridian builds the meridian binary into dir.
func buildMeridian(t *testing.T, dir string) string {
	t.Helper()
	// go test puts its own toolchain first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain on PATH: %v", err)
	}
	bin := filepath.Join(dir, "meridian")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/meridian-mq/meridian/cmd/meridian")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePorts reserves n distinct free loopback ports. They are released just
// before use, so another process could take one in between; the members then
// fail to start and the test says so.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// member is one `meridian etcd` process. exited and exitErr describe the
// current run; start replaces them.
type member struct {
	name    string
	client  string
	args    []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// start runs the member's process, appending its output to its log.
func (m *member) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(bin, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	m.exited = exited
	cmd := m.cmd
	go func() {
		err := cmd.Wait()
		logf.Close()
		m.exitErr = err
		close(exited)
	}()
}

// kill sends SIGKILL to the member's process by PID and waits for it.
func (m *member) kill(t *testing.T) {
	t.Helper()
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.exited:
		return
	default:
	}
	if err := syscall.Kill(m.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill %s (pid %d): %v", m.name, m.cmd.Process.Pid, err)
	}
	<-m.exited
}

func dial(ctx context.Context, endpoint string) (*meta.Etcd, error) {
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 2 * time.Second
	return meta.Dial(ctx, []string{endpoint}, cfg)
}

// TestEtcdCluster runs three `meridian etcd` processes as one cluster, writes
// through one member and reads through another, kills the raft leader by PID
// and shows that the two survivors elect a new leader and keep serving
// writes. The killed member then restarts on its data and catches up, and
// SIGTERM stops every member cleanly.
func TestEtcdCluster(t *testing.T) {
	dir := t.TempDir()
	began := time.Now()
	bin := buildMeridian(t, dir)
	t.Logf("built meridian in %v", time.Since(began).Round(time.Millisecond))
	ports := freePorts(t, 6)
	var members []*member
	var cluster []string
	for i := range 3 {
		cluster = append(cluster, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.kill(t)
		}
		if t.Failed() {
			for _, m := range members {
				out, _ := os.ReadFile(m.logPath)
				t.Logf("--- %s log ---\n%s", m.name, out)
			}
		}
	})
	for i := range 3 {
		name := fmt.Sprintf("m%d", i+1)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m := &member{
			name:    name,
			client:  client,
			logPath: filepath.Join(dir, name+".log"),
			args: []string{"etcd",
				"--name", name,
				"--data-dir", filepath.Join(dir, name),
				"--listen-client-urls", client,
				"--advertise-client-urls", client,
				"--listen-peer-urls", peer,
				"--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(cluster, ","),
				"--initial-cluster-state", "new",
				"--log-level", "warn",
			},
		}
		members = append(members, m)
		m.start(t, bin)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The cluster is up when a quorum read through a member succeeds.
	began = time.Now()
	s1 := waitDial(ctx, t, members[0])
	defer s1.Close()
	s2 := waitDial(ctx, t, members[1])
	defer s2.Close()

	t.Logf("cluster serving %v after the members started", time.Since(began).Round(time.Millisecond))
	key := meta.GlobalKey("clusters", "us-east")
	if _, err := s1.Create(ctx, key, []byte(`{"v":1}`), meta.NoLease); err != nil {
		t.Fatalf("write through m1: %v", err)
	}
	kv, err := s2.Get(ctx, key)
	if err != nil || string(kv.Value) != `{"v":1}` {
		t.Fatalf("read through m2: %+v, %v", kv, err)
	}

	// Kill the leader: the hardest single failure, since the survivors must
	// elect a new one before they can serve writes again.
	leader := -1
	for i, m := range members {
		st, err := s1.Client().Status(ctx, m.client)
		if err != nil {
			t.Fatalf("status of %s: %v", m.name, err)
		}
		if st.Leader == st.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member reports being the leader")
	}
	killed := members[leader]
	t.Logf("killing leader %s (pid %d)", killed.name, killed.cmd.Process.Pid)
	killed.kill(t)
	began = time.Now()

	var survivors []*member
	for _, m := range members {
		if m != killed {
			survivors = append(survivors, m)
		}
	}
	w := waitDial(ctx, t, survivors[0])
	defer w.Close()
	r := waitDial(ctx, t, survivors[1])
	defer r.Close()
	key2 := meta.GlobalKey("clusters", "eu-west")
	if err := createRetrying(ctx, w, key2, "after failover"); err != nil {
		t.Fatalf("write after killing the leader: %v", err)
	}
	t.Logf("write committed %v after the leader was killed", time.Since(began).Round(time.Millisecond))
	if kv, err := r.Get(ctx, key2); err != nil || string(kv.Value) != "after failover" {
		t.Fatalf("read after killing the leader: %+v, %v", kv, err)
	}
	if kv, err := r.Get(ctx, key); err != nil || string(kv.Value) != `{"v":1}` {
		t.Fatalf("earlier write lost after failover: %+v, %v", kv, err)
	}

	// The killed member restarts on its own data and serves what was written
	// while it was down (a linearizable read waits until it has caught up).
	began = time.Now()
	killed.start(t, bin)
	k := waitDial(ctx, t, killed)
	defer k.Close()
	if kv, err := k.Get(ctx, key2); err != nil || string(kv.Value) != "after failover" {
		t.Fatalf("read through the restarted %s: %+v, %v", killed.name, kv, err)
	}

	t.Logf("restarted %s served the failover write %v after its start", killed.name, time.Since(began).Round(time.Millisecond))

	// SIGTERM shuts every member down cleanly: exit status 0.
	began = time.Now()
	for _, m := range members {
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", m.name, err)
		}
	}
	for _, m := range members {
		select {
		case <-m.exited:
			if m.exitErr != nil {
				t.Errorf("%s exited with %v after SIGTERM", m.name, m.exitErr)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not exit after SIGTERM", m.name)
		}
	}
	t.Logf("all members exited %v after SIGTERM", time.Since(began).Round(time.Millisecond))
}

// waitDial dials m until a quorum read through it succeeds or ctx ends. Each
// attempt is itself bounded by the dial timeout, so this waits on the
// condition rather than on a fixed delay.
func waitDial(ctx context.Context, t *testing.T, m *member) *meta.Etcd {
	t.Helper()
	for {
		s, err := dial(ctx, m.client)
		if err == nil {
			return s
		}
		select {
		case <-m.exited:
			t.Fatalf("%s exited (%v) while waiting for it", m.name, m.exitErr)
		case <-ctx.Done():
			t.Fatalf("%s never served a quorum read: %v", m.name, err)
		default:
		}
	}
}

// createRetrying creates key, retrying while the cluster elects a leader. A
// retry after a lost reply may find the key already written by the attempt
// before: that counts as success if the value is ours.
func createRetrying(ctx context.Context, s meta.Store, key, value string) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Create(actx, key, []byte(value), meta.NoLease)
		cancel()
		if errors.Is(err, meta.ErrExists) {
			kv, gerr := s.Get(ctx, key)
			if gerr == nil && bytes.Equal(kv.Value, []byte(value)) {
				return nil
			}
			return err
		}
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Until a leader is elected, attempts fail fast; pace them.
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}
