package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned is a TLS certificate for localhost, trusted by nobody.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestConnCloseDoesNotWaitForTLSPeer: closing a TLS connection whose peer
// takes no bytes returns at once. tls.Conn.Close would send a close_notify
// alert first and wait up to 5 s for it, and conn.close runs under a
// subscription's or a topic's lock.
func TestConnCloseDoesNotWaitForTLSPeer(t *testing.T) {
	serverSide, clientSide := net.Pipe() // a write waits until the peer reads
	defer clientSide.Close()
	srv := tls.Server(serverSide, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	cli := tls.Client(clientSide, &tls.Config{InsecureSkipVerify: true})
	handshook := make(chan error, 1)
	go func() { handshook <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshook; err != nil {
		t.Fatal(err)
	}
	// The client reads nothing from here on.
	c := &conn{nc: srv, cancel: func() {}}
	start := time.Now()
	c.close()
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("close took %v: it waited on the peer (tls close_notify waits up to 5 s)", took)
	}
}
