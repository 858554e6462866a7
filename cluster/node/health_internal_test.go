package node

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStatusPageWhileDraining: a broker that has begun its stop's drain
// answers /status.html with 503, so that a Service or load balancer sends
// it no new clients, and says why.
func TestStatusPageWhileDraining(t *testing.T) {
	b := &Broker{id: "b1:6650"}
	for _, c := range []struct {
		draining bool
		code     int
	}{{false, http.StatusOK}, {true, http.StatusServiceUnavailable}} {
		b.draining.Store(c.draining)
		rec := httptest.NewRecorder()
		b.statusPage(rec, httptest.NewRequest("GET", "/status.html", nil))
		if rec.Code != c.code {
			t.Errorf("draining %v: %d %q, want %d", c.draining, rec.Code, rec.Body.String(), c.code)
		}
	}
}
