//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// meridianBin is the meridian binary, built once for the whole run by
// TestMain and handed to every test bed; it is set before any test runs
// and never written again.
var meridianBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "meridian-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	began := time.Now()
	meridianBin, err = BuildMeridian(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("built meridian in %v\n", time.Since(began).Round(time.Millisecond))
	return m.Run()
}
