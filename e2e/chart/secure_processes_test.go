package chart

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
)

// secretFiles are the contents of the Secrets a rendering mounts, by
// Secret name and key; mount writes them under dir.
type secretFiles struct {
	dir  string
	data map[string]map[string][]byte
}

// mount is env with every path under one of c's Secret mounts pointing at
// that Secret's files, which it writes, as the kubelet mounts them. A nil
// s holds no Secret: a container that mounts one then fails the test.
func (s *secretFiles) mount(t *testing.T, pod *corev1.PodTemplateSpec, c corev1.Container, env map[string]string) map[string]string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		secret := ""
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
		if secret == "" {
			continue
		}
		var files map[string][]byte
		ok := false
		if s != nil {
			files, ok = s.data[secret]
		}
		if !ok {
			t.Fatalf("%s mounts Secret %s, which the test does not have", c.Name, secret)
		}
		local := filepath.Join(s.dir, secret)
		if err := os.MkdirAll(local, 0o700); err != nil {
			t.Fatal(err)
		}
		for key, data := range files {
			if err := os.WriteFile(filepath.Join(local, key), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for name, v := range env {
			env[name] = strings.ReplaceAll(v, strings.TrimSuffix(m.MountPath, "/")+"/", local+"/")
		}
	}
	return env
}

// TestSecureChartOnRunningProcesses runs one region with every tls and
// auth value of testdata/secure.yaml on (the region's etcd as its global
// store: one region alone), each Secret made as docs/kubernetes.md says:
// etcd serves only clients with a certificate, the bookies require their
// token, and the brokers serve TLS and require a token (runRegion: every
// probe and scrape answers, and the init Job's steps succeed with the
// superuser's token). Then a message goes in over pulsar+ssl:// with a
// token, stored on the bookies, and the web port refuses the admin API
// without a token.
func TestSecureChartOnRunningProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	vals, err := chartcommon.ReadValuesFile(secureValues)
	if err != nil {
		t.Fatal(err)
	}
	vals["globalStore"] = map[string]any{"endpoints": []any{}}
	vals["globalEtcd"] = map[string]any{"enabled": false}
	r := render(t, "secure, one region", vals)

	bin := meridianBinary(t)
	dir := t.TempDir()
	ca, cert, key := testCertificates(t)
	tlsSecret := map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}
	secretKey := filepath.Join(dir, "SECRETKEY")
	run(t, bin, "token", "create-secret-key", "--output", secretKey)
	adminToken := strings.TrimSpace(run(t, bin, "token", "create", "--secret-key", "file://"+secretKey, "--subject", "admin"))
	secretKeyBytes, err := os.ReadFile(secretKey)
	if err != nil {
		t.Fatal(err)
	}
	secrets := &secretFiles{dir: filepath.Join(dir, "secrets"), data: map[string]map[string][]byte{
		"us-east-broker-tls":      tlsSecret,
		"us-east-etcd-member-tls": tlsSecret,
		"us-east-etcd-client-tls": tlsSecret,
		"us-east-token-key":       {"SECRETKEY": secretKeyBytes},
		"us-east-admin-token":     {"TOKEN": []byte(adminToken + "\n")},
		"us-east-bookie-token":    {"token": []byte("region-bookie-token")},
	}}
	ports := runRegion(t, r, secrets)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	httpsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := httpsClient.Get(fmt.Sprintf("https://127.0.0.1:%d/status.html", ports[8443]))
	if err != nil {
		t.Fatalf("the https port: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("https /status.html: %d, want 200", resp.StatusCode)
	}

	tenants := fmt.Sprintf("http://127.0.0.1:%d/admin/v2/tenants", ports[8080])
	resp, err = http.Get(tenants)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %s without a token: %d, want 401", tenants, resp.StatusCode)
	}

	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	out := run(t, bin, "produce", "--url", fmt.Sprintf("pulsar+ssl://127.0.0.1:%d", ports[6651]),
		"--tls-trust-cert-path", caFile, "--token", adminToken, "-m", "hello", "persistent://public/default/secure")
	t.Logf("produce: %s", out)
}

// run runs `meridian args...` and returns its stdout, failing the test
// with its output when it fails.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("meridian %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// testCertificates makes a CA and one certificate it signs, for 127.0.0.1
// and localhost, good as a server's and a client's (an etcd member is
// both to its peers), PEM-encoded. (Meridian's testkit has a CA, but this
// module does not depend on Meridian's, as freePort says.)
func testCertificates(t *testing.T) (ca, cert, key []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "region CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "meridian"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
