package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
)

// The exclusion list, excluded.txt: tests that are not run, each with its
// reason.

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
