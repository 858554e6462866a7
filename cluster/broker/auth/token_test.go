package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signAndVerifyKeys returns, for alg, the signing key bytes CreateToken takes
// and the TokenConfig that verifies its tokens.
func signAndVerifyKeys(t *testing.T, alg string) (sign []byte, cfg TokenConfig) {
	t.Helper()
	cfg = DefaultTokenConfig()
	cfg.Now = fixedClock
	k := keys()
	switch alg[:2] {
	case "HS":
		secret := bytes.Repeat([]byte{0x5a}, minHMACKey[alg])
		cfg.SecretKey = dataURL(secret)
		return secret, cfg
	case "RS", "PS":
		cfg.PublicKey = dataURL(spki(t, &k.rsa.PublicKey))
		return pkcs8(t, k.rsa), cfg
	default:
		cfg.PublicKey = dataURL(spki(t, &k.ec[alg].PublicKey))
		return pkcs8(t, k.ec[alg]), cfg
	}
}

func TestTokenRoundTripEveryAlgorithm(t *testing.T) {
	for _, alg := range []string{"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"} {
		t.Run(alg, func(t *testing.T) {
			sign, cfg := signAndVerifyKeys(t, alg)
			exp := epoch.Add(time.Hour)
			tok, err := CreateToken(sign, alg, "alice", exp, map[string]any{"kid": "k1"})
			if err != nil {
				t.Fatal(err)
			}
			h, _, err := DecodeUnverified(tok)
			if err != nil || h["alg"] != alg || h["kid"] != "k1" {
				t.Fatalf("header %v, err %v; want alg %s and kid k1", h, err, alg)
			}
			p, err := NewToken(cfg)
			if err != nil {
				t.Fatal(err)
			}
			role, err := p.Authenticate(t.Context(), Credentials{Data: []byte(tok)})
			if err != nil || role != "alice" {
				t.Fatalf("Authenticate = %q, %v; want alice", role, err)
			}
			info, err := p.Verify(tok)
			if err != nil || !info.ExpiresAt.Equal(exp) {
				t.Fatalf("Verify: ExpiresAt %v, err %v; want %v", info.ExpiresAt, err, exp)
			}
		})
	}
}

