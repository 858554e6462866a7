package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMistypedCommandLineExits1 runs the binary as a user would: a
// mistyped verb or flag exits 1 with a suggestion, and nothing is sent.
func TestMistypedCommandLineExits1(t *testing.T) {
	f := newFakeAdmin(t, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "topics", "peek-mesages", "x"}, `unknown command "peek-mesages" for "meridian admin topics"; did you mean peek-messages?`},
		{[]string{"admin", "topcs", "list", "public/default"}, "did you mean topics?"},
		{[]string{"admin", "topics", "peek-messages", "x", "--subscriptoin", "s"}, "unknown flag: --subscriptoin; did you mean --subscription?"},
		{[]string{"admin", "namespaces", "set-message-ttl", "public/default", "-tll", "1"}, "did you mean -ttl or --ttl?"},
		{[]string{"admin", "nothing-like-it"}, "'meridian admin --help' lists its commands"},
	} {
		cmd := exec.Command(os.Args[0], append(tc.args, "--admin-url", f.URL)...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("meridian %s: %v, want exit status 1; output:\n%s", strings.Join(tc.args, " "), err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("meridian %s: output %q lacks %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	if got := f.requests(); len(got) != 0 {
		t.Errorf("mistyped command lines sent requests: %+v", got)
	}
	// A group alone prints its help and succeeds, as pulsar-admin's does.
	if out, err := runAdmin(t, f.URL, "topics"); err != nil || !strings.Contains(out, "peek-messages") {
		t.Errorf("admin topics: %v, output %q", err, out)
	}
}
