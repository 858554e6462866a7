package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnknownPathsAre404 checks the mux registered without conflicts and
// answers unknown paths in Pulsar's form.
func TestUnknownPathsAre404(t *testing.T) {
	status, body := call(t, "GET", "/admin/v2/nothing-here", "")
	if status != http.StatusNotFound {
		t.Fatalf("status %d, body %s", status, body)
	}
	status, body = call(t, "GET", "/admin/v2/brokers/health", "")
	if status != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("health: %d %q", status, body)
	}
}
