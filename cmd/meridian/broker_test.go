package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBrokerAndStandaloneFlagErrors: a command that cannot run says which
// flag is missing or unsupported, before it starts anything.
func TestBrokerAndStandaloneFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"broker", "--etcd", "http://127.0.0.1:1", "--advertised-address", "h"}, "--region is required"},
		{[]string{"broker", "--region", "r", "--advertised-address", "h"}, "--etcd is required"},
		{[]string{"broker", "--region", "r", "--etcd", "http://127.0.0.1:1"}, "--advertised-address is required"},
		{[]string{"standalone", "--config", "x.conf"}, "--config is not supported yet"},
		{[]string{"standalone", "--no-such-flag"}, "unknown flag"},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("meridian %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
