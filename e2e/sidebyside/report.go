package sidebyside

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/meridian-mq/meridian/e2e/plot"
)

// A section is one suite's results: Markdown (its table and what the
// figures mean) and the charts it refers to.
type section struct {
	// Suite names the section's markers in docs/BENCHMARKS.md.
	Suite    string
	Markdown string
	Charts   []chart
}

// chart is a plot written as docs/img/<File>; the section's Markdown
// links it as img/<File>.
type chart struct {
	File string
	plot.Chart
}

// markers are the comments around a suite's part of docs/BENCHMARKS.md.
func markers(suite string) (begin, end string) {
	return "<!-- sidebyside:" + suite + " -->", "<!-- /sidebyside:" + suite + " -->"
}

// replaceSection returns doc with the suite's part (between its markers)
// replaced by body, or with the part appended when doc has no markers
// for it yet.
func replaceSection(doc, suite, body string) (string, error) {
	begin, end := markers(suite)
	part := begin + "\n" + strings.TrimSpace(body) + "\n" + end
	i := strings.Index(doc, begin)
	if i < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + part + "\n", nil
	}
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return "", fmt.Errorf("sidebyside: %s has %q without %q", "docs/BENCHMARKS.md", begin, end)
	}
	return doc[:i] + part + doc[i+j+len(end):], nil
}

// writeSection writes s's charts into docsDir/img and its Markdown into
// docsDir/BENCHMARKS.md, leaving every other part of the file alone.
func writeSection(docsDir string, s section) error {
	if err := os.MkdirAll(filepath.Join(docsDir, "img"), 0o755); err != nil {
		return err
	}
	for _, c := range s.Charts {
		if err := c.SavePNG(filepath.Join(docsDir, "img", c.File)); err != nil {
			return err
		}
	}
	path := filepath.Join(docsDir, "BENCHMARKS.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := replaceSection(string(doc), s.Suite, s.Markdown)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(updated), 0o644)
}
