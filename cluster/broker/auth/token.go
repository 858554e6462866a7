package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenConfig configures the "token" method. Exactly one of SecretKey and
// PublicKey is set.
type TokenConfig struct {
	// SecretKey is Pulsar's tokenSecretKey: the shared HMAC secret, as
	// data:;base64,…, file:///path or a path (see ReadKey). Its bytes are
	// used raw, as `pulsar tokens create-secret-key` writes them; at least
	// 32 bytes. Tokens may use HS256, HS384 (key ≥ 48 bytes) or HS512
	// (key ≥ 64 bytes).
	SecretKey string
	// PublicKey is Pulsar's tokenPublicKey: an RSA (≥ 2048 bits) or EC
	// (P-256, P-384, P-521) public key, in the same forms, DER (as `pulsar
	// tokens create-key-pair` writes it) or PEM.
	PublicKey string
	// PublicAlg is Pulsar's tokenPublicAlg. When set, it is the only
	// algorithm accepted with PublicKey; when empty, any algorithm of the
	// key's family is (RS* and PS* for RSA, the curve's ES* for EC), which
	// is what Pulsar's parser accepts whatever tokenPublicAlg says.
	PublicAlg string
	// RoleClaim is Pulsar's tokenAuthClaim: the claim holding the role, a
	// string or a list whose first element is taken. Default "sub".
	RoleClaim string
	// AudienceClaim is Pulsar's tokenAudienceClaim. When set, a token is
	// accepted only if that claim (a string or a list) holds Audience.
	// Defaults to "aud" when Audience is set.
	AudienceClaim string
	// Audience is Pulsar's tokenAudience: this broker's name in tokens'
	// audience claim. Required when AudienceClaim is set.
	Audience string
	// ClockSkew is how far exp and nbf may be off the broker's clock.
	// Default 0, as in Pulsar; at most 10 minutes, since each second of it
	// is a second a leaked, expired token still works.
	ClockSkew time.Duration
	// Now is the clock that exp and nbf are checked against; nil means
	// time.Now.
	Now func() time.Time
}

// maxClockSkew bounds TokenConfig.ClockSkew.
const maxClockSkew = 10 * time.Minute

// DefaultTokenConfig returns Pulsar's defaults; a key must still be set.
func DefaultTokenConfig() TokenConfig {
	return TokenConfig{RoleClaim: "sub"}
}

// Validate checks the fields; it reads no key.
func (c TokenConfig) Validate() error {
	switch {
	case c.SecretKey == "" && c.PublicKey == "":
		return fmt.Errorf("%w: token: set SecretKey (tokenSecretKey) or PublicKey (tokenPublicKey)", ErrInvalidConfig)
	case c.SecretKey != "" && c.PublicKey != "":
		return fmt.Errorf("%w: token: SecretKey and PublicKey are both set; a broker verifies with one of them", ErrInvalidConfig)
	case c.PublicAlg != "" && c.SecretKey != "":
		return fmt.Errorf("%w: token: PublicAlg is for PublicKey; a SecretKey verifies HS256/384/512", ErrInvalidConfig)
	case c.PublicAlg != "" && !slices.Contains(rsaAlgs, c.PublicAlg) && !slices.Contains([]string{"ES256", "ES384", "ES512"}, c.PublicAlg):
		return fmt.Errorf("%w: token: PublicAlg %q, want one of RS256/384/512, PS256/384/512, ES256/384/512", ErrInvalidConfig, c.PublicAlg)
	case c.AudienceClaim != "" && c.Audience == "":
		return fmt.Errorf("%w: token: AudienceClaim %q is set but Audience (this broker's audience) is not", ErrInvalidConfig, c.AudienceClaim)
	case c.ClockSkew < 0 || c.ClockSkew > maxClockSkew:
		return fmt.Errorf("%w: token: ClockSkew %v, want 0 to %v", ErrInvalidConfig, c.ClockSkew, maxClockSkew)
	}
	return nil
}

