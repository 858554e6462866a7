package meta_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
)

// TestClientCertificateNamesTheEtcdUser: an etcd run with TLS,
// --client-cert-auth and its authentication on takes the CommonName of a
// client's certificate as its user when the client gives no password. A
// Meridian store whose certificate is named after a user with no password,
// granted read and write on /meridian/ only, serves inside that prefix and
// is refused outside it; a certificate of the same CA with another name
// (a user that does not exist) is refused at Dial.
func TestClientCertificateNamesTheEtcdUser(t *testing.T) {
	ca := testkit.NewCA(t, "region-ca")
	endpoints := startTLSEtcd(t, ca, true)
	certFor := func(user string) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Issue(t, user)}}
	}

	const user = "broker-east"
	enableCertAuth(t, endpoints, certFor("root"), user, meta.Root+"/")

	dial := func(user string) (*meta.Etcd, error) {
		ecfg := meta.DefaultEtcdConfig()
		ecfg.TLS = certFor(user)
		return meta.Dial(t.Context(), endpoints, ecfg)
	}
	s, err := dial(user)
	if err != nil {
		t.Fatalf("dial as %q by its certificate: %v", user, err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	inside := meta.Root + meta.Key("regions", "east", "probe")
	if _, err := s.Create(ctx, inside, []byte("v"), 0); err != nil {
		t.Fatalf("create %s inside the user's prefix: %v", inside, err)
	}
	if kv, err := s.Get(ctx, inside); err != nil || string(kv.Value) != "v" {
		t.Fatalf("get %s inside the user's prefix: %q, %v", inside, kv.Value, err)
	}
	const outside = "/elsewhere/probe"
	if _, err := s.Create(ctx, outside, []byte("v"), 0); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("create %s outside the user's prefix: got %v, want permission denied", outside, err)
	}
	if _, err := s.Get(ctx, outside); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("get %s outside the user's prefix: got %v, want permission denied", outside, err)
	}

	stranger, err := dial("intruder")
	if err == nil {
		stranger.Close()
		t.Fatal("a certificate of the region's CA named after no etcd user was let in")
	}
	if !strings.Contains(err.Error(), "refused the client") {
		t.Errorf("refusal of an unknown certificate name: %v, want etcd's authentication named", err)
	}
}

// startTLSEtcd starts an etcd member of the test's own that serves its
// clients over TLS on loopback, with a certificate of ca named "etcd"
// (and 127.0.0.1), and with clientCertAuth requires client certificates
// of ca (etcd's --client-cert-auth). It returns the member's endpoints.
func startTLSEtcd(t *testing.T, ca *testkit.CA, clientCertAuth bool) []string {
	t.Helper()
	dir := t.TempDir()
	cfg := metatest.FastEmbedConfig()
	cfg.ListenClientURLs = []string{"https://127.0.0.1:0"}
	serverCert, serverKey := ca.IssueFiles(t, dir, "etcd")
	cfg.ClientTLS = meta.EmbedTLS{CertFile: serverCert, KeyFile: serverKey, ClientCertAuth: clientCertAuth}
	if clientCertAuth {
		cfg.ClientTLS.TrustedCAFile = ca.WriteCA(t, dir)
	}
	return metatest.Start(t, cfg).Endpoints()
}

// enableCertAuth turns etcd's authentication on at endpoints, connecting
// with admin (a certificate named root, the user that `etcdctl auth
// enable` requires), after adding user with no password (a certificate is
// its only credential) and a role that grants it read and write on the
// keys under prefix alone.
func enableCertAuth(t *testing.T, endpoints []string, admin *tls.Config, user, prefix string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: admin, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	noPassword := &clientv3.UserAddOptions{NoPassword: true}
	for _, step := range []func() error{
		func() error { _, err := cli.UserAddWithOptions(ctx, "root", "", noPassword); return err },
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "prefix-only"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "prefix-only", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAddWithOptions(ctx, user, "", noPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, user, "prefix-only"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable etcd authentication at %v: %v", endpoints, err)
		}
	}
}

// TestAuthorityNamesTheMembers: with Authority set, the members'
// certificates are verified against it, not against the host of the URL
// dialled: a certificate that names "etcd" (and 127.0.0.1) is accepted
// with that authority and refused with one it does not name.
func TestAuthorityNamesTheMembers(t *testing.T) {
	ca := testkit.NewCA(t, "region-ca")
	endpoints := startTLSEtcd(t, ca, false)
	dial := func(authority string, timeout time.Duration) (*meta.Etcd, error) {
		ecfg := meta.DefaultEtcdConfig()
		ecfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool()}
		ecfg.Authority, ecfg.DialTimeout = authority, timeout
		return meta.Dial(t.Context(), endpoints, ecfg)
	}
	s, err := dial("etcd", meta.DefaultEtcdConfig().DialTimeout)
	if err != nil {
		t.Fatalf("authority the certificate names: %v", err)
	}
	s.Close()
	// The handshake fails at once (the certificate names 127.0.0.1, the
	// host dialled, but not the authority); Dial then waits out its
	// timeout, which is all this case costs, and says why.
	s, err = dial("stranger.example", 300*time.Millisecond)
	if err == nil {
		s.Close()
		t.Fatal("a member whose certificate does not name the authority was trusted")
	}
	if !strings.Contains(err.Error(), "a TLS handshake with "+endpoints[0]+" fails") || !strings.Contains(err.Error(), "stranger.example") {
		t.Errorf("refusal %q does not give the failed certificate check against the authority", err)
	}
}
