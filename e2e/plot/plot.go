// Package plot draws the line charts that docs/BENCHMARKS.md shows as PNG
// files: the soak's resource curves and the side-by-side benchmarks'
// latency and lag curves. It wraps gonum.org/v1/plot so that every chart
// of the project has one look and one way to be written.
package plot

import (
	"errors"
	"fmt"
	"image/color"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
}

// Chart is a line chart: one line per series, on shared axes.
type Chart struct {
	Title, XLabel, YLabel string
	// LogY draws the Y axis on a log scale (for latency percentiles that
	// span orders of magnitude); every Y must then be positive.
	LogY   bool
	Series []Series
}

// ErrEmpty is returned for a chart with nothing to draw.
var ErrEmpty = errors.New("plot: chart has no points")

// palette gives each series its own colour, in a fixed order, so that a
// chart redrawn from a new run keeps its colours.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
}

// SavePNG writes the chart to path as a 16 cm × 9 cm PNG.
func (c Chart) SavePNG(path string) error {
	p := gonum.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	if c.LogY {
		p.Y.Scale = gonum.LogScale{}
		p.Y.Tick.Marker = gonum.LogTicks{Prec: -1}
	}
	drawn := 0
	for i, s := range c.Series {
		if len(s.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.Points))
		for j, pt := range s.Points {
			if c.LogY && pt.Y <= 0 {
				return fmt.Errorf("plot: %q: series %q has Y %v on a log scale", c.Title, s.Name, pt.Y)
			}
			xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot: %q: series %q: %w", c.Title, s.Name, err)
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.Name, line)
		drawn++
	}
	if drawn == 0 {
		return fmt.Errorf("%w: %q", ErrEmpty, c.Title)
	}
	if err := p.Save(16*vg.Centimeter, 9*vg.Centimeter, path); err != nil {
		return fmt.Errorf("plot: %q: %w", c.Title, err)
	}
	return nil
}
