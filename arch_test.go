// Package meridian_test holds the architecture tests: every package has a doc
// comment, and imports between Meridian's packages follow the table in
// DESIGN.md §2, so that storage never depends on the broker, the replicator
// never depends on the broker, nothing below the assembly (cluster/node)
// depends on it, and nothing depends on cmd or e2e. Outside modules stay
// behind the package that wraps them (etcd behind cluster/meta, the Pulsar
// client in cmd and e2e, the metrics endpoint in telemetry), and test kits
// stay in tests.
package meridian_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/meridian-mq/meridian"

// allowedImports is DESIGN §2's import table. A package belongs to the row of
// its longest matching prefix (cluster/bookie/bkproto has its own row; any
// other subpackage shares its parent's row), and may always import packages of
// its own row. Test files are held to their package's row too; non-test files
// also to the tighter rules below it.
var allowedImports = map[string][]string{
	"topology":               nil,
	"telemetry":              nil,
	"cluster/wire":           {"telemetry"},
	"cluster/meta":           {"telemetry"},
	"cluster/bookie/bkproto": {"telemetry"},
	"cluster/linger":         nil, // closing a connection without losing its last frames
	"cluster/bookie":         {"cluster/bookie/bkproto", "cluster/linger", "cluster/meta", "topology", "telemetry"},
	"cluster/ledger":         {"cluster/bookie/bkproto", "cluster/meta", "topology", "telemetry"},
	"cluster/mledger":        {"cluster/ledger", "cluster/wire", "cluster/meta", "telemetry"},
	"global":                 {"cluster/meta", "topology", "telemetry"},
	// Auto-recovery (the auditor and the replication workers) re-replicates
	// through the ledger client. The bookie may not import it (nor the
	// ledger client): the keys a bookie shares with it live in bkproto.
	// The admin API serves its bookie administration, and the assembly runs
	// it beside the bookies.
	"cluster/autorecovery": {"cluster/ledger", "cluster/bookie/bkproto", "cluster/meta", "topology", "telemetry"},
	// The load manager drives the broker through an interface of its own
	// (loadmgr.Topics), so it never imports the broker, nor storage.
	"cluster/broker/loadmgr": {"cluster/wire", "cluster/meta", "global", "topology", "telemetry"},
	// The logic of replicated subscriptions, with no I/O: the broker feeds
	// it entries and moves the states it makes.
	"cluster/broker/replsub": {"cluster/mledger"},
	"cluster/broker": {"cluster/broker/loadmgr", "cluster/broker/replsub", "cluster/linger", "topology", "telemetry", "cluster/wire", "cluster/meta", "cluster/bookie/bkproto",
		"cluster/bookie", "cluster/ledger", "cluster/mledger", "global"},
	// brokertest starts a broker for the tests of the broker and of the admin
	// API, on in-memory bookies: code that only tests import, so it is held to
	// the broker's row as the tests are, not to the broker code's tighter rule.
	"cluster/broker/brokertest": {"cluster/broker", "cluster/broker/loadmgr", "topology", "telemetry", "cluster/wire", "cluster/meta",
		"cluster/bookie/bkproto", "cluster/ledger", "cluster/mledger", "global"},
	"cluster/admin": {"cluster/broker", "cluster/broker/loadmgr", "cluster/autorecovery", "topology", "telemetry", "cluster/wire", "cluster/meta",
		"cluster/bookie/bkproto", "cluster/bookie", "cluster/ledger", "cluster/mledger", "global"},
	"replicator": {"cluster/wire", "cluster/ledger", "cluster/mledger", "cluster/meta", "global", "topology", "telemetry"},
	// The assembly of a process's parts sits above all of them; nothing but
	// cmd and e2e imports it.
	"cluster/node": {"cluster/admin", "cluster/autorecovery", "cluster/broker", "cluster/broker/loadmgr", "cluster/broker/replsub", "replicator", "topology", "telemetry", "cluster/wire",
		"cluster/meta", "cluster/bookie/bkproto", "cluster/bookie", "cluster/ledger", "cluster/mledger", "global"},
	// `meridian drill` (issue 31): a client of the admin API and of the
	// Pulsar protocol, through pulsar-client-go as every tool of ours is;
	// it imports nothing of ours, and cmd and e2e import it.
	"drill": nil,
	"cmd":   {"*"},
	"e2e":   {"*"},
	// The test kits (see kits): testkit imports nothing of ours, metatest
	// (the embedded-etcd harness) only the metadata store and testkit.
	"testkit":               nil,
	"cluster/meta/metatest": {"cluster/meta", "telemetry", "testkit"},
}

