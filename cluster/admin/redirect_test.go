package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

// TestRedirectToOwner starts a second broker in the shared region and asks
// it about a topic the first broker serves: topic operations answer 307 to
// the owner's web URL, with the same path and query, as Pulsar redirects
// admin calls; metadata reads answer directly.
func TestRedirectToOwner(t *testing.T) {
	// The first broker creates (and so owns) the topic's bundle, before the
	// second starts: a lookup of an unowned bundle places it on the
	// least-loaded live broker, which could otherwise be the second.
	const path = "/admin/v2/persistent/public/default/redirected"
	if status, body := call(t, "PUT", path, ""); status != http.StatusNoContent {
		t.Fatalf("create: %d %s", status, body)
	}
	_, second := startBroker(t, brokertest.DefaultConfig())

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer noFollow.CloseIdleConnections()
	get := func(p string) *http.Response {
		resp, err := noFollow.Get(second.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := get(path + "/stats?getPreciseBacklog=false")
	want := webURL() + path + "/stats?getPreciseBacklog=false"
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want {
		t.Fatalf("stats on the other broker: %d Location %q; want 307 to %s", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	// A lookup answers the owner, without a redirect.
	resp, err := noFollow.Get(second.URL + "/lookup/v2/topic/persistent/public/default/redirected")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), region.ServiceURL()) {
		t.Fatalf("lookup on the other broker: %d %s", resp.StatusCode, b)
	}
	if resp := get("/admin/v2/namespaces/public/default"); resp.StatusCode != http.StatusOK {
		t.Fatalf("policies on the other broker: %d", resp.StatusCode)
	}
	if status, body := call(t, "DELETE", path, ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
}
