package plot

import (
	"bytes"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestSavePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	c := Chart{Title: "rss", XLabel: "minutes", YLabel: "MiB", Series: []Series{
		{Name: "broker", Points: []Point{{0, 40}, {1, 42}, {2, 41}}},
		{Name: "bookie", Points: []Point{{0, 30}, {1, 31}, {2, 33}}},
	}}
	if err := c.SavePNG(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 150 {
		t.Errorf("image is %v, want a readable size", b)
	}
}

func TestSavePNGRejects(t *testing.T) {
	dir := t.TempDir()
	if err := (Chart{Title: "empty", Series: []Series{{Name: "none"}}}).SavePNG(filepath.Join(dir, "a.png")); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty chart: %v, want ErrEmpty", err)
	}
	logZero := Chart{Title: "p99", LogY: true, Series: []Series{{Name: "x", Points: []Point{{0, 0}}}}}
	if err := logZero.SavePNG(filepath.Join(dir, "b.png")); err == nil {
		t.Error("Y 0 on a log scale was drawn, want an error")
	}
}
