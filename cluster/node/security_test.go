package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/meta"
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

	bk := bookie.DefaultConfig()
	bk.ID, bk.ListenAddr, bk.DataDir = "bookie-secured", "127.0.0.1:0", t.TempDir()
	if bk.AuthToken, bk.TLS, err = node.BookieServerAuth(tokenFile, node.TLSFiles{CAFile: caFile, CertFile: bookieCert, KeyFile: bookieKey}); err != nil {
		t.Fatal(err)
	}
	startNode(t, node.Config{Etcd: endpoints, EtcdTLS: etcdTLS, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "secured", Bookies: []bookie.Config{bk}}}})

	b := node.DefaultBrokerConfig("127.0.0.1")
	b.BrokerAddr, b.WebAddr = "127.0.0.1:0", "127.0.0.1:0"
	b.Ledgers.EnsembleSize, b.Ledgers.WriteQuorum, b.Ledgers.AckQuorum = 1, 1, 1
	brokers := startNode(t, node.Config{Etcd: endpoints, EtcdTLS: etcdTLS, Logger: testLogger(), Bootstrap: true,
		Regions: []node.RegionConfig{{Name: "secured", Broker: &b,
			BookieClient: node.BookieClientAuth{TokenFile: tokenFile, TLS: etcdTLS}}}})
	c := newClient(t, pulsar.ClientOptions{URL: brokers.Broker().ServiceURL()})
	roundTrip(t, c, "persistent://public/default/secured", 5)

	// Without a client certificate the etcd refuses the connection.
	_, err = node.Start(ctx, node.Config{Etcd: endpoints, EtcdTLS: node.TLSFiles{CAFile: caFile}, Logger: testLogger(),
		Regions: []node.RegionConfig{{Name: "secured", Bookies: []bookie.Config{bk}}}})
	if err == nil {
		t.Fatal("a node without an etcd client certificate started")
	}
}
