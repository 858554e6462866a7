package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// This file is the token tooling behind `meridian token`, the counterpart of
// `pulsar tokens`. Keys and tokens it makes are interchangeable with
// Pulsar's: raw secret keys, DER PKCS#8 private and X.509
// SubjectPublicKeyInfo public keys, and tokens whose "sub" is the role.

// GenerateSecretKey returns a new random HMAC secret of 32 bytes, the size
// `pulsar tokens create-secret-key` makes for HS256.
func GenerateSecretKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand crashes the program instead, Go ≥ 1.24)
	return b
}

// GenerateKeyPair returns a new key pair for alg as DER: the private key
// PKCS#8, the public key X.509 SubjectPublicKeyInfo, as `pulsar tokens
// create-key-pair` writes them. RS256, RS384 and RS512 make RSA keys of
// 2048, 3072 and 4096 bits (jjwt's sizes); ES256, ES384 and ES512 make EC
// keys on P-256, P-384 and P-521.
func GenerateKeyPair(alg string) (privateDER, publicDER []byte, err error) {
	var key any
	switch alg {
	case "RS256", "RS384", "RS512":
		bits := map[string]int{"RS256": 2048, "RS384": 3072, "RS512": 4096}[alg]
		key, err = rsa.GenerateKey(rand.Reader, bits)
	case "ES256", "ES384", "ES512":
		curve := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		key, err = ecdsa.GenerateKey(curve, rand.Reader)
	default:
		return nil, nil, fmt.Errorf("%w: cannot make a key pair for algorithm %q; want RS256, RS384, RS512, ES256, ES384 or ES512", ErrInvalidKey, alg)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generating %s key: %w", alg, err)
	}
	if privateDER, err = x509.MarshalPKCS8PrivateKey(key); err != nil {
		return nil, nil, err
	}
	var pub any
	switch k := key.(type) {
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	}
	if publicDER, err = x509.MarshalPKIXPublicKey(pub); err != nil {
		return nil, nil, err
	}
	return privateDER, publicDER, nil
}

// CreateToken signs a token whose "sub" is subject.
//
// signingKey is a raw secret for HS256/384/512, or a private key (DER or
// PEM, see ParsePrivateKey) for RS*, PS* and ES*. An empty alg is inferred
// from the key: RS256 for RSA, the curve's ES* for EC, otherwise HS256. A
// zero expiresAt makes a token without exp, valid until its key changes.
// headers are added to the JOSE header (a "kid", say); they cannot set
// "alg".
func CreateToken(signingKey []byte, alg, subject string, expiresAt time.Time, headers map[string]any) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: a token needs a subject (its role)", ErrInvalidConfig)
	}
	if _, ok := headers["alg"]; ok {
		return "", fmt.Errorf("%w: header \"alg\" is set by the algorithm, not by headers", ErrInvalidConfig)
	}
	var key any
	if alg == "" || !isHMAC(alg) {
		priv, err := ParsePrivateKey(signingKey)
		switch {
		case err != nil && alg == "":
			alg, key = "HS256", signingKey
		case err != nil:
			return "", fmt.Errorf("%s needs a private key: %w", alg, err)
		default:
			key = priv
			inferred, err := algForPrivateKey(priv, alg)
			if err != nil {
				return "", err
			}
			alg = inferred
		}
	} else {
		key = signingKey
	}
	if isHMAC(alg) {
		if n := len(signingKey); n < minHMACKey[alg] {
			return "", fmt.Errorf("%w: %s needs a secret key of at least %d bytes, got %d", ErrInvalidKey, alg, minHMACKey[alg], n)
		}
	}
	method := jwt.GetSigningMethod(alg)
	if method == nil {
		return "", fmt.Errorf("%w: unknown algorithm %q", ErrInvalidConfig, alg)
	}
	claims := jwt.MapClaims{"sub": subject}
	if !expiresAt.IsZero() {
		claims["exp"] = expiresAt.Unix()
	}
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range headers {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("%w: signing with %s: %v", ErrInvalidKey, alg, err)
	}
	return s, nil
}

// algForPrivateKey checks that alg suits priv, or picks one when alg is "".
func algForPrivateKey(priv any, alg string) (string, error) {
	switch k := priv.(type) {
	case *rsa.PrivateKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Errorf("%w: RSA key of %d bits, want at least %d", ErrInvalidKey, k.N.BitLen(), minRSABits)
		}
		if alg == "" {
			return "RS256", nil
		}
		if strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS") {
			return alg, nil
		}
	case *ecdsa.PrivateKey:
		want, err := ecAlg(k.Curve)
		if err != nil {
			return "", err
		}
		if alg == "" || alg == want {
			return want, nil
		}
		return "", fmt.Errorf("%w: the %s key can sign only %s, not %s", ErrInvalidKey, k.Curve.Params().Name, want, alg)
	}
	return "", fmt.Errorf("%w: a %T cannot sign %s", ErrInvalidKey, priv, alg)
}

// DecodeUnverified returns a token's header and claims WITHOUT checking its
// signature or times: for showing a token to a person, never for trusting
// it. Numbers keep their JSON text (json.Number), so exp prints as written.
func DecodeUnverified(token string) (header, claims map[string]any, err error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil, nil, fmt.Errorf("%w: a token has 3 dot-separated parts, this has %d", ErrInvalidConfig, len(parts))
	}
	decode := func(what, s string) (map[string]any, error) {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil {
			return nil, fmt.Errorf("%w: token %s is not base64url: %v", ErrInvalidConfig, what, err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		m := map[string]any{}
		if err := d.Decode(&m); err != nil {
			return nil, fmt.Errorf("%w: token %s is not a JSON object: %v", ErrInvalidConfig, what, err)
		}
		return m, nil
	}
	if header, err = decode("header", parts[0]); err != nil {
		return nil, nil, err
	}
	if claims, err = decode("claims", parts[1]); err != nil {
		return nil, nil, err
	}
	return header, claims, nil
}
