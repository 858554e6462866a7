// Command compat measures Meridian's compatibility with Pulsar's own Go
// client: it runs the test suite of pulsar-client-go v0.19.0 (the pulsar/
// package and the pulsaradmin/ packages) against a real `meridian
// standalone`, one top-level test at a time, and prints pass, fail or skip
// for each with totals.
//
//	go run ./e2e/compat                       # every package, every test
//	go run ./e2e/compat -pkg pulsar -run 'TestProducer|TestConsumer' -per-test 30s
//	go run ./e2e/compat -clustered            # the multi-broker suites, on two brokers
//
// -clustered runs the suites that need several brokers instead, against a
// region of two that the runner starts; clustered.go says how.
// # What it does
//
//  1. Copies the module from the module cache (`go env GOMODCACHE`) to a
//     temporary directory, made writable, and builds each package's test
//     binary once (`go test -c`) and meridian (`go build ./cmd/meridian`).
//  2. Lists every top-level Test function by parsing the package's _test.go
//     files, whatever their build constraints: the totals are out of every
//     test the package holds (pulsar/ has 323). Tests in excluded.txt are
//     not run; each has its reason there.
//  3. The "no server" pass: with nothing listening on 6650 and 8080, it runs
//     every test alone (-no-server-timeout each, -no-server-parallel at
//     once). A test that passes here needs no server and is left out of
//     the percentage; one slower than the timeout counts as needing one.
//  4. Writes a standalone.conf from the module's
//     integration-tests/conf/standalone.conf, its /pulsar/certs and
//     /pulsar/tokens paths pointed at the copy's integration-tests, starts
//     `meridian standalone --config FILE --data-dir DIR`, waits for
//     http://localhost:8080/metrics, and performs the set-up steps of the
//     module's scripts/pulsar-test-service-start.sh with `meridian admin`.
//  5. Runs each remaining test alone, with its own timeout, in the
//     package's directory: the test binary's `-test.run '^Name$'
//     -test.timeout T`, read through test2json. This is what `go test
//     -count=1 -run '^Name$' -timeout T ./pkg/` runs, without relinking the
//     binary for each test.
//
// # Counting
//
// A skip is not a pass. A test counts as "no server" only if it passes with
// nothing listening. needs-server = total - excluded - no-server, and the
// percentage is passed / needs-server.
//
// meridian is stopped by its PID when the run ends, also on failure and on
// SIGINT or SIGTERM.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	clientModule  = "github.com/apache/pulsar-client-go"
	clientVersion = "v0.19.0"
	serviceAddr   = "localhost:6650"
	webAddr       = "localhost:8080"
)

type options struct {
	perTest         time.Duration
	noServerTimeout time.Duration
	run             *regexp.Regexp
	parallel        int
	noServerPar     int
	keep            bool
	jsonFile        string
	pkgs            []string
	excluded        string
	skipNoServer    bool
	meridianBin     string
	readyTimeout    time.Duration
	clustered       bool
}

func main() {
	os.Exit(run())
}

