package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/testkit"
)

// TestEtcdClientFileUnderFlags: broker.conf's metadataStoreConfigPath
// names Pulsar's etcd client file, whose TLS files and authority end in
// the fields the --etcd-* flags set; a flag given wins over the file, field
// by field, and the global store's etcd takes the same settings (it has
// none of its own), as Pulsar reads the one file for both stores.
func TestEtcdClientFileUnderFlags(t *testing.T) {
	dir := t.TempDir()
	etcdConf := writeFile(t, dir, "etcd.yaml", `useTls: true
tlsProvider: JDK
tlsTrustCertsFilePath: /file/ca.pem
tlsCertificateFilePath: /file/broker.pem
tlsKeyFilePath: /file/broker-key.pem
authority: file.example.com
`)
	conf := writeFile(t, dir, "broker.conf", "metadataStoreUrl=etcd:https://e1:2379,https://e2:2379\n"+
		"configurationMetadataStoreUrl=etcd:https://g1:2379\nmetadataStoreConfigPath="+etcdConf+"\n")
	cfg := node.DefaultBrokerConfig("")
	ncfg := node.Config{Regions: []node.RegionConfig{{Broker: &cfg}}}
	cmd := &cobra.Command{Use: "test"}
	addEtcdClientFlags(cmd.Flags(), &ncfg.EtcdAuth, &ncfg.GlobalEtcdAuth)
	if err := cmd.ParseFlags([]string{"--etcd-cacert", "/flag/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	if err := applyPulsarConf(cmd, conf, &ncfg, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	want := node.EtcdClientAuth{
		TLS:       node.TLSFiles{CAFile: "/flag/ca.pem", CertFile: "/file/broker.pem", KeyFile: "/file/broker-key.pem"},
		Authority: "file.example.com",
	}
	if ncfg.EtcdAuth != want || !ncfg.GlobalEtcdAuth.IsZero() {
		t.Fatalf("etcd client settings %+v, global %+v; want %+v and none of the global's own", ncfg.EtcdAuth, ncfg.GlobalEtcdAuth, want)
	}
}

// TestEtcdClientFileErrors: what cannot secure the etcd connection as the
// file or the flags say is refused before anything starts, saying why.
func TestEtcdClientFileErrors(t *testing.T) {
	dir := t.TempDir()
	tlsFile := writeFile(t, dir, "tls.yaml", "useTls: true\n")
	ca := testkit.NewCA(t, "region-ca").WriteCA(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the embedded etcd", []string{"standalone", "--config", writeFile(t, dir, "standalone.conf", "metadataStoreConfigPath="+tlsFile+"\n")},
			"metadataStoreConfigPath=" + tlsFile + ": the embedded etcd takes no client settings: give metadataStoreUrl"},
		{"useTls over http", []string{"broker", "--config", writeFile(t, dir, "http.conf", "clusterName=r\nadvertisedAddress=h\n"+
			"metadataStoreUrl=etcd:https://e1:2379\nconfigurationMetadataStoreUrl=etcd:http://g1:2379\nmetadataStoreConfigPath="+tlsFile+"\n")},
			"useTls is true but http://g1:2379 is plain http: write https://g1:2379"},
		{"a bad file", []string{"broker", "--config", writeFile(t, dir, "bad.conf", "clusterName=r\nadvertisedAddress=h\n"+
			"metadataStoreUrl=etcd:https://e1:2379\nmetadataStoreConfigPath="+writeFile(t, dir, "bad.yaml", "useTls: true\ntlsProvider: GO\n")+"\n")},
			`tlsProvider "GO": want one of [JDK OPENSSL OPENSSL_REFCNT]`},
		{"a CA flag over http", []string{"broker", "--region", "r", "--advertised-address", "h", "--etcd", "http://127.0.0.1:1", "--etcd-cacert", ca},
			"etcd endpoint http://127.0.0.1:1 is plain http, but the client has TLS settings (a CA or a client certificate): write https://127.0.0.1:1"},
		{"an authority with a scheme", []string{"broker", "--region", "r", "--advertised-address", "h", "--etcd", "https://127.0.0.1:1", "--etcd-authority", "https://etcd"},
			`Authority: want a host or host:port`},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(tc.args, "--log-level", "error"))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
