//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// buildTagsEnv names the environment variable whose value, when set, is
// the build tags of the meridian binary the run uses: TestBrokenVariants
// sets it to build a broken variant.
const buildTagsEnv = "MERIDIAN_E2E_BUILD_TAGS"

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
	tags := os.Getenv(buildTagsEnv)
	meridianBin, err = BuildMeridianTags(dir, tags)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("built meridian (tags %q) in %v\n", tags, time.Since(began).Round(time.Millisecond))
	return m.Run()
}
