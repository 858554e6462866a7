package main

// The -clustered mode: the client's multi-broker suites, which upstream
// runs against the docker-compose clusters of integration-tests/clustered
// and integration-tests/extensible-load-manager, run here against a
// region of two brokers that the runner starts as separate processes
// (`meridian etcd`, one `meridian bookie`, two `meridian broker`).
//
//	go run ./e2e/compat -clustered
//
// The suites name their brokers broker-1 and broker-2, on the Pulsar port
// 6650 and the web port 8080 each, which only docker's DNS resolves. The
// runner rewrites those host:port pairs in its copy of the module to the
// region's (clusteredHosts): broker-1 is localhost:6650 and :8080,
// broker-2 localhost:6652 and :8082. Each broker advertises localhost, so
// a lookup answers with exactly the URLs the rewritten suite expects
// (pulsar://localhost:6650 or pulsar://localhost:6652), and the unload's
// destinationBroker is Pulsar's broker id form, host:webPort.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// clusteredTest is one test the -clustered mode runs: a top-level test of
// the pulsar package and, when only part of it runs, the -test.run path
// below it.
type clusteredTest struct {
	test string
	sub  []string
	// mustMove says the test unloads a bundle of public/default to the
	// other broker: the runner then checks that the bundle moved (see
	// watchMoves).
	mustMove bool
}

// name is the test's full name, its path included.
func (c clusteredTest) name() string { return strings.Join(append([]string{c.test}, c.sub...), "/") }

// runExpr is the -test.run expression that selects the test and its path.
func (c clusteredTest) runExpr() string {
	parts := []string{"^" + regexp.QuoteMeta(c.test) + "$"}
	for _, s := range c.sub {
		parts = append(parts, "^"+regexp.QuoteMeta(s)+"$")
	}
	return strings.Join(parts, "/")
}

// clusteredTests are the suites issue 14 names. TestClientClusteredTestSuite
// and TestReaderClusteredTestSuite retry across the hosts of a service
// URL whose first port nothing listens on; TestTopicUnload's direct case
// unloads a bundle to the other broker and checks that the client moves
// without a lookup (CLOSE_PRODUCER and CLOSE_CONSUMER carrying
// assignedBrokerServiceUrl).
var clusteredTests = []clusteredTest{
	{test: "TestExtensibleLoadManagerTestSuite", sub: []string{"TestTopicUnload", "directConnection"}, mustMove: true},
	{test: "TestClientClusteredTestSuite"},
	{test: "TestReaderClusteredTestSuite"},
}

// clusteredExcluded are the parts of those suites not run, with the reason.
var clusteredExcluded = map[string]string{
	"TestExtensibleLoadManagerTestSuite/TestTopicUnload/proxyConnection": "goes through Pulsar's proxy (pulsar://proxy:6650, http://proxy:8080): Meridian has no proxy; a client reaches the owner directly",
}

// clusteredTags build the suites into the pulsar package's test binary.
const clusteredTags = "extensible_load_manager,clustered"

// The region's addresses: what broker-1 and broker-2 become, and the port
// the clustered suites put first in their service URL, which must refuse.
const (
	broker1Addr, broker1Web = "localhost:6650", "localhost:8080"
	broker2Addr, broker2Web = "localhost:6652", "localhost:8082"
	unreachableAddr         = "localhost:6600"
)

// clusteredHosts is the rewrite of the suites' host:port pairs, for
// strings.NewReplacer.
var clusteredHosts = []string{
	"broker-1:6650", broker1Addr,
	"broker-1:8080", broker1Web,
	"broker-1:6600", unreachableAddr,
	"broker-2:6650", broker2Addr,
	"broker-2:8080", broker2Web,
}

// clusteredFiles are the suites' files in the module's pulsar/ folder.
var clusteredFiles = []string{"extensible_load_manager_test.go", "client_impl_clustered_test.go", "reader_clustered_test.go"}

