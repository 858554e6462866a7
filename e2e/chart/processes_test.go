package chart

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
)

// startTimeout bounds a process's start and a probe's wait for its answer
// (a loaded 2-core CI machine).
const startTimeout = 90 * time.Second

// TestChartOnRunningProcesses runs one region as the chart configures it
// by default (runRegion).
func TestChartOnRunningProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	runRegion(t, render(t, "default with a PodMonitor", chartcommon.Values{
		"monitoring": map[string]any{"podMonitor": map[string]any{"enabled": true}},
	}), nil)
}

// runRegion runs one region as rendering r configures it, as processes
// on loopback: an etcd member, two bookies, a broker and a replication
// worker, each with the environment the kubelet would give its pod (its
// ConfigMap, its own variables, the downward API's fields, $(VAR)
// expanded), in which only addresses and directories are changed, and
// the paths of its Secrets' mounts point at secrets' files. A variable
// the binary does not know would be warned about, and a value that does
// not parse would stop it. Then every probe of the chart, and every path
// its PodMonitor scrapes, is tried on the process on the port the chart
// names, and the init Job's steps run, in order, against the broker. It
// returns the broker's local ports, by container port.
func runRegion(t *testing.T, r rendering, secrets *secretFiles) map[int32]int {
	t.Helper()
	bin := meridianBinary(t)
	dir := t.TempDir()
	etcd, _ := r.workload("etcd")
	scheme, _, _ := strings.Cut(containerEnv(t, r, etcd.pod.Spec.Containers[0])["MERIDIAN_FLAG_LISTEN_CLIENT_URLS"].Value, "://")
	etcdClient, etcdPeer, etcdMetrics := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("%s://127.0.0.1:%d", scheme, etcdClient)
	etcdPeerURL := fmt.Sprintf("%s://127.0.0.1:%d", scheme, etcdPeer)

	// Each role's pod, in the order they start: the flags changed to
	// loopback addresses and temporary directories, and where its
	// container ports are then served. The zone label is the one
	// Kubernetes copies from the node (PodTopologyLabels).
	type pod struct {
		role, name string
		overrides  map[string]string
		ports      map[int32]int // container port -> local port
	}
	bookiePod := func(i int) pod {
		b, m := freePort(t), freePort(t)
		return pod{"bookie", fmt.Sprintf("%s-bookie-%d", releaseName, i), map[string]string{
			"etcd": etcdURL, "data-dir": fmt.Sprintf("%s/bookie-%d", dir, i),
			"listen": fmt.Sprintf("127.0.0.1:%d", b), "advertise": fmt.Sprintf("127.0.0.1:%d", b),
			"metrics-listen": fmt.Sprintf("127.0.0.1:%d", m),
		}, map[int32]int{3181: b, 8000: m}}
	}
	brokerPort, webPort, replicatorPort := freePort(t), freePort(t), freePort(t)
	broker := pod{"broker", releaseName + "-broker-0", map[string]string{
		"etcd": etcdURL, "global-etcd": etcdURL, "advertised-address": "127.0.0.1",
		"broker-listen": fmt.Sprintf("127.0.0.1:%d", brokerPort), "web-listen": fmt.Sprintf("127.0.0.1:%d", webPort),
	}, map[int32]int{6650: brokerPort, 8080: webPort}}
	if w, _ := r.workload("broker"); containerEnv(t, r, w.pod.Spec.Containers[0])["MERIDIAN_FLAG_BROKER_TLS_LISTEN"].Value != "" {
		brokerTLSPort, webTLSPort := freePort(t), freePort(t)
		broker.overrides["broker-tls-listen"] = fmt.Sprintf("127.0.0.1:%d", brokerTLSPort)
		broker.overrides["web-tls-listen"] = fmt.Sprintf("127.0.0.1:%d", webTLSPort)
		broker.ports[6651], broker.ports[8443] = brokerTLSPort, webTLSPort
	}
	pods := []pod{
		{"etcd", releaseName + "-etcd-0", map[string]string{
			"data-dir":                    dir + "/etcd",
			"listen-client-urls":          etcdURL,
			"advertise-client-urls":       etcdURL,
			"listen-peer-urls":            etcdPeerURL,
			"initial-advertise-peer-urls": etcdPeerURL,
			"initial-cluster":             fmt.Sprintf("%s-etcd-0=%s", releaseName, etcdPeerURL),
			"listen-metrics-urls":         fmt.Sprintf("http://127.0.0.1:%d", etcdMetrics),
		}, map[int32]int{2379: etcdClient, 2380: etcdPeer, 2381: etcdMetrics}},
		bookiePod(0),
		bookiePod(1),
		broker,
		{"replicator", releaseName + "-replicator-0", map[string]string{
			"etcd": etcdURL, "global-etcd": etcdURL, "metrics-listen": fmt.Sprintf("127.0.0.1:%d", replicatorPort),
		}, map[int32]int{8001: replicatorPort}},
	}

	procs := map[string]*process{}
	for _, p := range pods {
		w, ok := r.workload(p.role)
		if !ok {
			t.Fatalf("no %s workload", p.role)
		}
		c := w.pod.Spec.Containers[0]
		labels := mergedLabels(w.pod.Labels, map[string]string{"topology.kubernetes.io/zone": "zone-a"})
		env := secrets.mount(t, w.pod, c, resolveEnv(t, r, c, p.name, labels))
		for flag, value := range p.overrides {
			name := "MERIDIAN_FLAG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
			if _, ok := env[name]; !ok {
				t.Fatalf("%s: the chart does not set %s, which the test changes", p.name, name)
			}
			env[name] = value
		}
		env["TMPDIR"] = dir
		// In order: each role needs the ones before it serving.
		procs[p.name] = start(t, bin, c.Args, env)
		procs[p.name].awaitReady(t)
	}

	// Every probe, on the port the chart names.
	for _, p := range pods {
		w, _ := r.workload(p.role)
		c := w.pod.Spec.Containers[0]
		for _, pr := range probes(c) {
			switch {
			case pr.probe.HTTPGet != nil:
				get := pr.probe.HTTPGet
				port := localPort(t, p.name, c, get.Port.String(), p.ports)
				awaitStatus(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, get.Path), http.StatusOK, "")
			case pr.probe.TCPSocket != nil:
				port := localPort(t, p.name, c, pr.probe.TCPSocket.Port.String(), p.ports)
				conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
				if err != nil {
					t.Errorf("%s: %s probe: %v", p.name, pr.kind, err)
					continue
				}
				conn.Close()
			}
		}
	}
	// Every scrape of the PodMonitor, on every pod it selects that has the port.
	var monitors int
	for _, o := range r.objects {
		pm, ok := o.value.(*monitoringv1.PodMonitor)
		if !ok {
			continue
		}
		monitors++
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			for _, p := range pods {
				w, _ := r.workload(p.role)
				if !selects(pm.Spec.Selector.MatchLabels, w.pod.Labels) {
					continue
				}
				c := w.pod.Spec.Containers[0]
				if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == *ep.Port }) {
					continue
				}
				port := localPort(t, p.name, c, *ep.Port, p.ports)
				awaitStatus(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, ep.Path), http.StatusOK, "# TYPE ")
			}
		}
	}
	if monitors != 1 {
		t.Errorf("want one PodMonitor, got %d", monitors)
	}

	// The init Job's steps, in order, against the broker.
	job, _ := r.workload("init")
	for _, c := range slices.Concat(job.pod.Spec.InitContainers, job.pod.Spec.Containers) {
		env := secrets.mount(t, job.pod, c, resolveEnv(t, r, c, releaseName+"-init-x", job.pod.Labels))
		if _, ok := env["MERIDIAN_FLAG_ADMIN_URL"]; !ok {
			t.Fatalf("init step %s: no MERIDIAN_FLAG_ADMIN_URL", c.Name)
		}
		env["MERIDIAN_FLAG_ADMIN_URL"] = fmt.Sprintf("http://127.0.0.1:%d", webPort)
		cmd := exec.Command(bin, c.Args...)
		cmd.Env = envList(env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("init step %s (meridian %s): %v\n%s", c.Name, strings.Join(c.Args, " "), err, out)
		}
		if strings.Contains(string(out), "environment variable ignored") {
			t.Errorf("init step %s: %s", c.Name, out)
		}
	}

	for name, p := range procs {
		if w := p.unknownVariables(); w != "" {
			t.Errorf("%s: the binary ignored variables of the chart: %s", name, w)
		}
	}
	return broker.ports
}

