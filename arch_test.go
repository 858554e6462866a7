// Package meridian_test holds the architecture tests: every package has a doc
// comment, and imports between Meridian's packages follow the table in
// DESIGN.md §2, so that storage never depends on the broker, the replicator
// never depends on the broker, and nothing depends on cmd or e2e.
package meridian_test

import (
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
// its own row. Only non-test files are checked: tests may wire real parts
// together across layers (a ledger test may start real bookies).
var allowedImports = map[string][]string{
	"topology":               nil,
	"telemetry":              nil,
	"cluster/wire":           {"telemetry"},
	"cluster/meta":           {"telemetry"},
	"cluster/bookie/bkproto": {"telemetry"},
	"cluster/bookie":         {"cluster/bookie/bkproto", "cluster/meta", "topology", "telemetry"},
	"cluster/ledger":         {"cluster/bookie/bkproto", "cluster/meta", "topology", "telemetry"},
	"cluster/mledger":        {"cluster/ledger", "cluster/wire", "cluster/meta", "telemetry"},
	"global":                 {"cluster/meta", "topology", "telemetry"},
	"cluster/broker": {"topology", "telemetry", "cluster/wire", "cluster/meta", "cluster/bookie/bkproto",
		"cluster/bookie", "cluster/ledger", "cluster/mledger", "global"},
	"cluster/admin": {"cluster/broker", "topology", "telemetry", "cluster/wire", "cluster/meta",
		"cluster/bookie/bkproto", "cluster/bookie", "cluster/ledger", "cluster/mledger", "global"},
	// The region assembly wires a broker with its admin API, as cmd does;
	// nothing but cmd and tests imports it.
	"cluster/broker/standalone": {"cluster/admin", "cluster/broker", "topology", "telemetry", "cluster/wire",
		"cluster/meta", "cluster/bookie/bkproto", "cluster/bookie", "cluster/ledger", "cluster/mledger", "global", "replicator"},
	"replicator": {"cluster/wire", "cluster/ledger", "cluster/mledger", "cluster/meta", "global", "topology", "telemetry"},
	"cmd":        {"*"},
	"e2e":        {"*"},
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

type goPackage struct {
	dir     string // relative to the module root, slash-separated
	hasDoc  bool
	imports map[string]string // import path (of ours, module-relative) -> file that imports it
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
			pkg = &goPackage{dir: dir, imports: map[string]string{}}
			byDir[dir] = pkg
			testOnly[dir] = true
		}
		isTest := strings.HasSuffix(path, "_test.go")
		if !isTest && testOnly[dir] {
			// The first non-test file: doc comments of test files no longer count.
			testOnly[dir] = false
			pkg.hasDoc = false
		}
		if isTest && !testOnly[dir] {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			pkg.hasDoc = true
		}
		if isTest {
			return nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				pkg.imports[rel] = path
			}
		}
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
		allowed := allowedImports[r]
		for imp, file := range p.imports {
			target := row(imp)
			switch {
			case target == "cmd" || target == "e2e":
				t.Errorf("%s imports %s: nothing imports cmd or e2e", file, imp)
			case target == r, slices.Contains(allowed, "*"), slices.Contains(allowed, target):
			default:
				t.Errorf("%s imports %s: %s may import only %v (DESIGN §2)", file, imp, r, allowed)
			}
		}
	}
}

func TestRowsCoverTheirSubpackages(t *testing.T) {
	for pkg, want := range map[string]string{
		"cluster/wire/pb":        "cluster/wire",
		"cluster/bookie/bkproto": "cluster/bookie/bkproto",
		"cluster/bookie":         "cluster/bookie",
		"replicator/remote":      "replicator",
		"cmd/meridian":           "cmd",
		"cluster/wirex":          "",
		"internal/x":             "",
	} {
		if got := row(pkg); got != want {
			t.Errorf("row(%q) = %q, want %q", pkg, got, want)
		}
	}
}