// runClustered is main's -clustered mode, from the copied module on.
func (r *runner) runClustered(ctx context.Context, bin string) error {
	if err := rewriteHosts(filepath.Join(r.copyDir, "pulsar")); err != nil {
		return err
	}
	for _, addr := range []string{broker1Addr, broker1Web, broker2Addr, broker2Web, unreachableAddr} {
		if listening(addr) {
			return fmt.Errorf("something listens on %s: -clustered needs 6600, 6650, 6652, 8080 and 8082 free", addr)
		}
	}
	pt := &pkgTests{name: "pulsar", binary: filepath.Join(r.tmp, "bin", "pulsar-clustered.test")}
	r.printf("compat: building the tests of pulsar with -tags %s\n", clusteredTags)
	out, err := command(ctx, r.copyDir, goEnv(), "go", "test", "-c", "-tags", clusteredTags, "-o", pt.binary, "./pulsar/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -c -tags %s ./pulsar/: %w\n%s", clusteredTags, err, out)
	}
	etcdURL, err := r.startRegion(ctx, bin)
	if err != nil {
		return err
	}
	store, err := meta.Dial(ctx, []string{etcdURL}, etcdConfig())
	if err != nil {
		return fmt.Errorf("the region's etcd at %s: %w", etcdURL, err)
	}
	defer store.Close()
	r.setUpClustered(ctx, bin)

	r.printf("\n== clustered pass (two brokers: %s and %s; %v per test)\n", broker1Addr, broker2Addr, r.opts.perTest)
	var jobs []job
	for _, c := range clusteredTests {
		if r.opts.run == nil || r.opts.run.MatchString(c.name()) {
			j := job{pkg: pt, test: c.test, name: c.name(), run: c.runExpr()}
			if c.mustMove {
				j.watch = func(ctx context.Context, run func() result) result { return watchMoves(ctx, store, run) }
			}
			jobs = append(jobs, j)
			pt.tests = append(pt.tests, c.name())
		}
	}
	for name, reason := range clusteredExcluded {
		if r.opts.run == nil || r.opts.run.MatchString(name) {
			r.record(result{Package: pt.name, Test: name, Pass: "server", Result: "excluded", Reason: reason})
			r.printf("%-8s %-58s  %s\n", "EXCLUDED", pt.name+"/"+name, reason)
			pt.tests = append(pt.tests, name)
		}
	}
	r.runAll(ctx, jobs, "server", r.opts.perTest, 1)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return r.writeReport(r.summarize([]*pkgTests{pt}, nil))
}

