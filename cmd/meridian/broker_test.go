package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerAndStandaloneFlagErrors: a command that cannot run says which
// flag is missing or unsupported, before it starts anything.
func TestBrokerAndStandaloneFlagErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(bad, []byte("# broker.conf\nclusterName=r\nbrokerServicePort=sixty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// broker would start but for the flags each case adds.
	broker := []string{"broker", "--region", "r", "--etcd", "http://127.0.0.1:1", "--advertised-address", "h"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"broker", "--etcd", "http://127.0.0.1:1", "--advertised-address", "h"}, "--region is required"},
		{[]string{"broker", "--region", "r", "--advertised-address", "h"}, "--etcd is required"},
		{[]string{"broker", "--region", "r", "--etcd", "http://127.0.0.1:1"}, "--advertised-address or --advertised-listeners is required"},
		{[]string{"broker", "--region", "r", "--etcd", "http://127.0.0.1:1", "--advertised-listeners", "internal:pulsar://10.0.0.5:6650",
			"--internal-listener-name", "private"}, `internalListenerName "private" is not one of advertisedListeners' listeners`},
		{[]string{"standalone", "--config", filepath.Join(t.TempDir(), "none.conf")}, "--config: open"},
		{[]string{"standalone", "--config", bad}, "bad.conf line 3: brokerServicePort=sixty: want a port number"},
		{[]string{"broker", "--config", bad, "--etcd", "http://127.0.0.1:1"}, "bad.conf line 3"},
		{[]string{"dev", "--regions", "a,a"}, "distinct"},
		{[]string{"dev", "--regions", ""}, "at least one region"},
		{[]string{"standalone", "--no-such-flag"}, "unknown flag"},
		{append(broker, "--etcd-user", "meridian"), `etcd user "meridian" needs a password file`},
		{append(broker, "--etcd-password-file", "pw"), "the etcd password file pw needs a user"},
		{append(broker, "--etcd-user", "meridian:s3cret"), "etcdctl's user:password form"},
		{append(broker, "--global-etcd-user", "g", "--global-etcd-password-file", "pw"), "GlobalEtcdAuth needs Config.GlobalEtcd"},
		{[]string{"standalone", "--etcd-cacert", "ca.pem"}, "not the embedded one"},
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
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("meridian %s: %v shows the password", strings.Join(tc.args, " "), err)
		}
	}
}

// TestStandalonePortInUse: a listener that cannot bind fails the start with
// the reason, after stopping what had started (etcd, the bookie).
func TestStandalonePortInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and a bookie")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"standalone", "--data-dir", t.TempDir(), "--broker-listen", ln.Addr().String(),
		"--web-listen", "127.0.0.1:0", "--log-level", "error"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("standalone on a busy port: %v", err)
	}
}
