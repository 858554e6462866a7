package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
)

// ReadKey returns the bytes a key setting points at, in the forms Pulsar's
// broker.conf and `pulsar tokens` accept (AuthTokenUtils.readKeyFromUrl):
//
//   - "data:;base64,<base64>" (any media type; without ";base64" the data is
//     percent-encoded text);
//   - "file:///path/to/key" (or "file:/path", or "file:relative/path");
//   - a bare path to an existing file;
//   - otherwise, as Pulsar does, a bare base64 string, but only when it
//     does not look like a path (a leading '/' or '.'), is padded standard
//     base64, and decodes: a mistyped path must not silently become a key.
//     A missing file is reported as such, with the data: form as the hint.
//
// The bytes are returned as they are: raw, DER or PEM is decided by the
// caller.
func ReadKey(setting string) ([]byte, error) {
	s := strings.TrimSpace(setting)
	switch {
	case s == "":
		return nil, fmt.Errorf("%w: no key given", ErrInvalidKey)
	case strings.HasPrefix(s, "data:"):
		return readDataURL(s)
	case strings.HasPrefix(s, "file:"):
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a file: URL: %v", ErrInvalidKey, s, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q names host %q; a file: URL must be local (file:///path)", ErrInvalidKey, s, u.Host)
		}
		p := u.Path
		if u.Opaque != "" {
			p = u.Opaque
		}
		return readKeyFile(p)
	default:
		if _, err := os.Stat(s); err != nil && !errors.Is(err, fs.ErrPermission) && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, ".") {
			if b, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && len(b) > 0 {
				return b, nil
			}
		}
		return readKeyFile(s)
	}
}

func readKeyFile(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty file path", ErrInvalidKey)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: key file %s does not exist (to give the key inline, write data:;base64,<base64>)", ErrInvalidKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: key file %s is empty", ErrInvalidKey, path)
	}
	return b, nil
}

func readDataURL(s string) ([]byte, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	if !ok {
		return nil, fmt.Errorf("%w: data: URL without ',' (want data:;base64,<base64>)", ErrInvalidKey)
	}
	var b []byte
	if strings.HasSuffix(meta, ";base64") {
		payload = strings.Join(strings.Fields(payload), "")
		var err error
		if b, err = base64.StdEncoding.DecodeString(payload); err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(payload, "=")); err != nil {
				return nil, fmt.Errorf("%w: data: URL is not valid base64: %v", ErrInvalidKey, err)
			}
		}
	} else {
		t, err := url.PathUnescape(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: data: URL: %v", ErrInvalidKey, err)
		}
		b = []byte(t)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: data: URL holds no key", ErrInvalidKey)
	}
	return b, nil
}

// pemBlocks returns the PEM blocks in b other than EC PARAMETERS (which
// `openssl ecparam -genkey` writes before the key), or nil when b is not PEM.
func pemBlocks(b []byte) []*pem.Block {
	var blocks []*pem.Block
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return blocks
		}
		if blk.Type != "EC PARAMETERS" {
			blocks = append(blocks, blk)
		}
	}
}

// ParsePublicKey parses an RSA or EC public key from PEM or DER: X.509
// SubjectPublicKeyInfo (what `pulsar tokens create-key-pair` writes, and
// PEM "PUBLIC KEY"), PKCS#1 ("RSA PUBLIC KEY"), or a certificate, whose key
// is taken.
func ParsePublicKey(b []byte) (crypto.PublicKey, error) {
	der := b
	if blocks := pemBlocks(b); len(blocks) > 0 {
		switch blocks[0].Type {
		case "PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE":
		default:
			return nil, fmt.Errorf("%w: PEM block %q is not a public key", ErrInvalidKey, blocks[0].Type)
		}
		der = blocks[0].Bytes
	}
	var pub crypto.PublicKey
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		pub = k
	} else if k, err := x509.ParsePKCS1PublicKey(der); err == nil {
		pub = k
	} else if c, err := x509.ParseCertificate(der); err == nil {
		pub = c.PublicKey
	} else {
		return nil, fmt.Errorf("%w: not an X.509 SubjectPublicKeyInfo, PKCS#1 public key or certificate, in DER or PEM", ErrInvalidKey)
	}
	if _, err := algsForPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// ParsePrivateKey parses an RSA or EC private key from PEM or DER: PKCS#8
// (what `pulsar tokens create-key-pair` writes, and PEM "PRIVATE KEY"),
// PKCS#1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY").
func ParsePrivateKey(b []byte) (crypto.Signer, error) {
	der := b
	if blocks := pemBlocks(b); len(blocks) > 0 {
		switch blocks[0].Type {
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
		default:
			return nil, fmt.Errorf("%w: PEM block %q is not a private key", ErrInvalidKey, blocks[0].Type)
		}
		der = blocks[0].Bytes
	}
	var key any
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		key = k
	} else if k, err := x509.ParseECPrivateKey(der); err == nil {
		key = k
	} else {
		return nil, fmt.Errorf("%w: not a PKCS#8, PKCS#1 or SEC 1 private key, in DER or PEM", ErrInvalidKey)
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		if _, err := ecAlg(k.Curve); err != nil {
			return nil, err
		}
		return k, nil
	default:
		return nil, fmt.Errorf("%w: %T keys are not supported; use RSA or EC (P-256, P-384, P-521)", ErrInvalidKey, key)
	}
}

// minHMACKey is the shortest secret each HS algorithm accepts: the size of
// its hash (RFC 7518 §3.2). Pulsar's jjwt refuses shorter keys too, so no
// token a Pulsar broker accepts is refused here.
var minHMACKey = map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}

// minRSABits is the smallest RSA modulus accepted, as jjwt and RFC 7518 §3.3.
const minRSABits = 2048

var (
	rsaAlgs  = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	hmacAlgs = []string{"HS256", "HS384", "HS512"}
)

// algsForPublicKey returns the algorithms a token verified with pub may use.
func algsForPublicKey(pub crypto.PublicKey) ([]string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("%w: RSA key of %d bits, want at least %d", ErrInvalidKey, k.N.BitLen(), minRSABits)
		}
		return rsaAlgs, nil
	case *ecdsa.PublicKey:
		alg, err := ecAlg(k.Curve)
		if err != nil {
			return nil, err
		}
		return []string{alg}, nil
	default:
		return nil, fmt.Errorf("%w: %T keys are not supported; use RSA or EC (P-256, P-384, P-521)", ErrInvalidKey, pub)
	}
}

// ecAlg is the one ES algorithm of a curve (RFC 7518 §3.4).
func ecAlg(c elliptic.Curve) (string, error) {
	switch c {
	case elliptic.P256():
		return "ES256", nil
	case elliptic.P384():
		return "ES384", nil
	case elliptic.P521():
		return "ES512", nil
	}
	return "", fmt.Errorf("%w: EC curve %s is not supported; use P-256, P-384 or P-521", ErrInvalidKey, c.Params().Name)
}

// isHMAC reports whether alg is one of HS256/384/512.
func isHMAC(alg string) bool { return slices.Contains(hmacAlgs, alg) }
