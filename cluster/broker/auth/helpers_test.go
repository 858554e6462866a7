package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testKeys are generated once per test binary: RSA generation is the
// slowest thing these tests do.
type testKeys struct {
	rsa      *rsa.PrivateKey
	rsaOther *rsa.PrivateKey
	ec       map[string]*ecdsa.PrivateKey // by alg: ES256, ES384, ES512
}

var keys = sync.OnceValue(func() testKeys {
	k := testKeys{ec: map[string]*ecdsa.PrivateKey{}}
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if k.rsaOther, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	for alg, c := range map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()} {
		if k.ec[alg], err = ecdsa.GenerateKey(c, rand.Reader); err != nil {
			panic(err)
		}
	}
	return k
})

// fixedClock is the injected clock of every token test.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return epoch }

func dataURL(b []byte) string { return "data:;base64," + base64.StdEncoding.EncodeToString(b) }

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t testing.TB, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func spki(t testing.TB, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
