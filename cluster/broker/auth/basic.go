package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// BasicConfig configures the "basic" method.
type BasicConfig struct {
	// Conf is Pulsar's basicAuthConf: the htpasswd file, as a path,
	// file:///path, data:;base64,<base64 of the file> or the bare base64
	// (see ReadKey). Each line is user:hash, the hash $apr1$ (htpasswd -m)
	// or bcrypt ($2y$/$2a$/$2b$, htpasswd -B); blank lines and # comments
	// are skipped. Pulsar also takes traditional DES crypt (htpasswd -d),
	// which truncates passwords to 8 bytes; Meridian refuses such a file,
	// naming the line. The file is read once, by NewBasic.
	Conf string
}

// Validate checks that Conf is set.
func (c BasicConfig) Validate() error {
	if strings.TrimSpace(c.Conf) == "" {
		return fmt.Errorf("%w: basic: Conf (basicAuthConf) must name the htpasswd file", ErrInvalidConfig)
	}
	return nil
}

// Basic is the "basic" provider, Pulsar's AuthenticationProviderBasic: the
// client sends "user:password" and the role is the user.
type Basic struct {
	users map[string]string // user -> hash, every hash checked at load
}

// NewBasic reads and checks cfg.Conf. A line it cannot use (no ':', a
// user listed twice, a hash scheme other than $apr1$ or bcrypt) fails the
// whole file: a user silently missing would be harder to diagnose.
func NewBasic(cfg BasicConfig) (*Basic, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := ReadKey(cfg.Conf)
	if err != nil {
		return nil, fmt.Errorf("basic: Conf: %w", err)
	}
	users, err := parseHtpasswd(b)
	if err != nil {
		return nil, err
	}
	return &Basic{users: users}, nil
}

func parseHtpasswd(b []byte) (map[string]string, error) {
	users := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		switch {
		case !ok || user == "":
			return nil, fmt.Errorf("%w: basic: htpasswd line %d is not user:hash", ErrInvalidConfig, n)
		case users[user] != "":
			return nil, fmt.Errorf("%w: basic: htpasswd line %d: user %q is listed twice", ErrInvalidConfig, n, user)
		}
		if err := checkHash(hash); err != nil {
			return nil, fmt.Errorf("%w: basic: htpasswd line %d (user %q): %v", ErrInvalidConfig, n, user, err)
		}
		users[user] = hash
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: basic: reading htpasswd: %v", ErrInvalidConfig, err)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("%w: basic: the htpasswd file has no users", ErrInvalidConfig)
	}
	return users, nil
}

// checkHash accepts the hash schemes verify understands.
func checkHash(hash string) error {
	switch {
	case strings.HasPrefix(hash, apr1Magic):
		if _, _, ok := splitAPR1(hash); !ok {
			return fmt.Errorf("malformed $apr1$ hash")
		}
		return nil
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return fmt.Errorf("malformed bcrypt hash: %v", err)
		}
		return nil
	}
	return fmt.Errorf("unsupported hash scheme; use $apr1$ (htpasswd -m) or bcrypt (htpasswd -B)")
}

// Method returns "basic".
func (*Basic) Method() string { return MethodBasic }

// Authenticate checks c.Data, "user:password", and returns the user. The
// refusal does not say whether the user exists.
func (b *Basic) Authenticate(ctx context.Context, c Credentials) (string, error) {
	user, password, ok := strings.Cut(string(c.Data), ":")
	if !ok || user == "" {
		return "", refuse(MethodBasic, "credentials are not user:password")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	hash, ok := b.users[user]
	if !ok || !verifyPassword(hash, password) {
		return "", refuse(MethodBasic, "unknown user or wrong password")
	}
	return user, nil
}

// verifyPassword reports whether password matches hash, a hash accepted by
// checkHash.
func verifyPassword(hash, password string) bool {
	if strings.HasPrefix(hash, apr1Magic) {
		salt, _, _ := splitAPR1(hash)
		return subtle.ConstantTimeCompare([]byte(APR1(password, salt)), []byte(hash)) == 1
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}