// TestTokenInferredAlgorithm: without --algorithm, the key decides, as
// `pulsar tokens create` defaults to HS256 for a secret and RS256 for a
// private key.
func TestTokenInferredAlgorithm(t *testing.T) {
	k := keys()
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{GenerateSecretKey(), "HS256"},
		{pkcs8(t, k.rsa), "RS256"},
		{pkcs8(t, k.ec["ES384"]), "ES384"},
	} {
		tok, err := CreateToken(tc.key, "", "bob", time.Time{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, c, err := DecodeUnverified(tok)
		if err != nil || h["alg"] != tc.want || c["sub"] != "bob" || c["exp"] != nil {
			t.Errorf("header %v claims %v err %v; want alg %s, sub bob, no exp", h, c, err, tc.want)
		}
	}
}

func TestTokenKeyForms(t *testing.T) {
	k := keys()
	secret := GenerateSecretKey()
	rsaDER, ecDER := spki(t, &k.rsa.PublicKey), spki(t, &k.ec["ES256"].PublicKey)
	secretFile := writeFile(t, "secret.key", secret)
	rsaPEMFile := writeFile(t, "rsa.pem", pemOf("PUBLIC KEY", rsaDER))
	ecDERFile := writeFile(t, "ec.der", ecDER)

	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "issuer"}, NotBefore: epoch, NotAfter: epoch.Add(time.Hour)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.rsa.PublicKey, k.rsa)
	if err != nil {
		t.Fatal(err)
	}
	ecSEC1, err := x509.MarshalECPrivateKey(k.ec["ES256"])
	if err != nil {
		t.Fatal(err)
	}
	ecParams := pemOf("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	for _, tc := range []struct {
		name        string
		sign        []byte // CreateToken's key
		alg         string
		secret, pub string // TokenConfig
	}{
		{"secret raw data URL", secret, "HS256", dataURL(secret), ""},
		{"secret data URL with media type", secret, "HS256", "data:application/octet-stream;base64," + strings.TrimRight(dataURL(secret)[13:], "="), ""},
		{"secret file URL", secret, "HS256", "file://" + secretFile, ""},
		{"secret bare path", secret, "HS256", secretFile, ""},
		{"rsa DER PKCS#8 / DER SPKI data URL", pkcs8(t, k.rsa), "RS256", "", dataURL(rsaDER)},
		{"rsa PEM PKCS#8 / PEM SPKI file URL", pemOf("PRIVATE KEY", pkcs8(t, k.rsa)), "RS256", "", "file://" + rsaPEMFile},
		{"rsa PEM PKCS#1 / PEM PKCS#1", pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k.rsa)), "RS512", "", dataURL(pemOf("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)))},
		{"rsa DER PKCS#1 / certificate PEM", x509.MarshalPKCS1PrivateKey(k.rsa), "PS256", "", dataURL(pemOf("CERTIFICATE", certDER))},
		{"rsa / certificate DER", pkcs8(t, k.rsa), "RS256", "", dataURL(certDER)},
		{"ec DER SEC1 / DER SPKI bare path", ecSEC1, "ES256", "", ecDERFile},
		{"ec PEM SEC1 after EC PARAMETERS / PEM SPKI", append(ecParams, pemOf("EC PRIVATE KEY", ecSEC1)...), "ES256", "", dataURL(pemOf("PUBLIC KEY", ecDER))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := CreateToken(tc.sign, tc.alg, "carol", time.Time{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultTokenConfig()
			cfg.SecretKey, cfg.PublicKey = tc.secret, tc.pub
			p, err := NewToken(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if role, err := p.Authenticate(t.Context(), Credentials{Data: []byte(tok)}); err != nil || role != "carol" {
				t.Fatalf("Authenticate = %q, %v; want carol", role, err)
			}
		})
	}
}

func TestReadKeyErrors(t *testing.T) {
	for _, tc := range []struct{ setting, want string }{
		{"", "no key given"},
		{"/no/such/key", "does not exist"},
		{"file:///no/such/key", "does not exist"},
		{"file://elsewhere/key", "must be local"},
		{"data:;base64", "without ','"},
		{"data:;base64,!!!", "not valid base64"},
		{"data:;base64,", "holds no key"},
		{"/c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=", "does not exist"}, // looks like a path
		{"secret.key", "does not exist"},
		{"c2VjcmV0LXNlY3JldA", "does not exist"}, // unpadded: not taken for base64
	} {
		_, err := ReadKey(tc.setting)
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadKey(%q) = %v; want ErrInvalidKey mentioning %q", tc.setting, err, tc.want)
		}
	}
	if b, err := ReadKey("data:,plain%20text"); err != nil || string(b) != "plain text" {
		t.Errorf("ReadKey(plain data URL) = %q, %v", b, err)
	}
	// Pulsar's bare base64 form.
	if b, err := ReadKey("c2VjcmV0LXNlY3JldA=="); err != nil || string(b) != "secret-secret" {
		t.Errorf("ReadKey(bare base64) = %q, %v", b, err)
	}
}

// TestTokenForeignIssuer: tokens made by another JWT library, as an
// identity provider or Pulsar's jjwt would make them, verify.
func TestTokenForeignIssuer(t *testing.T) {
	k := keys()
	secret := GenerateSecretKey()
	claims := jwt.MapClaims{"sub": "dave", "iat": epoch.Unix(), "exp": epoch.Add(time.Minute).Unix(), "iss": "idp"}
	for _, tc := range []struct {
		name   string
		method jwt.SigningMethod
		key    any
		cfg    TokenConfig
		noTyp  bool
	}{
		{"HS256 like jjwt (no typ)", jwt.SigningMethodHS256, secret, TokenConfig{SecretKey: dataURL(secret)}, true},
		{"HS256", jwt.SigningMethodHS256, secret, TokenConfig{SecretKey: dataURL(secret)}, false},
		{"RS256", jwt.SigningMethodRS256, k.rsa, TokenConfig{PublicKey: dataURL(pemOf("PUBLIC KEY", spki(t, &k.rsa.PublicKey)))}, false},
		{"PS384", jwt.SigningMethodPS384, k.rsa, TokenConfig{PublicKey: dataURL(spki(t, &k.rsa.PublicKey))}, false},
		{"ES512", jwt.SigningMethodES512, k.ec["ES512"], TokenConfig{PublicKey: dataURL(spki(t, &k.ec["ES512"].PublicKey))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := jwt.NewWithClaims(tc.method, claims)
			if tc.noTyp {
				delete(tok.Header, "typ")
			}
			s, err := tok.SignedString(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			tc.cfg.Now = fixedClock
			p, err := NewToken(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			info, err := p.Verify("Bearer " + s)
			if err != nil || info.Role != "dave" || info.Claims["iss"] != "idp" {
				t.Fatalf("Verify = %+v, %v; want role dave, iss idp", info, err)
			}
		})
	}
}

func TestTokenRefusals(t *testing.T) {
	k := keys()
	secret := GenerateSecretKey()
	rsaPubDER := spki(t, &k.rsa.PublicKey)
	hs := func(c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	signed := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secretCfg := TokenConfig{SecretKey: dataURL(secret)}
	rsaCfg := TokenConfig{PublicKey: dataURL(rsaPubDER)}
	ecCfg := TokenConfig{PublicKey: dataURL(spki(t, &k.ec["ES256"].PublicKey))}
	sub := func(extra ...any) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "eve"}
		for i := 0; i < len(extra); i += 2 {
			c[extra[i].(string)] = extra[i+1]
		}
		return c
	}
	goodHS := hs(sub())
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, sub()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(goodHS, ".")
	tampered := parts[0] + "." + strings.TrimRight(dataURL([]byte(`{"sub":"admin"}`))[13:], "=") + "." + parts[2]

	for _, tc := range []struct {
		name  string
		cfg   TokenConfig
		token string
		kind  error // besides ErrUnauthenticated, or nil
		want  string
	}{
		{"expired", secretCfg, hs(sub("exp", epoch.Add(-time.Second).Unix())), ErrTokenExpired, "expired at 2026-03-01T11:59:59Z"},
		{"expired beyond skew", TokenConfig{SecretKey: secretCfg.SecretKey, ClockSkew: time.Minute}, hs(sub("exp", epoch.Add(-2*time.Minute).Unix())), ErrTokenExpired, "expired"},
		{"not valid yet", secretCfg, hs(sub("nbf", epoch.Add(time.Hour).Unix())), ErrTokenNotYetValid, "not valid before 2026-03-01T13:00:00Z"},
		{"wrong secret", secretCfg, signed(jwt.SigningMethodHS256, GenerateSecretKey(), sub()), nil, "signature does not verify"},
		{"tampered claims", secretCfg, tampered, nil, "signature does not verify"},
		{"wrong RSA key", rsaCfg, signed(jwt.SigningMethodRS256, k.rsaOther, sub()), nil, "signature does not verify"},
		{"alg none to secret", secretCfg, none, nil, `"alg": "none"`},
		{"alg none to public key", rsaCfg, none, nil, `"alg": "none"`},
		{"alg confusion: HS256 with the RSA public key's DER", rsaCfg, signed(jwt.SigningMethodHS256, rsaPubDER, sub()), nil, `algorithm "HS256" does not match the configured key`},
		{"alg confusion: HS256 with the RSA public key's PEM", rsaCfg, signed(jwt.SigningMethodHS256, pemOf("PUBLIC KEY", rsaPubDER), sub()), nil, `does not match`},
		{"RS256 token to a secret", secretCfg, signed(jwt.SigningMethodRS256, k.rsa, sub()), nil, `algorithm "RS256" does not match`},
		{"ES384 token to a P-256 key", ecCfg, signed(jwt.SigningMethodES384, k.ec["ES384"], sub()), nil, `algorithm "ES384" does not match the configured key (which verifies ES256)`},
		{"PS256 when PublicAlg is RS256", TokenConfig{PublicKey: rsaCfg.PublicKey, PublicAlg: "RS256"}, signed(jwt.SigningMethodPS256, k.rsa, sub()), nil, "does not match"},
		{"HS512 with a 32-byte secret", secretCfg, signed(jwt.SigningMethodHS512, secret, sub()), nil, "at least 64 bytes"},
		{"missing role claim", secretCfg, hs(jwt.MapClaims{"name": "eve"}), nil, `claim "sub" is missing`},
		{"role claim not a string", secretCfg, hs(jwt.MapClaims{"sub": 42}), nil, `claim "sub"`},
		{"custom role claim absent", TokenConfig{SecretKey: secretCfg.SecretKey, RoleClaim: "role"}, goodHS, nil, `claim "role" is missing`},
		{"audience missing", TokenConfig{SecretKey: secretCfg.SecretKey, Audience: "broker-a"}, goodHS, nil, `no audience claim "aud"`},
		{"audience mismatch", TokenConfig{SecretKey: secretCfg.SecretKey, Audience: "broker-a"}, hs(sub("aud", []string{"broker-b"})), nil, `does not include this broker's "broker-a"`},
		{"custom audience claim mismatch", TokenConfig{SecretKey: secretCfg.SecretKey, AudienceClaim: "scope", Audience: "broker-a"}, hs(sub("aud", "broker-a", "scope", "other")), nil, "does not include"},
		{"audience not a string", TokenConfig{SecretKey: secretCfg.SecretKey, Audience: "broker-a"}, hs(sub("aud", 7)), nil, "neither a string nor a list"},
		{"malformed", secretCfg, "not-a-token", nil, "malformed token"},
		{"unknown algorithm", secretCfg, strings.TrimRight(dataURL([]byte(`{"alg":"HS999"}`))[13:], "=") + "." + parts[1] + "." + parts[2], nil, "unsupported token algorithm"},
		{"empty", secretCfg, "  ", nil, "no token presented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Now = fixedClock
			p, err := NewToken(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			role, err := p.Authenticate(t.Context(), Credentials{Data: []byte(tc.token)})
			if err == nil {
				t.Fatalf("accepted as %q; want refusal", role)
			}
			if !errors.Is(err, ErrUnauthenticated) || (tc.kind != nil && !errors.Is(err, tc.kind)) {
				t.Errorf("err %v; want ErrUnauthenticated and %v", err, tc.kind)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %q; want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tc.token) && strings.TrimSpace(tc.token) != "" {
				t.Errorf("err %q repeats the token", err)
			}
		})
	}
}

func TestTokenAccepts(t *testing.T) {
	secret := GenerateSecretKey()
	hs := func(c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	key := dataURL(secret)
	for _, tc := range []struct {
		name  string
		cfg   TokenConfig
		token string
		want  string
	}{
		{"expired within skew", TokenConfig{SecretKey: key, ClockSkew: time.Minute}, hs(jwt.MapClaims{"sub": "a", "exp": epoch.Add(-30 * time.Second).Unix()}), "a"},
		{"nbf within skew", TokenConfig{SecretKey: key, ClockSkew: time.Minute}, hs(jwt.MapClaims{"sub": "a", "nbf": epoch.Add(30 * time.Second).Unix()}), "a"},
		{"exp exactly one second ahead", TokenConfig{SecretKey: key}, hs(jwt.MapClaims{"sub": "a", "exp": epoch.Add(time.Second).Unix()}), "a"},
		{"custom role claim", TokenConfig{SecretKey: key, RoleClaim: "role"}, hs(jwt.MapClaims{"sub": "x", "role": "ops"}), "ops"},
		{"role claim as a list", TokenConfig{SecretKey: key, RoleClaim: "roles"}, hs(jwt.MapClaims{"roles": []string{"ops", "dev"}}), "ops"},
		{"audience string", TokenConfig{SecretKey: key, Audience: "broker-a"}, hs(jwt.MapClaims{"sub": "a", "aud": "broker-a"}), "a"},
		{"audience list", TokenConfig{SecretKey: key, Audience: "broker-a"}, hs(jwt.MapClaims{"sub": "a", "aud": []string{"x", "broker-a"}}), "a"},
		{"custom audience claim", TokenConfig{SecretKey: key, AudienceClaim: "scope", Audience: "broker-a"}, hs(jwt.MapClaims{"sub": "a", "scope": "broker-a"}), "a"},
		{"bearer prefix and spaces", TokenConfig{SecretKey: key}, " bearer " + hs(jwt.MapClaims{"sub": "a"}) + "\n", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Now = fixedClock
			p, err := NewToken(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if role, err := p.Authenticate(context.Background(), Credentials{Data: []byte(tc.token)}); err != nil || role != tc.want {
				t.Fatalf("Authenticate = %q, %v; want %q", role, err, tc.want)
			}
		})
	}
}

func TestTokenConfigErrors(t *testing.T) {
	k := keys()
	secret := dataURL(GenerateSecretKey())
	rsaPub := dataURL(spki(t, &k.rsa.PublicKey))
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  TokenConfig
		want error
		msg  string
	}{
		{"no key", TokenConfig{}, ErrInvalidConfig, "set SecretKey"},
		{"both keys", TokenConfig{SecretKey: secret, PublicKey: rsaPub}, ErrInvalidConfig, "both set"},
		{"PublicAlg with secret", TokenConfig{SecretKey: secret, PublicAlg: "RS256"}, ErrInvalidConfig, "PublicAlg is for PublicKey"},
		{"unknown PublicAlg", TokenConfig{PublicKey: rsaPub, PublicAlg: "HS256"}, ErrInvalidConfig, "want one of"},
		{"PublicAlg for another key family", TokenConfig{PublicKey: rsaPub, PublicAlg: "ES256"}, ErrInvalidKey, "does not suit"},
		{"audience claim without audience", TokenConfig{SecretKey: secret, AudienceClaim: "aud"}, ErrInvalidConfig, "Audience"},
		{"negative skew", TokenConfig{SecretKey: secret, ClockSkew: -time.Second}, ErrInvalidConfig, "ClockSkew"},
		{"short secret", TokenConfig{SecretKey: dataURL([]byte("short"))}, ErrInvalidKey, "at least 32"},
		{"garbage public key", TokenConfig{PublicKey: dataURL([]byte("garbage"))}, ErrInvalidKey, "not an X.509"},
		{"private key as public", TokenConfig{PublicKey: dataURL(pemOf("PRIVATE KEY", pkcs8(t, k.rsa)))}, ErrInvalidKey, "not a public key"},
		{"small RSA key", TokenConfig{PublicKey: dataURL(spki(t, &small.PublicKey))}, ErrInvalidKey, "1024 bits"},
		{"missing file", TokenConfig{PublicKey: "/no/such.pem"}, ErrInvalidKey, "does not exist"},
	} {
		_, err := NewToken(tc.cfg)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: NewToken = %v; want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

func TestCreateTokenErrors(t *testing.T) {
	k := keys()
	secret := GenerateSecretKey()
	for _, tc := range []struct {
		name    string
		key     []byte
		alg     string
		subject string
		headers map[string]any
		want    string
	}{
		{"no subject", secret, "HS256", "", nil, "needs a subject"},
		{"alg header", secret, "HS256", "a", map[string]any{"alg": "none"}, `"alg"`},
		{"short secret for HS384", secret, "HS384", "a", nil, "at least 48 bytes"},
		{"secret for RS256", secret, "RS256", "a", nil, "RS256 needs a private key"},
		{"RSA key for ES256", pkcs8(t, k.rsa), "ES256", "a", nil, "cannot sign ES256"},
		{"P-256 key for ES384", pkcs8(t, k.ec["ES256"]), "ES384", "a", nil, "can sign only ES256"},
		{"unknown alg", pkcs8(t, k.rsa), "RS999", "a", nil, "unknown algorithm"},
		{"none", secret, "none", "a", nil, ""},
	} {
		if _, err := CreateToken(tc.key, tc.alg, tc.subject, time.Time{}, tc.headers); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CreateToken err %v; want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestGenerateKeyPair(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "ES384", "ES512"} {
		t.Run(alg, func(t *testing.T) {
			priv, pub, err := GenerateKeyPair(alg)
			if err != nil {
				t.Fatal(err)
			}
			// DER as Pulsar writes it: PKCS#8 and SubjectPublicKeyInfo.
			if _, err := x509.ParsePKCS8PrivateKey(priv); err != nil {
				t.Fatalf("private key is not PKCS#8 DER: %v", err)
			}
			pk, err := x509.ParsePKIXPublicKey(pub)
			if err != nil {
				t.Fatalf("public key is not SPKI DER: %v", err)
			}
			if r, ok := pk.(*rsa.PublicKey); ok && r.N.BitLen() != 2048 {
				t.Errorf("RSA key of %d bits; want 2048", r.N.BitLen())
			}
			if _, ok := pk.(*ecdsa.PublicKey); !ok && alg[0] == 'E' {
				t.Errorf("%s made a %T", alg, pk)
			}
			tok, err := CreateToken(priv, alg, "frank", time.Time{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewToken(TokenConfig{PublicKey: dataURL(pub)})
			if err != nil {
				t.Fatal(err)
			}
			if role, err := p.Authenticate(t.Context(), Credentials{Data: []byte(tok)}); err != nil || role != "frank" {
				t.Fatalf("Authenticate = %q, %v", role, err)
			}
		})
	}
	if _, _, err := GenerateKeyPair("HS256"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("GenerateKeyPair(HS256) = %v; want ErrInvalidKey", err)
	}
	if a, b := GenerateSecretKey(), GenerateSecretKey(); len(a) != 32 || bytes.Equal(a, b) {
		t.Errorf("GenerateSecretKey: %d bytes, equal twice: %v", len(a), bytes.Equal(a, b))
	}
}

func TestDecodeUnverified(t *testing.T) {
	tok, err := CreateToken(GenerateSecretKey(), "HS256", "gina", time.Unix(1893456000, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, c, err := DecodeUnverified(tok)
	if err != nil || h["alg"] != "HS256" || c["sub"] != "gina" || c["exp"].(interface{ String() string }).String() != "1893456000" {
		t.Fatalf("DecodeUnverified = %v, %v, %v", h, c, err)
	}
	for _, bad := range []string{"", "a.b", "!!.e30.x", "e30.!!.x", "bm90IGpzb24.e30.x"} {
		if _, _, err := DecodeUnverified(bad); err == nil {
			t.Errorf("DecodeUnverified(%q) succeeded", bad)
		}
	}
}