// Token is the "token" provider, Pulsar's AuthenticationProviderToken: it
// verifies a JWT against the one configured key and returns its role claim.
type Token struct {
	key       any      // []byte for HMAC, else *rsa.PublicKey or *ecdsa.PublicKey
	algs      []string // the algorithms key may verify; never "none"
	roleClaim string
	audClaim  string // "" when no audience is checked
	audience  string
	skew      time.Duration
	now       func() time.Time
}

// TokenInfo is what a verified token says.
type TokenInfo struct {
	// Role is the role claim's value.
	Role string
	// ExpiresAt is the token's exp, zero when it never expires. A broker
	// keeping a connection open past it should ask for a fresh token.
	ExpiresAt time.Time
	// Claims are all the token's claims, as decoded from JSON.
	Claims map[string]any
}

// NewToken validates cfg and reads its key.
func NewToken(cfg TokenConfig) (*Token, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Token{
		roleClaim: cfg.RoleClaim,
		audClaim:  cfg.AudienceClaim,
		audience:  cfg.Audience,
		skew:      cfg.ClockSkew,
		now:       cfg.Now,
	}
	if t.roleClaim == "" {
		t.roleClaim = "sub"
	}
	if t.audience != "" && t.audClaim == "" {
		t.audClaim = "aud"
	}
	if t.now == nil {
		t.now = time.Now
	}
	if cfg.SecretKey != "" {
		b, err := ReadKey(cfg.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("token: SecretKey: %w", err)
		}
		if len(b) < minHMACKey["HS256"] {
			return nil, fmt.Errorf("%w: token: SecretKey is %d bytes, want at least 32 (`meridian token create-secret-key` makes one)", ErrInvalidKey, len(b))
		}
		t.key, t.algs = b, hmacAlgs
		return t, nil
	}
	b, err := ReadKey(cfg.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("token: PublicKey: %w", err)
	}
	pub, err := ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("token: PublicKey: %w", err)
	}
	algs, _ := algsForPublicKey(pub) // checked by ParsePublicKey
	if cfg.PublicAlg != "" {
		if !slices.Contains(algs, cfg.PublicAlg) {
			return nil, fmt.Errorf("%w: token: PublicAlg %s does not suit the %T in PublicKey (it suits %s)", ErrInvalidKey, cfg.PublicAlg, pub, strings.Join(algs, ", "))
		}
		algs = []string{cfg.PublicAlg}
	}
	t.key, t.algs = pub, algs
	return t, nil
}

// Method returns "token".
func (t *Token) Method() string { return MethodToken }

// Authenticate verifies the token in c.Data and returns its role.
func (t *Token) Authenticate(_ context.Context, c Credentials) (string, error) {
	info, err := t.Verify(string(c.Data))
	return info.Role, err
}

// ExpiresAt returns the exp of the token in c.Data (Expiring). The token
// was verified by Authenticate, and may have expired since: its claims are
// read without verifying it again.
func (t *Token) ExpiresAt(c Credentials) time.Time {
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(bareToken(string(c.Data)), claims); err != nil {
		return time.Time{}
	}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		return exp.Time
	}
	return time.Time{}
}

// errAlg carries the keyfunc's refusal of a token's algorithm through
// jwt's error wrapping.
type errAlg struct{ msg string }

func (e errAlg) Error() string { return e.msg }