// kits are the packages of test support, each with the row it serves: the
// tests of a row may import a kit when the row may import what the kit
// serves ("" for a kit that serves every row, tests of topology and
// telemetry included). No row lists a kit, so no code imports one, but
// another kit's code may, and cmd's and e2e's.
var kits = map[string]string{
	"testkit":               "",
	"cluster/meta/metatest": "cluster/meta",
}

// notInCode narrows a row for non-test files: the broker reaches storage only
// through the managed ledger (the ledger client and the bookies are wired
// in by the assembly), while its tests may start real parts below it.
var notInCode = map[string][]string{
	"cluster/broker": {"cluster/bookie", "cluster/ledger", "cluster/bookie/bkproto"},
}

// testsMayAlsoImport are the few imports a package's tests need beyond its
// row: the ledger client's integration tests and the managed ledger's
// real-bookie benchmark, and auto-recovery's tests, run them against real
// bookie servers, which their code never imports; the broker's and the admin API's tests start brokers
// with brokertest.
var testsMayAlsoImport = map[string][]string{
	"cluster/ledger":       {"cluster/bookie"},
	"cluster/autorecovery": {"cluster/bookie"},
	"cluster/mledger":      {"cluster/bookie", "cluster/bookie/bkproto"},
	"cluster/broker":       {"cluster/broker/brokertest"},
	"cluster/admin":        {"cluster/broker/brokertest"},
}

// externalOnlyIn says which rows alone may import an outside module (by
// import path prefix) in non-test files, so that each dependency stays
// behind the one package that wraps it.
var externalOnlyIn = map[string][]string{
	"go.etcd.io/":                         {"cluster/meta"},
	"github.com/apache/pulsar-client-go/": {"cmd", "e2e", "drill"},
	"gonum.org/v1/plot":                   {"e2e"},
	"github.com/prometheus/client_golang/prometheus/promhttp": {"telemetry", "cluster/node"},
}

// codeOnlyIn says which rows alone may call a function in non-test files:
// one Prometheus registry per region, built by telemetry for the assembly;
// every other package declares its metrics and takes a Registerer.
var codeOnlyIn = map[string][]string{
	"prometheus.NewRegistry(": {"telemetry", "cluster/node"},
}

// row returns the import-table row a package (path relative to the module)
// belongs to, or "" when no row covers it.
func row(pkg string) string {
	best := ""
	for r := range allowedImports {
		if (pkg == r || strings.HasPrefix(pkg, r+"/")) && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// goFile is one Go file's imports (of ours module-relative, others as
// they are) and whether it is a test file.
type goFile struct {
	path    string
	isTest  bool
	imports []string
	source  string // the text, for calls that the rules name
}

type goPackage struct {
	dir    string // relative to the module root, slash-separated
	hasDoc bool
	files  []goFile
}

func loadPackages(t *testing.T) []goPackage {
	t.Helper()
	byDir := map[string]*goPackage{}
	testOnly := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			return nil // this file: the module root holds no package
		}
		pkg := byDir[dir]
		if pkg == nil {
			pkg = &goPackage{dir: dir}
			byDir[dir] = pkg
			testOnly[dir] = true
		}
		isTest := strings.HasSuffix(path, "_test.go")
		if !isTest && testOnly[dir] {
			// The first non-test file: doc comments of test files no longer count.
			testOnly[dir] = false
			pkg.hasDoc = false
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" && (!isTest || testOnly[dir]) {
			pkg.hasDoc = true
		}
		file := goFile{path: filepath.ToSlash(path), isTest: isTest, source: string(src)}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				p = rel
			}
			file.imports = append(file.imports, p)
		}
		pkg.files = append(pkg.files, file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []goPackage
	for _, p := range byDir {
		pkgs = append(pkgs, *p)
	}
	slices.SortFunc(pkgs, func(a, b goPackage) int { return strings.Compare(a.dir, b.dir) })
	return pkgs
}

