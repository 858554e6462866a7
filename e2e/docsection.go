package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteDocSection replaces the part of the Markdown file path between
// the markers <!-- name --> and <!-- /name --> (each alone on its line)
// with body, leaving the rest of the file alone, or appends the part with
// its markers when the file has none yet. The soak and the side-by-side
// benchmarks write their figures into docs/BENCHMARKS.md so.
func WriteDocSection(path, name, body string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := replaceDocSection(string(doc), name, body)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return os.WriteFile(path, []byte(updated), 0o644)
}

// replaceDocSection is WriteDocSection on the text doc.
func replaceDocSection(doc, name, body string) (string, error) {
	begin, end := "<!-- "+name+" -->\n", "<!-- /"+name+" -->"
	part := begin + strings.TrimSpace(body) + "\n" + end
	i := strings.Index("\n"+doc, "\n"+begin)
	if i < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + part + "\n", nil
	}
	j := strings.Index(doc[i:], "\n"+end)
	if j < 0 {
		return "", fmt.Errorf("%q without %q", strings.TrimSpace(begin), end)
	}
	return doc[:i] + part + doc[i+j+1+len(end):], nil
}
