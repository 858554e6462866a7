package global_test

import (
	"os"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/global"
)

// TestREADMEListsUnbuiltPolicies keeps the README's table of the policies
// stored but not built in step with global.UnbuiltPolicies: a row enforced
// and removed from one must go from the other.
func TestREADMEListsUnbuiltPolicies(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "| feature | policies |")
	if start < 0 {
		t.Fatal("the README has no table of the policies stored but not built")
	}
	table := readme[start:]
	table = table[:strings.Index(table, "\n\n")]
	rows := strings.Count(table, "\n") - 1 // header and separator
	if rows != len(global.UnbuiltPolicies) {
		t.Errorf("the README lists %d policies not built, global.UnbuiltPolicies %d", rows, len(global.UnbuiltPolicies))
	}
	for _, u := range global.UnbuiltPolicies {
		if !strings.Contains(table, "| "+u.Feature+" |") {
			t.Errorf("the README does not list %q", u.Feature)
		}
	}
}
