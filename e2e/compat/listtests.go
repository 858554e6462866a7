package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

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