// rewriteHosts rewrites the suites' host names in dir (see
// clusteredHosts), and fails if one is left.
func rewriteHosts(dir string) error {
	rep := strings.NewReplacer(clusteredHosts...)
	leftover := regexp.MustCompile(`broker-[12]:\d+`)
	for _, name := range clusteredFiles {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("the clustered suites: %w", err)
		}
		s := rep.Replace(string(b))
		if m := leftover.FindString(s); m != "" {
			return fmt.Errorf("%s names %s, which the runner does not rewrite", path, m)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startRegion starts the region the clustered suites run against: one
// etcd member, one bookie, and the two brokers, each a process of its own
// stopped by its PID when the run ends.
func (r *runner) startRegion(ctx context.Context, bin string) (etcdURL string, err error) {
	ports, err := testkit.FreePorts(3)
	if err != nil {
		return "", err
	}
	etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	data := filepath.Join(r.tmp, "data")
	steps := []struct {
		name string
		args []string
	}{
		{"etcd", []string{"etcd", "--name", "compat-etcd", "--data-dir", filepath.Join(data, "etcd"),
			"--listen-client-urls", etcdURL, "--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1])}},
		{"bookie", []string{"bookie", "--region", clusteredRegion, "--etcd", etcdURL, "--id", "bookie-1",
			"--data-dir", filepath.Join(data, "bookie-1"), "--listen", fmt.Sprintf("127.0.0.1:%d", ports[2]),
			"--metrics-listen", ""}},
		{"broker-1", brokerArgs(etcdURL, broker1Addr, broker1Web)},
		{"broker-2", brokerArgs(etcdURL, broker2Addr, broker2Web)},
	}
	for _, s := range steps {
		p, err := r.startProcess(bin, s.name, nil, s.args...)
		if err != nil {
			return "", err
		}
		if err := p.waitReady(ctx, r.opts.readyTimeout); err != nil {
			return "", err
		}
	}
	return etcdURL, nil
}

// etcdConfig is the runner's etcd client: quiet, quick to give up.
func etcdConfig() meta.EtcdConfig {
	cfg := meta.DefaultEtcdConfig()
	cfg.Logger = nil
	cfg.DialTimeout = 5 * time.Second
	return cfg
}

// watchMoves runs a test that unloads a bundle of public/default to the
// other broker, reading the namespace's ownership keys every 50ms
// meanwhile, and fails a passing test if no key ever changed broker.
// TestTopicUnload sends its unload with makeHTTPCall, which ignores the
// HTTP status, and then checks only that the client made no lookup: a
// broker that answered the unload with 404, or did nothing, would pass
// it.
func watchMoves(ctx context.Context, store meta.Store, run func() result) result {
	prefix := meta.Prefix(meta.RegionKey(clusteredRegion, "owners", "public", "default"))
	seen := map[string][]string{} // key -> the distinct owners seen, in order
	poll := func(ctx context.Context) {
		kvs, _, err := store.List(ctx, prefix)
		if err != nil {
			return // etcd busy: the next poll sees the key
		}
		for _, kv := range kvs {
			var o struct {
				BrokerID string `json:"brokerId"`
			}
			if _, err := meta.DecodeJSON(kv.Value, 1, &o); err != nil {
				continue
			}
			if owners := seen[kv.Key]; len(owners) == 0 || owners[len(owners)-1] != o.BrokerID {
				seen[kv.Key] = append(owners, o.BrokerID)
			}
		}
	}
	poll(ctx) // the owners before the test, so that a quick move is seen
	watch, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-watch.Done():
				return
			case <-tick.C:
			}
			poll(watch)
		}
	}()
	res := run()
	stop()
	<-done
	poll(ctx)
	for _, owners := range seen {
		if len(owners) > 1 {
			return res
		}
	}
	if res.Result == "pass" {
		res.Result = "fail"
		res.Reason = fmt.Sprintf("the unload moved no bundle: no ownership key of public/default changed broker while the test ran (it passes anyway: it ignores the unload's HTTP status); owners seen: %v", seen)
	}
	return res
}

// clusteredRegion is the region's name.
const clusteredRegion = "compat"

// brokerArgs are one broker's flags: it advertises localhost (its id is
// then localhost:<port>) and listens on the loopback address.
func brokerArgs(etcdURL, addr, web string) []string {
	loopback := func(a string) string { return strings.Replace(a, "localhost", "127.0.0.1", 1) }
	return []string{"broker", "--region", clusteredRegion, "--etcd", etcdURL, "--advertised-address", "localhost",
		"--broker-listen", loopback(addr), "--web-listen", loopback(web),
		"--ensemble-size", "1", "--write-quorum", "1", "--ack-quorum", "1"}
}

// setUpClustered creates what the suites' docker-compose clusters have:
// the public tenant and its default namespace.
func (r *runner) setUpClustered(ctx context.Context, bin string) {
	r.printf("compat: set-up of the public/default namespace\n")
	r.adminSteps(ctx, bin, "http://"+broker1Web, "", [][]string{{"tenants", "create", "public"}, {"namespaces", "create", "public/default"}})
}

// process is one process of the region the runner started.
type process struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// startProcess starts bin with args (and env, nil for the runner's), its
// output in <name>.log in the work directory, and registers its stop with
// the run's cleanup.
func (r *runner) startProcess(bin, name string, env []string, args ...string) (*process, error) {
	p := &process{name: name, logPath: filepath.Join(r.tmp, name+".log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C is ours to pass on
	r.printf("compat: starting %s: %s %s (log: %s)\n", name, bin, strings.Join(args, " "), p.logPath)
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.cmd.Wait(); logf.Close(); close(p.exited) }()
	r.closers = append(r.closers, p.stop)
	return p, nil
}

// waitReady waits for the process's ready line (every meridian command
// prints one once it serves).
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(p.logPath)
		if strings.Contains(string(b), " ready: ") {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready; its log:\n%s", p.name, tail(string(b), 40))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v; its log:\n%s", p.name, timeout, tail(string(b), 40))
		}
	}
}

// stop stops the process by its PID: SIGTERM, then SIGKILL if it has not
// exited within 20 seconds. Stopping a stopped process does nothing.
func (p *process) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		fmt.Fprintf(os.Stderr, "compat: %s (pid %d) did not stop on SIGTERM; killing it\n", p.name, p.cmd.Process.Pid)
		p.cmd.Process.Kill()
		<-p.exited
	}
}
