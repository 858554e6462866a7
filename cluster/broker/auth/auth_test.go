package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// stubProvider is a Provider whose answer the test chooses.
type stubProvider struct {
	method string
	role   string
	err    error
}

func (s stubProvider) Method() string { return s.method }
func (s stubProvider) Authenticate(context.Context, Credentials) (string, error) {
	return s.role, s.err
}

func TestAuthenticatorFromConfig(t *testing.T) {
	secret := GenerateSecretKey()
	cfg := DefaultConfig()
	cfg.Enabled = true
	cfg.Providers = []string{"token", "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic", " tls "}
	cfg.Token.SecretKey = dataURL(secret)
	cfg.Basic.Conf = dataURL([]byte("apr:$apr1$saltsalt$yAAkm4libquA.ZWLHbSBq/\n"))
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Methods(), ","); got != "basic,tls,token" || !a.Enabled() {
		t.Fatalf("Methods %s, Enabled %v", got, a.Enabled())
	}
	tok, err := CreateToken(secret, "HS256", "alice", time.Time{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, data string
		role         string
		kinds        []error // when refused
	}{
		{"token", tok, "alice", nil},
		{"basic", "apr:password", "apr", nil},
		{"token", "garbage", "", []error{ErrUnauthenticated}},
		{"basic", "apr:nope", "", []error{ErrUnauthenticated}},
		{"tls", "", "", []error{ErrUnauthenticated}},
		{"athenz", "x", "", []error{ErrUnauthenticated, ErrUnknownMethod}},
		{"", "", "", []error{ErrUnauthenticated}},
		{"none", "", "", []error{ErrUnauthenticated}},
	} {
		role, err := a.Authenticate(t.Context(), tc.method, Credentials{Data: []byte(tc.data)})
		if tc.kinds == nil {
			if err != nil || role != tc.role {
				t.Errorf("%s: Authenticate = %q, %v; want %q", tc.method, role, err, tc.role)
			}
			continue
		}
		for _, k := range tc.kinds {
			if !errors.Is(err, k) {
				t.Errorf("%s: Authenticate = %q, %v; want %v", tc.method, role, err, k)
			}
		}
	}
	if _, err := a.Authenticate(t.Context(), "athenz", Credentials{}); !strings.Contains(err.Error(), "accepts basic, tls, token") {
		t.Errorf("unknown method error %q does not list the methods", err)
	}
}

func TestAuthenticatorAnonymousAndDisabled(t *testing.T) {
	a, err := New(Config{AnonymousRole: "anon", Providers: []string{"tls"}}) // disabled
	if err != nil {
		t.Fatal(err)
	}
	if role, err := a.Authenticate(t.Context(), "token", Credentials{Data: []byte("junk")}); err != nil || role != "anon" || a.Enabled() {
		t.Errorf("disabled: %q, %v, enabled %v; want anon", role, err, a.Enabled())
	}
	a, err = New(Config{Enabled: true, Providers: []string{"tls"}, AnonymousRole: "anon"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"", "none"} {
		if role, err := a.Authenticate(t.Context(), m, Credentials{}); err != nil || role != "anon" {
			t.Errorf("method %q: %q, %v; want anon", m, role, err)
		}
	}
	// A refusal by a provider is not turned into the anonymous role.
	if _, err := a.Authenticate(t.Context(), "tls", Credentials{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("tls without TLS = %v", err)
	}
}

func TestAuthenticatorProviderContract(t *testing.T) {
	plain := errors.New("backend down")
	a, err := NewWithProviders("", stubProvider{"empty", "", nil}, stubProvider{"plain", "", plain}, stubProvider{"ok", "r", nil}, stubProvider{"ctx", "", context.Canceled})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(t.Context(), "empty", Credentials{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("empty role: %v; want a refusal", err)
	}
	if _, err := a.Authenticate(t.Context(), "plain", Credentials{}); !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, plain) {
		t.Errorf("plain error: %v; want a refusal wrapping it", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := a.Authenticate(ctx, "ok", Credentials{}); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnauthenticated) {
		t.Errorf("cancelled: %v; want context.Canceled only", err)
	}
	if _, err := NewWithProviders("", stubProvider{"x", "", nil}, stubProvider{"x", "", nil}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("duplicate method: %v", err)
	}
	if _, err := NewWithProviders("", stubProvider{"none", "", nil}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("method none: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"default", DefaultConfig(), ""},
		{"disabled ignores provider settings", Config{Providers: []string{"token"}}, ""},
		{"unknown provider even when disabled", Config{Providers: []string{"kerberos"}}, "unknown provider"},
		{"enabled without providers", Config{Enabled: true}, "no provider"},
		{"twice", Config{Enabled: true, Providers: []string{"tls", "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"}}, "listed twice"},
		{"token without key", Config{Enabled: true, Providers: []string{"token"}}, "set SecretKey"},
		{"basic without file", Config{Enabled: true, Providers: []string{"basic"}}, "basicAuthConf"},
		{"tls alone", Config{Enabled: true, Providers: []string{"tls"}}, ""},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v; want %q", tc.name, err, tc.want)
		}
	}
	// New reads the files Validate does not.
	_, err := New(Config{Enabled: true, Providers: []string{"token"}, Token: TokenConfig{SecretKey: "/no/such/key"}})
	if !errors.Is(err, ErrInvalidKey) {
		t.Errorf("New with a missing key file = %v; want ErrInvalidKey", err)
	}
}
