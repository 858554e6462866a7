package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for tests of TLS and mutual TLS:
// a region's CA, or a stranger's to show that its certificates are
// refused. Its certificates are valid for a day, on ECDSA P-256 keys.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

var serial atomic.Int64

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	cert, key := sign(t, tmpl, nil, nil)
	return &CA{Cert: cert.Leaf, key: key, der: cert.Certificate[0]}
}

// Pool is a pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate for name, good for both server and client
// authentication, whose subject alternative names are 127.0.0.1, ::1,
// localhost and name.
func (ca *CA) Issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	tmpl.DNSNames = []string{"localhost", name}
	cert, _ := sign(t, tmpl, ca.Cert, ca.key)
	return cert
}

func template(name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// sign makes a key and signs tmpl for it with parentKey (self-signed when
// parent is nil).
func sign(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (tls.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, key
}

// WriteCA writes the CA's certificate, PEM-encoded, into dir and returns
// the file's path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	return writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.der)
}

// IssueFiles issues a certificate for name (see Issue) and writes it and
// its key, PEM-encoded, into dir, for servers and flags that take files.
func (ca *CA) IssueFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	c := ca.Issue(t, name)
	keyDER, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", c.Certificate[0]),
		writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
}

func writePEM(t testing.TB, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
