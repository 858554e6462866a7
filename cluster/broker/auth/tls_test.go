package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, pem: pemOf("CERTIFICATE", der)}
}

// issue returns a leaf certificate for cn (empty: no CommonName), as a
// tls.Certificate and as PEM certificate and key.
func (ca testCA) issue(t *testing.T, cn string, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"meridian-test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", pkcs8(t, key))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, certPEM, keyPEM
}

// handshake runs a real TLS handshake over loopback TCP and returns the
// server side's state and error.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		s := tls.Server(c, server)
		err = s.HandshakeContext(t.Context())
		done <- result{s.ConnectionState(), err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := tls.Client(c, client)
	if err := cl.HandshakeContext(t.Context()); err != nil {
		c.Close() // the server sees the failure too
	}
	r := <-done
	return r.cs, r.err
}

func TestTLSProvider(t *testing.T) {
	ca, other := newTestCA(t, "test-ca"), newTestCA(t, "other-ca")
	_, srvCert, srvKey := ca.issue(t, "broker", true)
	alice, _, _ := ca.issue(t, "alice", false)
	noCN, _, _ := ca.issue(t, "", false)
	mallory, _, _ := other.issue(t, "admin", false)
	certFile, keyFile := writeFile(t, "broker.pem", srvCert), writeFile(t, "broker.key", srvKey)
	trustFile := writeFile(t, "ca.pem", ca.pem)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	for _, tc := range []struct {
		name              string
		trust             string
		require, insecure bool
		client            []tls.Certificate
		forced            bool // send client[0] whatever CAs the server names
		handshakeFails    bool
		role              string // "" = refused
		msg               string
	}{
		{"verified client", trustFile, false, false, []tls.Certificate{alice}, false, false, "alice", ""},
		{"verified client, required", trustFile, true, false, []tls.Certificate{alice}, false, false, "alice", ""},
		{"no certificate, optional", trustFile, false, false, nil, false, false, "", "presented no certificate"},
		{"no certificate, required", trustFile, true, false, nil, false, true, "", ""},
		// Go's client offers only certificates of the CAs the server names, so
		// it withholds this one; "forced" sends it anyway.
		{"untrusted certificate withheld", trustFile, false, false, []tls.Certificate{mallory}, false, false, "", "presented no certificate"},
		{"untrusted certificate forced", trustFile, false, false, []tls.Certificate{mallory}, true, true, "", ""},
		{"untrusted certificate, insecure allowed", trustFile, false, true, []tls.Certificate{mallory}, false, false, "", "not verified"},
		{"no trust file", "", false, false, []tls.Certificate{alice}, false, false, "", "presented no certificate"},
		{"certificate without CommonName", trustFile, false, false, []tls.Certificate{noCN}, false, false, "", "no CommonName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ServerTLSConfig(certFile, keyFile, tc.trust, tc.require, tc.insecure)
			if err != nil {
				t.Fatal(err)
			}
			ccfg := &tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: tc.client}
			if tc.forced {
				ccfg.Certificates = nil
				ccfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc.client[0], nil }
			}
			cs, err := handshake(t, cfg, ccfg)
			if tc.handshakeFails {
				if err == nil {
					t.Fatal("handshake succeeded; want it refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			role, err := NewTLS().Authenticate(t.Context(), Credentials{TLS: &cs})
			switch {
			case tc.role != "" && (err != nil || role != tc.role):
				t.Errorf("Authenticate = %q, %v; want %q", role, err, tc.role)
			case tc.role == "" && (!errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("Authenticate = %q, %v; want a refusal mentioning %q", role, err, tc.msg)
			}
		})
	}

	if _, err := NewTLS().Authenticate(t.Context(), Credentials{}); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "not TLS") {
		t.Errorf("Authenticate without TLS = %v", err)
	}
	if _, err := NewTLS().Authenticate(t.Context(), Credentials{TLS: &tls.ConnectionState{}}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("Authenticate before the handshake = %v", err)
	}
}

func TestServerTLSConfigErrors(t *testing.T) {
	ca := newTestCA(t, "test-ca")
	_, srvCert, srvKey := ca.issue(t, "broker", true)
	certFile, keyFile := writeFile(t, "broker.pem", srvCert), writeFile(t, "broker.key", srvKey)
	for _, tc := range []struct {
		name              string
		cert, key, trust  string
		require, insecure bool
		want              string
		wantAuth          tls.ClientAuthType
	}{
		{"no cert", "", keyFile, "", false, false, "needs both", 0},
		{"bad cert", writeFile(t, "x.pem", []byte("x")), keyFile, "", false, false, "loading the broker's certificate", 0},
		{"missing trust file", certFile, keyFile, "/no/ca.pem", false, false, "does not exist", 0},
		{"trust file without certificates", certFile, keyFile, writeFile(t, "empty.pem", []byte("nothing")), false, false, "no PEM certificate", 0},
		{"require without trust", certFile, keyFile, "", true, false, "needs a trust file", 0},
		{"no client certs", certFile, keyFile, "", false, false, "", tls.NoClientCert},
		{"insecure and required", certFile, keyFile, "", true, true, "", tls.RequireAnyClientCert},
	} {
		cfg, err := ServerTLSConfig(tc.cert, tc.key, tc.trust, tc.require, tc.insecure)
		switch {
		case tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v; want ErrInvalidConfig mentioning %q", tc.name, err, tc.want)
		case tc.want == "" && (err != nil || cfg.ClientAuth != tc.wantAuth || cfg.MinVersion != tls.VersionTLS12):
			t.Errorf("%s: %v, %v; want ClientAuth %v", tc.name, cfg, err, tc.wantAuth)
		}
	}
}
