package admin_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// TestUnloadBundleRefusals: an unload of a bundle that is not one of the
// namespace's gets Pulsar's status and reason; a bad destination is
// refused; a bundle nobody owns, and the whole namespace, unload with 204.
func TestUnloadBundleRefusals(t *testing.T) {
	const ns = "/admin/v2/namespaces/public/default"
	webHost := url.URL{}
	if u, err := url.Parse(web.URL); err == nil {
		webHost = *u
	}
	for _, tc := range []struct {
		name, path string
		status     int
		reason     string // Pulsar's, word for word; empty: any
	}{
		{"no underscore", ns + "/0x00000000/unload", http.StatusPreconditionFailed, "Invalid bundle range: 0x00000000"},
		{"not numbers", ns + "/0xzz_0x40000000/unload", http.StatusPreconditionFailed, "Invalid bundle range: 0xzz_0x40000000"},
		{"lower boundary not a bundle's", ns + "/0x10000000_0x40000000/unload", http.StatusPreconditionFailed,
			"Cannot find bundle in the bundles list"},
		{"upper boundary not the bundle's", ns + "/0x00000000_0x50000000/unload", http.StatusPreconditionFailed,
			"Invalid upper boundary for bundle"},
		{"namespace that does not exist", "/admin/v2/namespaces/public/no-such-ns/0x00000000_0x40000000/unload",
			http.StatusNotFound, ""},
		{"unknown destination", ns + "/0x00000000_0x40000000/unload?destinationBroker=nowhere:8080",
			http.StatusPreconditionFailed, ""},
		{"namespace unload of a namespace that does not exist", "/admin/v2/namespaces/public/no-such-ns/unload",
			http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, "PUT", tc.path, "")
			var r struct {
				Reason string `json:"reason"`
			}
			if status != tc.status || json.Unmarshal([]byte(body), &r) != nil || r.Reason == "" {
				t.Fatalf("PUT %s: status %d body %s; want %d with a reason", tc.path, status, body, tc.status)
			}
			if tc.reason != "" && r.Reason != tc.reason {
				t.Fatalf("PUT %s: reason %q, want %q", tc.path, r.Reason, tc.reason)
			}
		})
	}
	// In a namespace of its own, whose bundles nobody owns: the broker
	// named as Pulsar names it (host:webPort) is found, and the unloads
	// are no-ops.
	own := "/admin/v2/namespaces/public/unload-" + uniq()
	if status, body := call(t, "PUT", own, ""); status != http.StatusNoContent {
		t.Fatalf("create namespace: %d %s", status, body)
	}
	for _, path := range []string{
		own + "/0xc0000000_0xffffffff/unload",
		own + "/0xc0000000_0xffffffff/unload?destinationBroker=" + webHost.Host,
		own + "/unload",
	} {
		if status, body := call(t, "PUT", path, ""); status != http.StatusNoContent {
			t.Fatalf("PUT %s: status %d body %s, want 204", path, status, body)
		}
	}
}