// ours reports whether an import path (as goFile keeps it) is one of
// Meridian's packages.
func ours(imp string) bool {
	return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && row(imp) != ""
}

func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range loadPackages(t) {
		if !p.hasDoc {
			t.Errorf("package %s has no doc comment: add one (\"// Package x ...\") saying what it is for", p.dir)
		}
	}
}

func TestImportsFollowTheDesignTable(t *testing.T) {
	if _, err := os.Stat("go.mod"); err != nil {
		t.Fatal("run from the module root:", err)
	}
	for _, p := range loadPackages(t) {
		r := row(p.dir)
		if r == "" {
			t.Errorf("package %s is in no row of DESIGN §2's import table: place it under a listed folder or extend the table", p.dir)
			continue
		}
		for _, err := range importErrors(r, p.files) {
			t.Error(err)
		}
	}
}

// importErrors checks files of a package in row r against the rules above.
func importErrors(r string, files []goFile) []string {
	var errs []string
	allowed := allowedImports[r]
	for _, f := range files {
		for _, imp := range f.imports {
			if !ours(imp) {
				for prefix, rows := range externalOnlyIn {
					if strings.HasPrefix(imp, prefix) && !f.isTest && !slices.Contains(rows, r) {
						errs = append(errs, fmt.Sprintf("%s imports %s: only %v may (the one package that wraps it)", f.path, imp, rows))
					}
				}
				continue
			}
			target := row(imp)
			switch {
			case (target == "cmd" || target == "e2e") && target != r:
				// The test bed's own tools (its benchmarks, its plots)
				// build on the bed; nothing outside it does.
				errs = append(errs, fmt.Sprintf("%s imports %s: nothing imports cmd or e2e", f.path, imp))
			case target == "cluster/node" && r != "cluster/node" && !slices.Contains(allowed, "*"):
				errs = append(errs, fmt.Sprintf("%s imports %s: only cmd and e2e import the assembly", f.path, imp))
			case !f.isTest && slices.Contains(notInCode[r], target):
				errs = append(errs, fmt.Sprintf("%s imports %s: %s's code may not (its tests may): %v", f.path, imp, r, notInCode[r]))
			case target == r, slices.Contains(allowed, "*"), slices.Contains(allowed, target):
			case f.isTest && slices.Contains(testsMayAlsoImport[r], target):
			case f.isTest && kitServes(target, r, allowed):
			default:
				errs = append(errs, fmt.Sprintf("%s imports %s: %s may import only %v (DESIGN §2)", f.path, imp, r, allowed))
			}
		}
		if f.isTest {
			continue
		}
		for call, rows := range codeOnlyIn {
			if strings.Contains(f.source, call) && !slices.Contains(rows, r) {
				errs = append(errs, fmt.Sprintf("%s calls %s: only %v may; take a prometheus.Registerer instead", f.path, call, rows))
			}
		}
	}
	slices.Sort(errs)
	return errs
}

// kitServes reports whether kit is a test kit that the tests of row r, which
// may import allowed, may import.
func kitServes(kit, r string, allowed []string) bool {
	serves, ok := kits[kit]
	return ok && (serves == "" || serves == r || slices.Contains(allowed, serves))
}

