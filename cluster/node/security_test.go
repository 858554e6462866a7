package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/testkit"
)

// TestSecuredRegion: a region whose etcd requires client certificates of
// the region's CA (etcd's --client-cert-auth) and whose bookie requires
// the region's token and mutual TLS. The bookie and the broker reach etcd
// with their certificates, the broker's ledger client authenticates to the
// bookie, and messages go round; a process without a client certificate
// cannot reach the etcd at all.
func TestSecuredRegion(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "region-ca")
	caFile := ca.WriteCA(t, dir)
	etcdCert, etcdKey := ca.IssueFiles(t, dir, "etcd")
	bookieCert, bookieKey := ca.IssueFiles(t, dir, "bookie")
	clientCert, clientKey := ca.IssueFiles(t, dir, "broker")
	tokenFile := filepath.Join(dir, "bookie-token")
	if err := os.WriteFile(tokenFile, []byte("region-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ecfg := meta.DefaultEmbedConfig()
	ecfg.ListenClientURLs = []string{"https://127.0.0.1:0"}
	ecfg.ClientTLS = meta.EmbedTLS{CertFile: etcdCert, KeyFile: etcdKey, TrustedCAFile: caFile, ClientCertAuth: true}
	ecfg.Logger = testLogger()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	etcd, err := meta.StartEmbed(ctx, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	endpoints := etcd.Endpoints()
	etcdTLS := node.TLSFiles{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}
	etcdAuth := node.EtcdClientAuth{TLS: etcdTLS}

	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-secured", "127.0.0.1:0", t.TempDir()
	if bk.AuthToken, bk.TLS, err = node.BookieServerAuth(tokenFile, node.TLSFiles{CAFile: caFile, CertFile: bookieCert, KeyFile: bookieKey}); err != nil {
		t.Fatal(err)
	}
	startNode(t, node.Config{Etcd: endpoints, EtcdAuth: etcdAuth, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "secured", Bookies: []bookie.Config{bk}}}})

	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	brokers := startNode(t, node.Config{Etcd: endpoints, EtcdAuth: etcdAuth, Logger: testLogger(), Bootstrap: true,
		Regions: []node.RegionConfig{{Name: "secured", Broker: &b,
			BookieClient: node.BookieClientAuth{TokenFile: tokenFile, TLS: etcdTLS}}}})
	c := newClient(t, pulsar.ClientOptions{URL: brokers.Broker().ServiceURL()})
	roundTrip(t, c, "persistent://public/default/secured", 5)

	// Without a client certificate the etcd refuses the connection.
	_, err = node.Start(ctx, node.Config{Etcd: endpoints, EtcdAuth: node.EtcdClientAuth{TLS: node.TLSFiles{CAFile: caFile}}, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "secured", Bookies: []bookie.Config{bk}}}})
	if err == nil {
		t.Fatal("a node without an etcd client certificate started")
	}
}

// TestEtcdUserAuth: a region whose etcd and a global store whose etcd (two
// clusters) each have etcd's authentication on, with a user of their own
// granted read and write on /meridian/ only. A node with each user's
// password file serves; a wrong password, or the region's user on the
// global etcd (which is what a global side without settings of its own
// gets), is refused with an error that names the etcd's endpoint and the
// user, never the password; without a user the etcd refuses the node too.
func TestEtcdUserAuth(t *testing.T) {
	dir := t.TempDir()
	regionEtcd := metatest.Start(t, metatest.FastEmbedConfig()).Endpoints()
	globalEtcd := metatest.Start(t, metatest.FastEmbedConfig()).Endpoints()
	enableEtcdAuth(t, regionEtcd, "region-user", "region-secret")
	enableEtcdAuth(t, globalEtcd, "global-user", "global-secret")
	passwordFile := func(name, password string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	regionAuth := node.EtcdClientAuth{Username: "region-user", PasswordFile: passwordFile("region", "region-secret")}
	globalAuth := node.EtcdClientAuth{Username: "global-user", PasswordFile: passwordFile("global", "global-secret")}

	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-rbac", "127.0.0.1:0", t.TempDir()
	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	cfg := node.Config{Etcd: regionEtcd, GlobalEtcd: globalEtcd, EtcdAuth: regionAuth, GlobalEtcdAuth: globalAuth,
		Logger: testLogger(), Bootstrap: true,
		Regions: []node.RegionConfig{{Name: "rbac", Bookies: []bookie.Config{bk}, Broker: &b}}}
	n := startNode(t, cfg)
	c := newClient(t, pulsar.ClientOptions{URL: n.Broker().ServiceURL()})
	roundTrip(t, c, "persistent://public/default/rbac", 5)

	// refused starts a bookie alone with cfg changed by mutate, and wants
	// an error that names the etcd at endpoints and gives reason.
	refused := func(name string, mutate func(*node.Config), endpoints []string, reason string) {
		t.Helper()
		other := bk
		other.ID, other.DataDir = "bookie-refused", t.TempDir()
		bad := cfg
		bad.Regions = []node.RegionConfig{{Name: "rbac", Bookies: []bookie.Config{other}}}
		mutate(&bad)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		n, err := node.Start(ctx, bad)
		if err == nil {
			n.Close()
			t.Fatalf("%s: the node started", name)
		}
		msg := err.Error()
		for _, want := range []string{endpoints[0], reason} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not name %q", name, msg, want)
			}
		}
		for _, secret := range []string{"region-secret", "global-secret", "wrong-secret"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: error %q shows a password", name, msg)
			}
		}
	}
	refused("wrong password", func(c *node.Config) {
		c.EtcdAuth.PasswordFile = passwordFile("wrong", "wrong-secret")
	}, regionEtcd, `"region-user"`)
	refused("the region's user on the global etcd", func(c *node.Config) {
		c.GlobalEtcdAuth = node.EtcdClientAuth{}
	}, globalEtcd, `"region-user"`)
	refused("no user", func(c *node.Config) {
		c.EtcdAuth, c.GlobalEtcdAuth = node.EtcdClientAuth{}, node.EtcdClientAuth{}
	}, regionEtcd, "refused the client")
}

// enableEtcdAuth turns etcd's authentication on at endpoints (`etcdctl
// auth enable`, after the root user it requires) with user, whose role
// grants read and write on the keys under /meridian/ and nothing else.
func enableEtcdAuth(t *testing.T, endpoints []string, user, password string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	prefix := meta.Root + "/"
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "meridian"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "meridian", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, user, password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, user, "meridian"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd authentication at %v: %v", endpoints, err)
		}
	}
}
