package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: exit status 0 on a 2xx answer; an error naming the status
// and the body on any other, and on a port where nothing listens.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status.html" {
			w.Write([]byte("OK"))
			return
		}
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	t.Cleanup(srv.Close)
	cases := []struct{ url, wantErr string }{
		{srv.URL + "/status.html", ""},
		{srv.URL + "/ready", "503 Service Unavailable draining"},
		{closed.URL + "/health", "connection refused"},
	}
	for _, c := range cases {
		_, err := runClient(context.Background(), "probe", c.url)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("probe %s: %v, want success", c.url, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("probe %s: %v, want an error with %q", c.url, err, c.wantErr)
		}
	}
}