// TestImportRulesCatch shows the rules fail where they must: a broker test
// that imports the admin API above it, broker code that reaches the ledger
// client, etcd outside cluster/meta, pulsar-client-go outside cmd and e2e, a
// registry built outside telemetry, a package below the assembly that
// imports it, a test kit imported by code or by the tests of a row that may
// not import what it serves, and a kit that imports more than its row.
func TestImportRulesCatch(t *testing.T) {
	for _, tc := range []struct {
		row  string
		file goFile
	}{
		{"cluster/broker", goFile{path: "cluster/broker/x_test.go", isTest: true, imports: []string{"cluster/admin"}}},
		{"cluster/broker", goFile{path: "cluster/broker/x.go", imports: []string{"cluster/ledger"}}},
		{"cluster/mledger", goFile{path: "cluster/mledger/x.go", imports: []string{"go.etcd.io/etcd/client/v3"}}},
		{"cluster/broker", goFile{path: "cluster/broker/x.go", imports: []string{"github.com/apache/pulsar-client-go/pulsar"}}},
		{"cluster/bookie", goFile{path: "cluster/bookie/x.go", source: "reg := prometheus.NewRegistry()"}},
		{"cluster/admin", goFile{path: "cluster/admin/x.go", imports: []string{"github.com/prometheus/client_golang/prometheus/promhttp"}}},
		{"cluster/admin", goFile{path: "cluster/admin/x_test.go", isTest: true, imports: []string{"cluster/node"}}},
		{"cluster/mledger", goFile{path: "cluster/mledger/x_test.go", isTest: true, imports: []string{"cluster/broker"}}},
		{"cluster/bookie", goFile{path: "cluster/bookie/x_test.go", isTest: true, imports: []string{"cluster/broker/brokertest"}}},
		{"cluster/wire", goFile{path: "cluster/wire/x_test.go", isTest: true, imports: []string{"cluster/meta/metatest"}}},
		{"global", goFile{path: "global/x.go", imports: []string{"cluster/meta/metatest"}}},
		{"topology", goFile{path: "topology/x.go", imports: []string{"testkit"}}},
		{"testkit", goFile{path: "testkit/x.go", imports: []string{"cluster/meta"}}},
	} {
		if errs := importErrors(tc.row, []goFile{tc.file}); len(errs) == 0 {
			t.Errorf("%s importing %v (source %q) passed the rules", tc.file.path, tc.file.imports, tc.file.source)
		}
	}
	for _, ok := range []struct {
		row  string
		file goFile
	}{
		{"cluster/broker", goFile{path: "cluster/broker/x_test.go", isTest: true, imports: []string{"cluster/ledger", "github.com/apache/pulsar-client-go/pulsar"}}},
		{"cluster/ledger", goFile{path: "cluster/ledger/x_test.go", isTest: true, imports: []string{"cluster/bookie"}}},
		{"cluster/node", goFile{path: "cluster/node/x.go", imports: []string{"cluster/admin", "replicator"}, source: "prometheus.NewRegistry()"}},
		{"topology", goFile{path: "topology/x_test.go", isTest: true, imports: []string{"testkit"}}},
		{"global", goFile{path: "global/x_test.go", isTest: true, imports: []string{"cluster/meta/metatest", "testkit"}}},
		{"cluster/meta/metatest", goFile{path: "cluster/meta/metatest/x.go", imports: []string{"cluster/meta", "testkit"}}},
	} {
		if errs := importErrors(ok.row, []goFile{ok.file}); len(errs) != 0 {
			t.Errorf("%s: %v", ok.file.path, errs)
		}
	}
}

func TestRowsCoverTheirSubpackages(t *testing.T) {
	for pkg, want := range map[string]string{
		"cluster/wire/pb":           "cluster/wire",
		"cluster/bookie/bkproto":    "cluster/bookie/bkproto",
		"cluster/bookie":            "cluster/bookie",
		"replicator/remote":         "replicator",
		"cmd/meridian":              "cmd",
		"cluster/node":              "cluster/node",
		"cluster/broker/brokertest": "cluster/broker/brokertest",
		"cluster/meta/metatest":     "cluster/meta/metatest",
		"testkit":                   "testkit",
		"testkitx":                  "",
		"cluster/wirex":             "",
		"internal/x":                "",
	} {
		if got := row(pkg); got != want {
			t.Errorf("row(%q) = %q, want %q", pkg, got, want)
		}
	}
}
