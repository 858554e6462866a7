package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMultiLetterShorthands: pulsar-admin's short flags of more than one
// letter work, wherever they stand, as their long flags do.
func TestMultiLetterShorthands(t *testing.T) {
	f := newFakeAdmin(t, nil)
	if _, err := runAdmin(t, f.URL, "namespaces", "set-message-ttl", "public/default", "-ttl", "120"); err != nil {
		t.Fatal(err)
	}
	if _, err := runAdmin(t, f.URL, "topics", "set-backlog-quota", "-lt", "3600", "t", "-p", "producer_exception", "-t", "message_age"); err != nil {
		t.Fatal(err)
	}
	got := f.requests()
	if len(got) != 2 {
		t.Fatalf("requests %+v, want 2", got)
	}
	if got[0].Path != "/admin/v2/namespaces/public/default/messageTTL" || got[0].Body != "120" {
		t.Errorf("-ttl 120 sent %s %s", got[0].Path, got[0].Body)
	}
	if got[1].Path != "/admin/v2/persistent/public/default/t/backlogQuota" || got[1].Query != "backlogQuotaType=message_age" ||
		!jsonEqual(t, got[1].Body, `{"limitSize":-1,"limitTime":3600,"policy":"producer_exception"}`) {
		t.Errorf("-lt 3600 sent %s?%s %s", got[1].Path, got[1].Query, got[1].Body)
	}
}

// TestAdminPrintsServerWarnings: every Warning header of an answer is
// printed to stderr, its text unquoted, and the command still succeeds.
func TestAdminPrintsServerWarnings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "offload is not built: the policy is stored, and no data is offloaded"`)
		w.Header().Add("Warning", `299 meridian "a \"quoted\" word" "Sat, 05 Dec 2026 22:00:00 GMT"`)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	out, stderr, err := runAdminStreams(t, srv.URL, "topics", "set-max-message-size", "t", "-m", "1024")
	if err != nil || out != "" {
		t.Fatalf("%q, %v", out, err)
	}
	want := "meridian: warning: offload is not built: the policy is stored, and no data is offloaded\n" +
		"meridian: warning: a \"quoted\" word\n"
	if stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for in, want := range map[string]string{
		`299 - "plain"`:   "plain",
		`no quotes`:       "no quotes",
		`299 - "unclosed`: `299 - "unclosed`,
	} {
		if got := warningText(in); got != want {
			t.Errorf("warningText(%q) = %q, want %q", in, got, want)
		}
	}
}
