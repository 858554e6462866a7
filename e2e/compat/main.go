// Command compat measures Meridian's compatibility with Pulsar's own Go
// client: it runs the test suite of pulsar-client-go v0.19.0 (the pulsar/
// package and the pulsaradmin/ packages) against a real `meridian
// standalone`, one top-level test at a time, and prints pass, fail or skip
// for each with totals.
//
//	go run ./e2e/compat                       # every package, every test
//	go run ./e2e/compat -pkg pulsar -run 'TestProducer|TestConsumer' -per-test 30s
//	go run ./e2e/compat -clustered            # the multi-broker suites, on two brokers
//	go run ./e2e/compat -bluegreen            # the blue-green migration suite, on two regions
//
// -clustered runs the suites that need several brokers instead, against a
// region of two that the runner starts; clustered.go says how. -bluegreen
// runs the cluster-migration suite against two regions of two brokers
// each; bluegreen.go says how.
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
//
// # Where things are
//
// main.go holds the flags and the run's steps in order (runner.main).
// listtests.go finds the tests (step 2), excluded.go reads excluded.txt,
// meridian.go starts and sets up the standalone (step 4), runtests.go runs
// each test and judges it (steps 3 and 5), and report.go counts the
// results. files.go holds the copy of the module and the commands run in
// it; clustered.go holds the multi-broker modes and the -clustered run,
// bluegreen.go the -bluegreen run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
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
	blueGreen       bool
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
	flag.BoolVar(&o.blueGreen, "bluegreen", false, "run the client's blue-green migration suite (-tags extensible_load_manager) against two regions of two brokers each instead (see bluegreen.go); -pkg and the no-server pass do not apply")
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
	Note     string        `json:"note,omitempty"`   // how the test runs here unlike upstream
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
	for name, reason := range runElsewhere {
		if _, dup := excluded[name]; dup {
			return fmt.Errorf("%s lists %s, which a mode of the runner runs: %s", excludedFile, name, reason)
		}
		excluded[name] = reason
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

	switch {
	case r.opts.clustered && r.opts.blueGreen:
		return errors.New("-clustered and -bluegreen are two runs: give one")
	case r.opts.clustered:
		return r.runSuites(ctx, bin, clusteredMode)
	case r.opts.blueGreen:
		m, err := blueGreenMode()
		if err != nil {
			return err
		}
		return r.runSuites(ctx, bin, m)
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
