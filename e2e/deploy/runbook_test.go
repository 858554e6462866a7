package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunbookCoversEveryAlert: docs/operations.md's alert runbook has one
// entry per rule of deploy/prometheus/alerts.yml, each saying what the
// alert means, what to check and what to do, and no entry for an alert
// that no rule raises.
func TestRunbookCoversEveryAlert(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, runbook, ok := strings.Cut(string(b), "\n### Alert runbook\n")
	if !ok {
		t.Fatal("docs/operations.md has no section ### Alert runbook")
	}
	if end := strings.Index(runbook, "\n## "); end >= 0 {
		runbook = runbook[:end]
	}
	entries := map[string]string{}
	for _, part := range strings.Split(runbook, "\n#### ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		entries[strings.TrimSpace(name)] = body
	}
	rules := ruleExprs(t)
	for alert := range rules {
		body, ok := entries[alert]
		if !ok {
			t.Errorf("alert %s has no runbook entry (#### %s)", alert, alert)
			continue
		}
		for _, part := range []string{"- **Means**:", "- **Check**:", "- **Do**:"} {
			if !strings.Contains(body, part) {
				t.Errorf("runbook entry %s has no %q", alert, part)
			}
		}
	}
	for name := range entries {
		if _, ok := rules[name]; !ok {
			t.Errorf("runbook entry %s names no alert of deploy/prometheus/alerts.yml", name)
		}
	}
}
