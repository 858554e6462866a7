package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
)

// The report: per-package totals and the percentage, printed and, with
// -json, written to a file.

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