func run() int {
	var (
		o       options
		runExpr string
		pkgs    string
	)
	flag.DurationVar(&o.perTest, "per-test", 60*time.Second, "timeout of each test with the server")
	flag.DurationVar(&o.noServerTimeout, "no-server-timeout", 10*time.Second, "timeout of each test in the no-server pass (a test slower than this counts as needing a server)")
	flag.StringVar(&runExpr, "run", "", "run only the tests whose names match this regexp (totals are then out of the matching tests)")
	flag.IntVar(&o.parallel, "parallel", 1, "tests run at once (on one shared server: more than 1 may cause interference)")
	flag.IntVar(&o.noServerPar, "no-server-parallel", 4, "tests run at once in the no-server pass (no shared state there)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (the copy, logs, data dir)")
	flag.StringVar(&o.jsonFile, "json", "", "write a JSON report to this file")
	flag.StringVar(&pkgs, "pkg", "pulsar,pulsaradmin/...", "comma-separated packages of the client module; dir/... means every package under dir")
	flag.StringVar(&o.excluded, "excluded", "", "exclusion list (default: excluded.txt beside this program)")
	flag.StringVar(&o.meridianBin, "meridian", "", "use this meridian binary instead of building ./cmd/meridian")
	flag.BoolVar(&o.skipNoServer, "skip-no-server-pass", false, "do not run the no-server pass (then every test counts as needing a server)")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for meridian to serve /metrics")
	flag.BoolVar(&o.clustered, "clustered", false, "run the client's multi-broker suites (-tags extensible_load_manager and clustered) against a region of two brokers instead (see clustered.go); -pkg and the no-server pass do not apply")
	flag.Parse()
	if runExpr != "" {
		re, err := regexp.Compile(runExpr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compat: -run:", err)
			return 2
		}
		o.run = re
	}
	o.parallel, o.noServerPar = max(o.parallel, 1), max(o.noServerPar, 1)
	o.pkgs = strings.Split(pkgs, ",")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &runner{opts: o, log: os.Stdout}
	defer r.cleanup()
	if err := r.main(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		return 1
	}
	return 0
}

// runner holds one run's state. cleanup undoes what main set up, in
// reverse order, whatever happened.
type runner struct {
	opts     options
	log      io.Writer
	tmp      string
	copyDir  string
	meridian *process // the standalone server; nil when stopped
	closers  []func()
	mu       sync.Mutex
	results  []result
}

func (r *runner) cleanup() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

func (r *runner) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.log, format, args...)
}

// result is one test's outcome in one pass.
type result struct {
	Package  string        `json:"package"`
	Test     string        `json:"test"`
	Pass     string        `json:"pass"`   // "no-server" or "server"
	Result   string        `json:"result"` // pass, fail, skip, timeout, excluded
	Duration time.Duration `json:"durationNs"`
	Reason   string        `json:"reason,omitempty"` // first error line, or the exclusion reason
	Log      string        `json:"log,omitempty"`
}

// pkgTests is one package of the client module and its tests.
type pkgTests struct {
	name   string // relative to the module root, e.g. "pulsar"
	binary string
	all    []string // every top-level test
	tests  []string // those selected by -run
}

