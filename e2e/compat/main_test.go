package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestListTests(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a_test.go": `package p
import "testing"
func TestA(t *testing.T) {}
func Test(t *testing.T) {}
func Test_b(t *testing.T) {}
func Testlower(t *testing.T) {}        // not a test: lower case after Test
func TestMain(m *testing.M) {}          // not a test
func BenchmarkX(b *testing.B) {}
func TestTwo(t *testing.T, x int) {}    // wrong signature
type s struct{}
func (s) TestMethod(t *testing.T) {}    // a method
`,
		"b_test.go": `//go:build clustered

package p
import tt "testing"
func TestTagged(t *tt.T) {}
`,
		"c.go": `package p
import "testing"
func TestNotInATestFile(t *testing.T) {}
`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := listTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"TestA", "Test", "Test_b", "TestTagged"} // go test's order
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listTests = %v, want %v", got, want)
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name, stream, result, reason string
	}{
		{"pass", `{"Action":"run","Test":"TestA"}
{"Action":"output","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Test":"TestA","Elapsed":0.1}
{"Action":"pass","Elapsed":0.2}`, "pass", ""},
		{"a subtest's pass is not the test's", `{"Action":"pass","Test":"TestA/sub"}
{"Action":"output","Test":"TestA","Output":"    x_test.go:12: boom\n"}
{"Action":"fail","Test":"TestA"}`, "fail", "boom"},
		{"testify error", `{"Action":"output","Test":"TestA","Output":"        \tError Trace:\tx_test.go:10\n"}
{"Action":"output","Test":"TestA","Output":"        \tError:      \tReceived unexpected error:\n"}
{"Action":"output","Test":"TestA","Output":"        \t            \tconnection refused\n"}
{"Action":"output","Test":"TestA","Output":"        \tTest:       \tTestA\n"}
{"Action":"output","Test":"TestA","Output":"        \tMessages:   \tsend failed\n"}
{"Action":"fail","Test":"TestA"}`, "fail", "Received unexpected error: connection refused (send failed)"},
		{"skip", `{"Action":"output","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Test":"TestA"}`, "skip", "--- SKIP: TestA (0.00s)"},
		{"timeout", `{"Action":"output","Test":"TestA","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Test":"TestA"}`, "timeout", "panic: test timed out after 1s"},
		{"no result", `{"Action":"output","Output":"testing: warning: no tests to run\n"}
{"Action":"pass"}`, "fail", "the test is not in the binary (build constraints?)"},
	}
	for _, tc := range cases {
		res, reason, _ := judge("TestA", []byte(tc.stream))
		if res != tc.result || reason != tc.reason {
			t.Errorf("%s: judge = %q, %q; want %q, %q", tc.name, res, reason, tc.result, tc.reason)
		}
	}
}

func TestReadExcluded(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "x.txt")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ex, err := readExcluded(write("# c\n\npulsar/TestA  why not\npulsaradmin/pkg/admin/TestB because\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := exclusions{"pulsar/TestA": "why not", "pulsaradmin/pkg/admin/TestB": "because"}
	if !reflect.DeepEqual(ex, want) {
		t.Errorf("got %v, want %v", ex, want)
	}
	unknown := ex.unknown([]*pkgTests{{name: "pulsar", all: []string{"TestC"}}})
	if !reflect.DeepEqual(unknown, []string{"pulsar/TestA"}) {
		t.Errorf("unknown = %v", unknown)
	}
	for _, bad := range []string{"pulsar/TestA\n", "TestA reason\n", "pulsar/TestA r\npulsar/TestA r\n"} {
		if _, err := readExcluded(write(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestExcludedListIsWellFormed reads the committed list: every entry has a
// reason, none is listed twice, and none is a test a mode runs.
func TestExcludedListIsWellFormed(t *testing.T) {
	ex, err := readExcluded("excluded.txt")
	if err != nil {
		t.Fatal(err)
	}
	for name, reason := range ex {
		if !strings.HasPrefix(name, "pulsar") || len(reason) < 10 {
			t.Errorf("%s: reason %q", name, reason)
		}
		if _, ok := runElsewhere[name]; ok {
			t.Errorf("%s is excluded, but a mode of the runner runs it (runElsewhere)", name)
		}
	}
}
