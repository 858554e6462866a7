package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Running the client's tests: each alone, as its test binary with
// -test.run and -test.timeout, read through test2json, and judged pass,
// fail, skip or timeout with the line that best says why.

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
	// note, if set, is kept with the result (result.Note).
	note string
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
			res.Note = j.note
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
