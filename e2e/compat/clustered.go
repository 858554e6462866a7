package main

// The multi-broker modes (suiteMode: -clustered here, -bluegreen in
// bluegreen.go), and -clustered itself: the client's multi-broker suites,
// which upstream runs against the docker-compose clusters of
// integration-tests/clustered and integration-tests/extensible-load-manager,
// run here against a region of two brokers that the runner starts as
// separate processes (`meridian etcd`, one `meridian bookie`, two
// `meridian broker`).
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

// suiteTest is one test a multi-broker mode runs: a top-level test of
// the pulsar package and, when only part of it runs, the -test.run path
// below it.
type suiteTest struct {
	test string
	sub  []string
	// note, if set, is said of the test before it runs, and kept in the
	// report: how it runs here unlike upstream.
	note string
	// watch, if set, judges the test beyond its own verdict, from what it
	// sees of the regions while the test runs (see job.watch).
	watch func(ctx context.Context, regions []startedRegion, run func() result) result
}

// name is the test's full name, its path included.
func (c suiteTest) name() string { return strings.Join(append([]string{c.test}, c.sub...), "/") }

// runExpr is the -test.run expression that selects the test and its path.
func (c suiteTest) runExpr() string {
	parts := []string{"^" + regexp.QuoteMeta(c.test) + "$"}
	for _, s := range c.sub {
		parts = append(parts, "^"+regexp.QuoteMeta(s)+"$")
	}
	return strings.Join(parts, "/")
}

// suiteMode is one of the runner's multi-broker modes (-clustered,
// -bluegreen): the suites it builds and runs, how their docker host names
// become the regions' addresses, and the regions it starts, each a
// cluster of its own (one etcd, which holds its global configuration too,
// one bookie, and its brokers), as upstream's docker-compose files lay
// them out.
type suiteMode struct {
	// name names the mode in what it prints and the test binary.
	name string
	// tags build the suites into the pulsar package's test binary.
	tags string
	// files are the suites' files in the module's pulsar/ folder, and
	// hosts the rewrite of their host:port pairs (strings.NewReplacer's
	// pairs); leftover matches a pair the rewrite must not leave.
	files    []string
	hosts    []string
	leftover *regexp.Regexp
	regions  []regionSpec
	// refused are addresses the suites name where nothing may listen.
	refused  []string
	tests    []suiteTest
	excluded map[string]string
}

// regionSpec is one region a mode starts; its first broker takes the
// set-up's admin calls.
type regionSpec struct {
	name    string
	brokers []brokerSpec
}

// brokerSpec is one broker: its name in logs, and its Pulsar and web
// addresses, localhost:port each (it advertises localhost, so lookups
// answer with exactly these).
type brokerSpec struct{ name, addr, web string }

// startedRegion is a region the runner started, with its etcd's URL.
type startedRegion struct {
	regionSpec
	etcdURL string
}

// runElsewhere are the top-level tests that a multi-broker mode runs
// whole, by package/TestName, with what the default run, which does not
// build them, says of them: they count there as excluded.
var runElsewhere = map[string]string{
	"pulsar/" + blueGreenSuite: "needs -tags extensible_load_manager and two clusters (blue and green): run by `go run ./e2e/compat -bluegreen`",
}

// clusteredTests are the suites issue 14 names. TestClientClusteredTestSuite
// and TestReaderClusteredTestSuite retry across the hosts of a service
// URL whose first port nothing listens on; TestTopicUnload's direct case
// unloads a bundle to the other broker and checks that the client moves
// without a lookup (CLOSE_PRODUCER and CLOSE_CONSUMER carrying
// assignedBrokerServiceUrl).
var clusteredTests = []suiteTest{
	{test: "TestExtensibleLoadManagerTestSuite", sub: []string{"TestTopicUnload", "directConnection"}, watch: watchMoves},
	{test: "TestClientClusteredTestSuite"},
	{test: "TestReaderClusteredTestSuite"},
}

// clusteredExcluded are the parts of those suites not run, with the reason.
var clusteredExcluded = map[string]string{
	"TestExtensibleLoadManagerTestSuite/TestTopicUnload/proxyConnection": "goes through Pulsar's proxy (pulsar://proxy:6650, http://proxy:8080): Meridian has no proxy; a client reaches the owner directly",
}

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

// clusteredMode is the -clustered mode: one region of two brokers.
var clusteredMode = suiteMode{
	name:     "clustered",
	tags:     "extensible_load_manager,clustered",
	files:    []string{"extensible_load_manager_test.go", "client_impl_clustered_test.go", "reader_clustered_test.go"},
	hosts:    clusteredHosts,
	leftover: regexp.MustCompile(`broker-[12]:\d+`),
	regions: []regionSpec{{name: clusteredRegion, brokers: []brokerSpec{
		{"broker-1", broker1Addr, broker1Web}, {"broker-2", broker2Addr, broker2Web}}}},
	refused:  []string{unreachableAddr},
	tests:    clusteredTests,
	excluded: clusteredExcluded,
}