// mergedLabels is a merged copy of ms, later ones winning.
func mergedLabels(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// resolveEnv is the environment the kubelet gives container c of the pod
// named podName with labels: its ConfigMaps' keys, then its variables in
// order, each from the downward API or its value with $(VAR) references to
// the variables before it expanded.
func resolveEnv(t *testing.T, r rendering, c corev1.Container, podName string, labels map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for name, v := range containerEnv(t, r, corev1.Container{Name: c.Name, EnvFrom: c.EnvFrom}) {
		env[name] = v.Value
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = variableReference.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := env[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		case e.ValueFrom.FieldRef != nil:
			path := e.ValueFrom.FieldRef.FieldPath
			switch {
			case path == "metadata.name":
				env[e.Name] = podName
			case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"):
				env[e.Name] = labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")]
			default:
				t.Fatalf("%s: %s from field %q, which the test cannot resolve", c.Name, e.Name, path)
			}
		default:
			t.Fatalf("%s: %s from %+v, which the test cannot resolve", c.Name, e.Name, e.ValueFrom)
		}
	}
	return env
}

func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// localPort is where the process of pod serves c's port named portName.
func localPort(t *testing.T, pod string, c corev1.Container, portName string, ports map[int32]int) int {
	t.Helper()
	for _, cp := range c.Ports {
		if cp.Name == portName {
			if p, ok := ports[cp.ContainerPort]; ok {
				return p
			}
			t.Fatalf("%s: port %s (%d) is no port the process was given", pod, portName, cp.ContainerPort)
		}
	}
	t.Fatalf("%s: no port named %s", pod, portName)
	return 0
}

// freePort is a loopback port free a moment ago. (Meridian's testkit has
// FreePorts, but this module does not depend on Meridian's, whose
// dependencies would then join Helm's here.)
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// awaitStatus GETs url until it answers want (with a body containing
// bodyHas), within startTimeout.
func awaitStatus(t *testing.T, url string, want int, bodyHas string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(startTimeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want && strings.Contains(string(body), bodyHas) {
				return
			}
			last = fmt.Sprintf("%d %.200s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("GET %s: want %d, last answer: %s", url, want, last)
}

// process is a meridian process the test started; it is killed at the
// test's end.
type process struct {
	args  []string
	cmd   *exec.Cmd
	ready chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	log   strings.Builder // stderr
}

func start(t *testing.T, bin string, args []string, env map[string]string) *process {
	t.Helper()
	p := &process{args: args, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = envList(env)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.log.Write(b)
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		readySeen := false
		for sc.Scan() {
			// Each server prints one line with " ready" once it serves.
			if !readySeen && strings.Contains(sc.Text(), " ready") {
				readySeen = true
				close(p.ready)
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("meridian %s, stderr:\n%s", strings.Join(args, " "), p.stderr())
		}
	})
	return p
}

func (p *process) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *process) awaitReady(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("meridian %s exited before it was ready:\n%s", strings.Join(p.args, " "), p.stderr())
	case <-ctx.Done():
		t.Fatalf("meridian %s not ready within %v:\n%s", strings.Join(p.args, " "), startTimeout, p.stderr())
	}
}

// unknownVariables is the binary's warnings about MERIDIAN_FLAG_
// variables that name no flag and PULSAR_PREFIX_ settings it does not
// take, if any.
func (p *process) unknownVariables() string {
	var out []string
	for _, line := range strings.Split(p.stderr(), "\n") {
		if strings.Contains(line, "environment variable ignored") || strings.Contains(line, "configuration key ignored") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