func (r *runner) main(ctx context.Context) error {
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	excludedFile := r.opts.excluded
	if excludedFile == "" {
		excludedFile = filepath.Join(repo, "e2e", "compat", "excluded.txt")
	}
	excluded, err := readExcluded(excludedFile)
	if err != nil {
		return err
	}

	if r.tmp, err = os.MkdirTemp("", "meridian-compat-"); err != nil {
		return err
	}
	r.closers = append(r.closers, func() {
		if r.opts.keep {
			fmt.Fprintln(os.Stderr, "compat: kept", r.tmp)
			return
		}
		os.RemoveAll(r.tmp)
	})
	r.printf("compat: work directory %s\n", r.tmp)

	src, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	r.copyDir = filepath.Join(r.tmp, "pulsar-client-go")
	if err := copyTree(src, r.copyDir); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}

	bin := r.opts.meridianBin
	if bin == "" {
		bin = filepath.Join(r.tmp, "meridian")
		r.printf("compat: building meridian\n")
		if out, err := command(ctx, repo, nil, "go", "build", "-o", bin, "./cmd/meridian").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/meridian: %w\n%s", err, out)
		}
	} else if bin, err = filepath.Abs(bin); err != nil {
		return err
	}

	if r.opts.clustered {
		return r.runClustered(ctx, bin)
	}

	var pkgs []*pkgTests
	for _, p := range r.expandPackages() {
		names, err := listTests(filepath.Join(r.copyDir, p))
		if err != nil {
			return err
		}
		if len(names) == 0 {
			continue
		}
		pt := &pkgTests{name: p, binary: filepath.Join(r.tmp, "bin", strings.ReplaceAll(p, "/", "_")+".test"), all: names}
		for _, n := range names {
			if r.opts.run == nil || r.opts.run.MatchString(n) {
				pt.tests = append(pt.tests, n)
			}
		}
		r.printf("compat: building the tests of %s (%d top-level tests, %d selected)\n", p, len(names), len(pt.tests))
		out, err := command(ctx, r.copyDir, goEnv(), "go", "test", "-c", "-o", pt.binary, "./"+p+"/").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go test -c ./%s/: %w\n%s", p, err, out)
		}
		pkgs = append(pkgs, pt)
	}
	for _, e := range excluded.unknown(pkgs) {
		r.printf("compat: warning: excluded.txt names %s, which is not a test of the module\n", e)
	}

	// Pass 1: nothing listening.
	noServer := map[string]bool{}
	if !r.opts.skipNoServer {
		for _, addr := range []string{serviceAddr, webAddr} {
			if listening(addr) {
				return fmt.Errorf("something listens on %s: the no-server pass needs 6650 and 8080 free (stop it, or give -skip-no-server-pass)", addr)
			}
		}
		r.printf("\n== no-server pass (nothing on 6650 and 8080; %v per test)\n", r.opts.noServerTimeout)
		var jobs []job
		for _, p := range pkgs {
			for _, t := range p.tests {
				if _, ok := excluded[p.name+"/"+t]; !ok {
					jobs = append(jobs, job{pkg: p, test: t})
				}
			}
		}
		for _, res := range r.runAll(ctx, jobs, "no-server", r.opts.noServerTimeout, r.opts.noServerPar) {
			if res.Result == "pass" {
				noServer[res.Package+"/"+res.Test] = true
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	// Pass 2: against meridian.
	if err := r.startMeridian(ctx, bin); err != nil {
		return err
	}
	r.setUp(ctx, bin)
	r.printf("\n== server pass (meridian standalone; %v per test)\n", r.opts.perTest)
	var jobs []job
	for _, p := range pkgs {
		for _, t := range p.tests {
			key := p.name + "/" + t
			if reason, ok := excluded[key]; ok {
				r.record(result{Package: p.name, Test: t, Pass: "server", Result: "excluded", Reason: reason})
				continue
			}
			if !noServer[key] {
				jobs = append(jobs, job{pkg: p, test: t})
			}
		}
	}
	r.runAll(ctx, jobs, "server", r.opts.perTest, r.opts.parallel)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.stopMeridian()

	return r.writeReport(r.summarize(pkgs, noServer))
}

// writeReport writes the JSON report to -json's file, if one was given.
func (r *runner) writeReport(rep report) error {
	if r.opts.jsonFile == "" {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(r.opts.jsonFile, b, 0o644)
}

func (r *runner) expandPackages() []string {
	var out []string
	for _, p := range r.opts.pkgs {
		p = strings.Trim(strings.TrimSpace(p), "/")
		dir, all := strings.CutSuffix(p, "/...")
		if !all {
			out = append(out, p)
			continue
		}
		filepath.WalkDir(filepath.Join(r.copyDir, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if m, _ := filepath.Glob(filepath.Join(path, "*_test.go")); len(m) > 0 {
				rel, _ := filepath.Rel(r.copyDir, path)
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
	}
	return out
}

// ---- running tests ----

// job is one test to run: a top-level test, or (with run) part of one.
type job struct {
	pkg  *pkgTests
	test string
	// name is what the result is called, and run the -test.run
	// expression; "" for the whole top-level test.
	name, run string
	// watch, if set, runs the test (run) and returns its result, which
	// it may turn into a failure from what it saw of the server while
	// the test ran: a check the test itself leaves out.
	watch func(ctx context.Context, run func() result) result
}

// label is the job's result name.
func (j job) label() string { return cmp.Or(j.name, j.test) }

func (r *runner) record(res result) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
}

// runAll runs the jobs, n at a time, printing one line per test as it ends.
func (r *runner) runAll(ctx context.Context, jobs []job, pass string, timeout time.Duration, n int) []result {
	out := make([]result, len(jobs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return out[:i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			run := func() result { return r.runTest(ctx, j, pass, timeout) }
			var res result
			if j.watch != nil {
				res = j.watch(ctx, run)
			} else {
				res = run()
			}
			out[i] = res
			r.record(res)
			line := fmt.Sprintf("%-8s %-58s %7.1fs", strings.ToUpper(res.Result), j.pkg.name+"/"+j.label(), res.Duration.Seconds())
			if res.Result != "pass" && res.Reason != "" {
				line += "  " + truncate(res.Reason, 140)
			}
			r.printf("%s\n", line)
		}()
	}
	wg.Wait()
	return out
}

// test2json's events.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// runTest runs one test alone in its package's directory. The binary's
// own -test.timeout makes it panic with every goroutine's stack; a hard
// deadline a little later kills it if even that does not end it.
func (r *runner) runTest(ctx context.Context, j job, pass string, timeout time.Duration) result {
	res := result{Package: j.pkg.name, Test: j.label(), Pass: pass}
	hard, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	run := cmp.Or(j.run, "^"+regexp.QuoteMeta(j.test)+"$")
	cmd := command(hard, filepath.Join(r.copyDir, j.pkg.name), goEnv(), "go", "tool", "test2json", "-t", "-p", j.pkg.name,
		j.pkg.binary, "-test.v=test2json", "-test.count=1", "-test.run", run,
		"-test.timeout", timeout.String())
	began := time.Now()
	out, _ := cmd.Output()
	res.Duration = time.Since(began)
	res.Result, res.Reason, res.Log = judge(j.test, out)
	if hard.Err() != nil && ctx.Err() == nil {
		res.Result, res.Reason = "timeout", "killed after "+(timeout+30*time.Second).String()
	}
	logDir := filepath.Join(r.tmp, "logs", pass, strings.ReplaceAll(j.pkg.name, "/", "_"))
	if err := os.MkdirAll(logDir, 0o755); err == nil {
		os.WriteFile(filepath.Join(logDir, strings.ReplaceAll(j.label(), "/", "_")+".log"), []byte(res.Log), 0o644)
	}
	if res.Result == "pass" {
		res.Log = ""
	}
	return res
}

var timedOut = regexp.MustCompile(`panic: test timed out after`)

// judge reads a test2json stream: the result of the named top-level test
// (pass, fail, skip or timeout), the first line that says why it did not
// pass, and the test's whole output.
func judge(test string, stream []byte) (resultName, reason, log string) {
	var b strings.Builder
	resultName = ""
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			b.WriteString(sc.Text() + "\n")
			continue
		}
		if e.Action == "output" {
			b.WriteString(e.Output)
		}
		if e.Test == test && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			resultName = e.Action
		}
	}
	log = b.String()
	switch {
	case timedOut.MatchString(log):
		resultName = "timeout"
	case resultName == "":
		resultName = "fail"
		if strings.Contains(log, "no tests to run") {
			reason = "the test is not in the binary (build constraints?)"
		}
	}
	if resultName == "pass" {
		return resultName, "", log
	}
	if reason == "" {
		reason = firstCause(log)
	}
	return resultName, reason, log
}

// causePatterns pick, in order of preference, the line of a failed test's
// output that best says why.
var causePatterns = []*regexp.Regexp{
	regexp.MustCompile(`^\s*Error:\s+(.*\S)`),
	regexp.MustCompile(`^\s*(panic: .*\S)`),
	regexp.MustCompile(`^\s*(--- SKIP.*)`),
	regexp.MustCompile(`^\s*\S+_test\.go:\d+: (.*\S)`),
	regexp.MustCompile(`(?i)(level=error.*msg=.*)`),
}

var (
	// testifyMore is a continuation line of a testify field (its label
	// column is blank); testifyMessages is the field with the assertion's
	// own message.
	testifyMore     = regexp.MustCompile(`^\s*\t\s*\t(.*\S)`)
	testifyMessages = regexp.MustCompile(`^\s*Messages:\s+(.*\S)`)
	testifyField    = regexp.MustCompile(`^\s*(Error Trace|Error|Test):`)
)

func firstCause(log string) string {
	lines := strings.Split(log, "\n")
	for _, re := range causePatterns {
		for i, l := range lines {
			m := re.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			cause := m[1]
			if !strings.HasPrefix(strings.TrimSpace(l), "Error:") {
				return cause
			}
			// testify: the expected and actual values continue on the
			// next lines, and Messages says what was being checked.
			for _, next := range lines[i+1:] {
				if c := testifyMore.FindStringSubmatch(next); c != nil {
					cause += " " + strings.TrimSpace(c[1])
					continue
				}
				if c := testifyMessages.FindStringSubmatch(next); c != nil {
					cause += " (" + c[1] + ")"
					continue
				}
				if !testifyField.MatchString(next) {
					break
				}
			}
			return cause
		}
	}
	return ""
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ---- meridian ----

func (r *runner) startMeridian(ctx context.Context, bin string) error {
	conf, err := r.writeConf()
	if err != nil {
		return err
	}
	args := []string{"standalone", "--data-dir", filepath.Join(r.tmp, "data"), "--config", conf}
	// As the client's Dockerfile does: basic authentication's htpasswd file.
	env := append(os.Environ(), "PULSAR_EXTRA_OPTS=-Dpulsar.auth.basic.conf="+
		filepath.Join(r.copyDir, "integration-tests", "conf", ".htpasswd"))
	p, err := r.startProcess(bin, "meridian", env, args...)
	if err != nil {
		return err
	}
	r.meridian = p
	if err := r.waitReady(ctx, p.exited); err != nil {
		r.stopMeridian()
		logText, _ := os.ReadFile(p.logPath)
		return fmt.Errorf("meridian standalone: %w; its log:\n%s", err, tail(string(logText), 40))
	}
	return nil
}

func (r *runner) waitReady(ctx context.Context, exited <-chan struct{}) error {
	deadline := time.Now().Add(r.opts.readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get("http://" + webAddr + "/metrics")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited before serving /metrics")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving http://%s/metrics after %v", webAddr, r.opts.readyTimeout)
		}
	}
}

// stopMeridian stops the standalone server (see process.stop). It may be
// called more than once.
func (r *runner) stopMeridian() {
	if r.meridian == nil {
		return
	}
	r.meridian.stop()
	r.meridian = nil
}

// writeConf writes the module's standalone.conf with its container paths
// pointed at the copy's certificates and tokens.
func (r *runner) writeConf() (string, error) {
	b, err := os.ReadFile(filepath.Join(r.copyDir, "integration-tests", "conf", "standalone.conf"))
	if err != nil {
		return "", err
	}
	it := filepath.Join(r.copyDir, "integration-tests")
	s := strings.NewReplacer("/pulsar/certs/", filepath.Join(it, "certs")+"/",
		"/pulsar/tokens/", filepath.Join(it, "tokens")+"/").Replace(string(b))
	path := filepath.Join(r.tmp, "standalone.conf")
	return path, os.WriteFile(path, []byte(s), 0o644)
}

// setupSteps are scripts/pulsar-test-service-start.sh's, as meridian admin
// commands.
var setupSteps = [][]string{
	{"tenants", "update", "public", "-r", "anonymous"},
	{"namespaces", "grant-permission", "public/default", "--actions", "produce,consume", "--role", "anonymous"},
	{"tenants", "create", "private"},
	{"namespaces", "create", "private/auth"},
	{"namespaces", "grant-permission", "private/auth", "--actions", "produce,consume", "--role", "token-principal"},
}

func (r *runner) setUp(ctx context.Context, bin string) {
	r.printf("compat: set-up steps of scripts/pulsar-test-service-start.sh\n")
	// The module's admin token: the service enforces authentication on
	// admin calls when its config says so; it is the superuser "admin".
	tok, _ := os.ReadFile(filepath.Join(r.copyDir, "integration-tests", "tokens", "admin-token"))
	r.adminSteps(ctx, bin, "http://"+webAddr, strings.TrimSpace(string(tok)), setupSteps)
}

// adminSteps runs each step as `meridian admin` against adminURL (with
// token, unless it is ""), printing how each went; a failed step is
// printed, and the tests that needed it will fail and say so.
func (r *runner) adminSteps(ctx context.Context, bin, adminURL, token string, steps [][]string) {
	for _, step := range steps {
		args := []string{"admin", "--admin-url", adminURL}
		if token != "" {
			args = append(args, "--token", token)
		}
		args = append(args, step...)
		out, err := command(ctx, r.tmp, nil, bin, args...).CombinedOutput()
		status := "ok"
		if err != nil {
			status = "FAILED: " + strings.TrimSpace(string(out))
		}
		r.printf("  meridian admin %s: %s\n", strings.Join(step, " "), status)
	}
}

// ---- reporting ----

type pkgSummary struct {
	Package     string  `json:"package"`
	Total       int     `json:"total"`
	Excluded    int     `json:"excluded"`
	NoServer    int     `json:"noServer"`
	NeedsServer int     `json:"needsServer"`
	Passed      int     `json:"passed"`
	Failed      int     `json:"failed"`
	TimedOut    int     `json:"timedOut"`
	Skipped     int     `json:"skipped"`
	Percent     float64 `json:"percent"`
}

type report struct {
	ClientVersion string       `json:"clientVersion"`
	Run           string       `json:"run,omitempty"`
	PerTest       string       `json:"perTest"`
	Packages      []pkgSummary `json:"packages"`
	Tests         []result     `json:"tests"`
}

func (r *runner) summarize(pkgs []*pkgTests, noServer map[string]bool) report {
	rep := report{ClientVersion: clientVersion, PerTest: r.opts.perTest.String()}
	if r.opts.run != nil {
		rep.Run = r.opts.run.String()
	}
	r.mu.Lock()
	results := slices.Clone(r.results)
	r.mu.Unlock()
	sort.SliceStable(results, func(i, j int) bool { return results[i].Package < results[j].Package })
	r.printf("\n== totals (pulsar-client-go %s)\n", clientVersion)
	all := pkgSummary{Package: "all"}
	for _, p := range pkgs {
		s := pkgSummary{Package: p.name, Total: len(p.tests)}
		for _, res := range results {
			if res.Package != p.name || res.Pass != "server" {
				continue
			}
			switch res.Result {
			case "excluded":
				s.Excluded++
			case "pass":
				s.Passed++
			case "skip":
				s.Skipped++
			case "timeout":
				s.TimedOut++
			default:
				s.Failed++
			}
		}
		for _, t := range p.tests {
			if noServer[p.name+"/"+t] {
				s.NoServer++
			}
		}
		s.NeedsServer = s.Total - s.Excluded - s.NoServer
		if s.NeedsServer > 0 {
			s.Percent = 100 * float64(s.Passed) / float64(s.NeedsServer)
		}
		rep.Packages = append(rep.Packages, s)
		r.printf("%-28s %s\n", p.name, s.line())
		all.Total += s.Total
		all.Excluded += s.Excluded
		all.NoServer += s.NoServer
		all.NeedsServer += s.NeedsServer
		all.Passed += s.Passed
		all.Failed += s.Failed
		all.TimedOut += s.TimedOut
		all.Skipped += s.Skipped
	}
	if all.NeedsServer > 0 {
		all.Percent = 100 * float64(all.Passed) / float64(all.NeedsServer)
	}
	if len(pkgs) > 1 {
		r.printf("%-28s %s\n", "all", all.line())
	}
	rep.Tests = results
	return rep
}

func (s pkgSummary) line() string {
	return fmt.Sprintf("passed %d / needs-server %d (%.1f%%); failed %d, timed out %d, skipped %d; excluded %d; no-server %d; total %d",
		s.Passed, s.NeedsServer, s.Percent, s.Failed, s.TimedOut, s.Skipped, s.Excluded, s.NoServer, s.Total)
}

// ---- the exclusion list ----

// exclusions maps package/TestName to the reason it is not run.
type exclusions map[string]string

// readExcluded reads lines of "package/TestName  reason"; # starts a
// comment. Every entry must give a reason.
func readExcluded(path string) (exclusions, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("exclusion list: %w", err)
	}
	defer f.Close()
	ex := exclusions{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		reason = strings.TrimSpace(reason)
		if !strings.Contains(name, "/Test") || reason == "" {
			return nil, fmt.Errorf("%s:%d: want \"package/TestName reason\", got %q", path, n, line)
		}
		if _, dup := ex[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s is listed twice", path, n, name)
		}
		ex[name] = reason
	}
	return ex, sc.Err()
}

// unknown returns the entries that name no test of the listed packages
// (a stale list), for packages that were listed.
func (ex exclusions) unknown(pkgs []*pkgTests) []string {
	known := map[string]bool{}
	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[p.name] = true
		for _, t := range p.all {
			known[p.name+"/"+t] = true
		}
	}
	var out []string
	for k := range ex {
		pkg := k[:strings.LastIndex(k, "/")]
		if listed[pkg] && !known[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ---- listing tests ----

// listTests returns the top-level tests of the package in dir, as `go
// test` finds them: func TestXxx(*testing.T) in _test.go files, where Xxx
// does not start with a lower-case letter. Every file counts, whatever its
// build constraints. They come in the order `go test` runs them, file by
// file in name order and each file's in declaration order: the suites
// leave state behind for the tests after them (pulsaradmin's
// TestNamespaces_SetSchemaCompatibilityStrategy leaves public/default
// FULL_TRANSITIVE, TestNamespaces_GetSchemaCompatibilityStrategy, next,
// resets it, and TestSchemas_CreateSchemaBySchemaInfo, later, expects
// the default).
func listTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var names []string
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		testing := "testing"
		for _, imp := range f.Imports {
			if imp.Path.Value == `"testing"` && imp.Name != nil {
				testing = imp.Name.Name
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && fn.Recv == nil && isTestName(fn.Name.Name) && takesT(fn, testing) {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names, nil
}

func isTestName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Test")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	return !('a' <= rest[0] && rest[0] <= 'z')
}

func takesT(fn *ast.FuncDecl, testingName string) bool {
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 || fn.Type.Results != nil {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == testingName && sel.Sel.Name == "T"
}

// ---- files and processes ----

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m (run from inside the meridian module): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleDir finds the client module in the module cache, downloading it
// if it is not there.
func moduleDir(ctx context.Context) (string, error) {
	out, err := command(ctx, "", nil, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(clientModule)+"@"+clientVersion)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir, nil
	}
	if out, err := command(ctx, "", nil, "go", "mod", "download", clientModule+"@"+clientVersion).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s@%s is not in the module cache and cannot be downloaded: %w\n%s", clientModule, clientVersion, err, out)
	}
	return dir, nil
}

// copyTree copies a directory; the copies are writable (the module cache
// is read-only) so that tests may write beside their sources.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm()|0o200)
	})
}

// goEnv is the environment of the go commands run in the copy: its own
// go.mod and go.sum, no workspace.
func goEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
}

func command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	if runtime.GOOS != "windows" {
		// The test binary is test2json's child: kill the whole group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	}
	return cmd
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
