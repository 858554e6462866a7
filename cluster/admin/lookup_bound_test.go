package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/broker/brokertest"
)

// TestHTTPLookupTakesAPermit: the HTTP lookups (/lookup/v2, and the
// partitioned metadata a client asks for with checkAllowAutoCreation)
// take the broker's lookup permits, the binary lookups' bound: with every
// permit held they answer 429 with Pulsar's text, and once one is given
// back they answer again. Metadata reads without checkAllowAutoCreation
// are no lookup.
func TestHTTPLookupTakesAPermit(t *testing.T) {
	cfg := brokertest.DefaultConfig()
	cfg.Service.MaxConcurrentLookups = 2
	node, srv := startBroker(t, cfg)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const (
		lookup     = "/lookup/v2/topic/persistent/public/default/bounded"
		partitions = "/admin/v2/persistent/public/default/bounded/partitions"
	)
	if status, body := get(lookup); status != http.StatusOK {
		t.Fatalf("lookup with permits free: %d %s", status, body)
	}

	permits := node.Service().LookupPermits()
	var held []func()
	for range cfg.Service.MaxConcurrentLookups {
		release, err := permits.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	refused := permits.Refused()
	for _, path := range []string{lookup, partitions + "?checkAllowAutoCreation=true"} {
		status, body := get(path)
		if status != http.StatusTooManyRequests || !strings.Contains(body, "Failed due to too many pending lookup requests") {
			t.Errorf("%s with every permit held: %d %s, want 429 and Pulsar's text", path, status, body)
		}
	}
	if n := permits.Refused() - refused; n != 2 {
		t.Errorf("%d HTTP lookups counted as refused, want 2", n)
	}
	if status, body := get(partitions); status != http.StatusOK {
		t.Errorf("stored partitioned metadata with every permit held: %d %s, want 200 (no lookup)", status, body)
	}

	held[0]()
	if status, body := get(lookup); status != http.StatusOK {
		t.Fatalf("lookup after a permit came back: %d %s", status, body)
	}
	for _, release := range held[1:] {
		release()
	}
}
