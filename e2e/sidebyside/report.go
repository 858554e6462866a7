package sidebyside

import (
	"os"
	"path/filepath"

	"github.com/meridian-mq/meridian/e2e"
	"github.com/meridian-mq/meridian/e2e/plot"
)

// A section is one suite's results: Markdown (its table and what the
// figures mean) and the charts it refers to.
type section struct {
	// Suite names the section's markers in docs/BENCHMARKS.md:
	// <!-- sidebyside:Suite --> and <!-- /sidebyside:Suite -->.
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
	return e2e.WriteDocSection(filepath.Join(docsDir, "BENCHMARKS.md"), "sidebyside:"+s.Suite, s.Markdown)
}