// runSuites is main's -clustered and -bluegreen modes, from the copied
// module on.
func (r *runner) runSuites(ctx context.Context, bin string, m suiteMode) error {
	if err := rewriteHosts(filepath.Join(r.copyDir, "pulsar"), m); err != nil {
		return err
	}
	addrs := m.refused
	for _, rs := range m.regions {
		for _, b := range rs.brokers {
			addrs = append(addrs, b.addr, b.web)
		}
	}
	for _, addr := range addrs {
		if listening(addr) {
			return fmt.Errorf("something listens on %s: -%s needs %v free", addr, m.name, addrs)
		}
	}
	pt := &pkgTests{name: "pulsar", binary: filepath.Join(r.tmp, "bin", "pulsar-"+m.name+".test")}
	r.printf("compat: building the tests of pulsar with -tags %s\n", m.tags)
	out, err := command(ctx, r.copyDir, goEnv(), "go", "test", "-c", "-tags", m.tags, "-o", pt.binary, "./pulsar/").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test -c -tags %s ./pulsar/: %w\n%s", m.tags, err, out)
	}
	var regions []startedRegion
	for _, rs := range m.regions {
		etcdURL, err := r.startRegion(ctx, bin, rs)
		if err != nil {
			return err
		}
		regions = append(regions, startedRegion{rs, etcdURL})
		r.printf("compat: set-up of the public/default namespace in %s\n", rs.name)
		r.adminSteps(ctx, bin, "http://"+rs.brokers[0].web, "", [][]string{{"tenants", "create", "public"}, {"namespaces", "create", "public/default"}})
	}

	var layout []string
	for _, rs := range m.regions {
		var bs []string
		for _, b := range rs.brokers {
			bs = append(bs, b.name+" "+b.addr)
		}
		layout = append(layout, fmt.Sprintf("%s: %s", rs.name, strings.Join(bs, ", ")))
	}
	r.printf("\n== %s pass (%s; %v per test)\n", m.name, strings.Join(layout, "; "), r.opts.perTest)
	var jobs []job
	for _, c := range m.tests {
		if r.opts.run == nil || r.opts.run.MatchString(c.name()) {
			j := job{pkg: pt, test: c.test, name: c.name(), run: c.runExpr(), note: c.note}
			if c.watch != nil {
				j.watch = func(ctx context.Context, run func() result) result { return c.watch(ctx, regions, run) }
			}
			if c.note != "" {
				r.printf("%-8s %-58s  %s\n", "NOTE", pt.name+"/"+c.name(), c.note)
			}
			jobs = append(jobs, j)
			pt.tests = append(pt.tests, c.name())
		}
	}
	for name, reason := range m.excluded {
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

// rewriteHosts rewrites the host names of m's suites in dir (m.hosts), and
// fails if one is left (m.leftover).
func rewriteHosts(dir string, m suiteMode) error {
	rep := strings.NewReplacer(m.hosts...)
	for _, name := range m.files {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("the %s suites: %w", m.name, err)
		}
		s := rep.Replace(string(b))
		if found := m.leftover.FindString(s); found != "" {
			return fmt.Errorf("%s names %s, which the runner does not rewrite", path, found)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startRegion starts region rs: one etcd member, one bookie, and its
// brokers, each a process of its own stopped by its PID when the run
// ends. It returns the etcd's client URL.
func (r *runner) startRegion(ctx context.Context, bin string, rs regionSpec) (etcdURL string, err error) {
	ports, err := testkit.FreePorts(3)
	if err != nil {
		return "", err
	}
	etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	data := filepath.Join(r.tmp, "data", rs.name)
	type step struct {
		name string
		args []string
	}
	steps := []step{
		{rs.name + "-etcd", []string{"etcd", "--name", rs.name + "-etcd", "--data-dir", filepath.Join(data, "etcd"),
			"--listen-client-urls", etcdURL, "--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ports[1])}},
		{rs.name + "-bookie", []string{"bookie", "--region", rs.name, "--etcd", etcdURL, "--id", "bookie-1",
			"--data-dir", filepath.Join(data, "bookie-1"), "--listen", fmt.Sprintf("127.0.0.1:%d", ports[2]),
			"--metrics-listen", ""}},
	}
	for _, b := range rs.brokers {
		steps = append(steps, step{b.name, brokerArgs(rs.name, etcdURL, b.addr, b.web)})
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
func watchMoves(ctx context.Context, regions []startedRegion, run func() result) result {
	store, err := meta.Dial(ctx, []string{regions[0].etcdURL}, etcdConfig())
	if err != nil {
		return result{Result: "fail", Reason: fmt.Sprintf("the region's etcd at %s: %v", regions[0].etcdURL, err)}
	}
	defer store.Close()
	return watchOwners(ctx, store, regions[0].name, run)
}

// watchOwners is watchMoves on store, for region.
func watchOwners(ctx context.Context, store meta.Store, region string, run func() result) result {
	prefix := meta.Prefix(meta.RegionKey(region, "owners", "public", "default"))
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

// brokerArgs are the flags of a broker of region: it advertises localhost
// (its id is then localhost:<port>) and listens on the loopback address.
func brokerArgs(region, etcdURL, addr, web string) []string {
	loopback := func(a string) string { return strings.Replace(a, "localhost", "127.0.0.1", 1) }
	return []string{"broker", "--region", region, "--etcd", etcdURL, "--advertised-address", "localhost",
		"--broker-listen", loopback(addr), "--web-listen", loopback(web),
		"--ensemble-size", "1", "--write-quorum", "1", "--ack-quorum", "1"}
}

// process is one process of a region the runner started.
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