// Verify checks a token's signature, algorithm, exp, nbf and audience, and
// returns its role. A leading "Bearer " is ignored.
func (t *Token) Verify(token string) (TokenInfo, error) {
	token = bareToken(token)
	if token == "" {
		return TokenInfo{}, refuse(MethodToken, "no token presented")
	}
	claims := jwt.MapClaims{}
	p := jwt.NewParser(jwt.WithTimeFunc(t.now), jwt.WithLeeway(t.skew))
	_, err := p.ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
		alg, _ := tok.Header["alg"].(string)
		if strings.EqualFold(alg, "none") {
			return nil, errAlg{`unsigned token ("alg": "none") refused`}
		}
		if !slices.Contains(t.algs, alg) {
			return nil, errAlg{fmt.Sprintf("token algorithm %q does not match the configured key (which verifies %s)", alg, strings.Join(t.algs, ", "))}
		}
		if b, ok := t.key.([]byte); ok && len(b) < minHMACKey[alg] {
			return nil, errAlg{fmt.Sprintf("token algorithm %s needs a secret key of at least %d bytes; the configured one has %d", alg, minHMACKey[alg], len(b))}
		}
		return t.key, nil
	})
	if err != nil {
		return TokenInfo{}, t.refusal(err, claims)
	}
	info := TokenInfo{Claims: claims}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		info.ExpiresAt = exp.Time
	}
	switch r := claims[t.roleClaim].(type) {
	case string:
		info.Role = r
	case []any:
		if len(r) > 0 {
			info.Role, _ = r[0].(string)
		}
	}
	if info.Role == "" {
		return TokenInfo{}, refuse(MethodToken, fmt.Sprintf("token has no role: claim %q is missing, empty or not a string", t.roleClaim))
	}
	if t.audClaim != "" {
		if err := t.checkAudience(claims); err != nil {
			return TokenInfo{}, err
		}
	}
	return info, nil
}

func (t *Token) checkAudience(claims jwt.MapClaims) error {
	var auds []string
	switch a := claims[t.audClaim].(type) {
	case nil:
		return refuse(MethodToken, fmt.Sprintf("token has no audience claim %q; this broker's audience is %q", t.audClaim, t.audience))
	case string:
		auds = []string{a}
	case []any:
		for _, v := range a {
			if s, ok := v.(string); ok {
				auds = append(auds, s)
			}
		}
	default:
		return refuse(MethodToken, fmt.Sprintf("token's audience claim %q is neither a string nor a list", t.audClaim))
	}
	if !slices.Contains(auds, t.audience) {
		return refuse(MethodToken, fmt.Sprintf("token's audience %q does not include this broker's %q", auds, t.audience))
	}
	return nil
}

// refusal turns a jwt parse error into a refusal that says what was wrong
// without repeating the token.
func (t *Token) refusal(err error, claims jwt.MapClaims) error {
	var ea errAlg
	switch {
	case errors.As(err, &ea):
		return refuse(MethodToken, ea.msg)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return &refusal{method: MethodToken, msg: "malformed token", cause: err}
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(MethodToken, "signature does not verify with the configured key")
	case errors.Is(err, jwt.ErrTokenExpired):
		msg := "token expired"
		if exp, e := claims.GetExpirationTime(); e == nil && exp != nil {
			msg = fmt.Sprintf("token expired at %s (now %s)", exp.UTC().Format(time.RFC3339), t.now().UTC().Format(time.RFC3339))
		}
		return &refusal{method: MethodToken, msg: msg, kind: ErrTokenExpired}
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		msg := "token not valid yet"
		if nbf, e := claims.GetNotBefore(); e == nil && nbf != nil {
			msg = fmt.Sprintf("token not valid before %s (now %s)", nbf.UTC().Format(time.RFC3339), t.now().UTC().Format(time.RFC3339))
		}
		return &refusal{method: MethodToken, msg: msg, kind: ErrTokenNotYetValid}
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return &refusal{method: MethodToken, msg: fmt.Sprintf("unsupported token algorithm (this broker verifies %s)", strings.Join(t.algs, ", ")), cause: err}
	default:
		return &refusal{method: MethodToken, msg: "invalid token", cause: err}
	}
}

// bareToken strips the blanks and a leading "Bearer " around a token.
func bareToken(token string) string {
	token = strings.TrimSpace(token)
	if len(token) > 7 && strings.EqualFold(token[:7], "bearer ") {
		token = strings.TrimSpace(token[7:])
	}
	return token
}
