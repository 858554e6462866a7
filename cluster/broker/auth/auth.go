package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Method names, as Pulsar clients send them in CONNECT's auth_method_name
// (and as Pulsar's providers return from getAuthMethodName).
const (
	MethodToken = "token"
	MethodTLS   = "tls"
	MethodBasic = "basic"
	// MethodNone is what a client without credentials sends, if anything.
	MethodNone = "none"
)

// Credentials are what a client presented.
type Credentials struct {
	// Data is the method's data: CONNECT's auth_data, or over HTTP the
	// bearer token ("token") or the decoded "user:password" ("basic").
	Data []byte
	// TLS is the connection's TLS state, nil on a plain connection. The
	// "tls" method reads the verified client certificate from it.
	TLS *tls.ConnectionState
}

// Provider authenticates one method. Authenticate returns the client's
// role, never empty on success; every refusal matches ErrUnauthenticated.
// Implementations are safe for concurrent use.
type Provider interface {
	Method() string
	Authenticate(ctx context.Context, c Credentials) (role string, err error)
}

// Expiring is implemented by the providers whose credentials stop being
// valid at a time they carry (a token's exp). A broker asks a connection
// that outlives its credentials for fresh ones (Pulsar's
// authenticationRefreshCheckSeconds).
type Expiring interface {
	// ExpiresAt returns when c stops being valid; zero when never. It is
	// asked only of credentials Authenticate accepted.
	ExpiresAt(c Credentials) time.Time
}

// pulsarProviderClasses maps the class names of Pulsar's
// authenticationProviders setting to methods, so that a broker.conf's value
// can be used as it is.
var pulsarProviderClasses = map[string]string{
	"org.apache.pulsar.broker.authentication.AuthenticationProviderToken": MethodToken,
	"org.apache.pulsar.broker.authentication.AuthenticationProviderTls":   MethodTLS,
	"org.apache.pulsar.broker.authentication.AuthenticationProviderBasic": MethodBasic,
}

// Config configures client authentication, as Pulsar's broker.conf does.
type Config struct {
	// Enabled is Pulsar's authenticationEnabled. When false no credentials
	// are looked at and every client gets AnonymousRole (usually empty):
	// authorization must then be off too.
	Enabled bool
	// Providers is Pulsar's authenticationProviders: the methods accepted,
	// "token", "tls" and "basic" (Pulsar's provider class names are
	// accepted as well). At least one when Enabled.
	Providers []string
	// AnonymousRole is Pulsar's anonymousUserRole: the role of a client that
	// presents no credentials (method "" or "none") while Enabled. Empty
	// refuses such clients.
	AnonymousRole string
	// Token configures the "token" method; used only when it is enabled.
	Token TokenConfig
	// Basic configures the "basic" method; used only when it is enabled.
	Basic BasicConfig
}

// DefaultConfig returns Pulsar's defaults: authentication off, and the
// token settings' defaults for when it is turned on.
func DefaultConfig() Config {
	return Config{Token: DefaultTokenConfig()}
}

// methods returns the enabled methods, normalised and in order.
func (c Config) methods() ([]string, error) {
	var out []string
	for _, p := range c.Providers {
		m := strings.TrimSpace(p)
		if cls, ok := pulsarProviderClasses[m]; ok {
			m = cls
		}
		switch m {
		case MethodToken, MethodTLS, MethodBasic:
		default:
			return nil, fmt.Errorf("%w: unknown provider %q; want token, tls or basic", ErrInvalidConfig, p)
		}
		if slices.Contains(out, m) {
			return nil, fmt.Errorf("%w: provider %q is listed twice", ErrInvalidConfig, m)
		}
		out = append(out, m)
	}
	return out, nil
}

// Validate checks the provider list and, when Enabled, the settings of each
// enabled provider. It reads no files: New does.
func (c Config) Validate() error {
	ms, err := c.methods()
	if err != nil {
		return err
	}
	if !c.Enabled {
		return nil
	}
	if len(ms) == 0 {
		return fmt.Errorf("%w: authentication is enabled but no provider is (set Providers, e.g. token)", ErrInvalidConfig)
	}
	for _, m := range ms {
		switch m {
		case MethodToken:
			err = c.Token.Validate()
		case MethodBasic:
			err = c.Basic.Validate()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Authenticator dispatches credentials to the provider of their method. It
// is immutable and safe for concurrent use.
type Authenticator struct {
	enabled   bool
	anonymous string
	providers map[string]Provider
}

// New validates cfg and builds its providers, reading their key and
// password files.
func New(cfg Config) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return &Authenticator{anonymous: cfg.AnonymousRole}, nil
	}
	ms, _ := cfg.methods() // validated above
	var ps []Provider
	for _, m := range ms {
		var (
			p   Provider
			err error
		)
		switch m {
		case MethodToken:
			p, err = NewToken(cfg.Token)
		case MethodTLS:
			p = NewTLS()
		case MethodBasic:
			p, err = NewBasic(cfg.Basic)
		}
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return NewWithProviders(cfg.AnonymousRole, ps...)
}

// NewWithProviders returns an enabled Authenticator over the given
// providers, one per method; anonymousRole is as Config.AnonymousRole.
func NewWithProviders(anonymousRole string, providers ...Provider) (*Authenticator, error) {
	a := &Authenticator{enabled: true, anonymous: anonymousRole, providers: map[string]Provider{}}
	for _, p := range providers {
		m := p.Method()
		if m == "" || m == MethodNone {
			return nil, fmt.Errorf("%w: provider %T has method name %q", ErrInvalidConfig, p, m)
		}
		if _, dup := a.providers[m]; dup {
			return nil, fmt.Errorf("%w: two providers for method %q", ErrInvalidConfig, m)
		}
		a.providers[m] = p
	}
	return a, nil
}

// Enabled reports whether credentials are checked at all.
func (a *Authenticator) Enabled() bool { return a.enabled }

// Methods returns the enabled methods, sorted.
func (a *Authenticator) Methods() []string { return slices.Sorted(maps.Keys(a.providers)) }

// Authenticate returns the role of a client that presents c for method.
//
// When authentication is disabled it returns the anonymous role without
// looking at c. A method of "" or "none" gets the anonymous role if one is
// configured. Every refusal matches ErrUnauthenticated; a method no
// provider serves also matches ErrUnknownMethod. The only other errors are
// ctx's.
func (a *Authenticator) Authenticate(ctx context.Context, method string, c Credentials) (string, error) {
	if !a.enabled {
		return a.anonymous, nil
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if method == "" || method == MethodNone {
		if a.anonymous == "" {
			return "", refuse("anonymous", "no credentials presented and no anonymous role is configured")
		}
		return a.anonymous, nil
	}
	p, ok := a.providers[method]
	if !ok {
		return "", &refusal{
			method: fmt.Sprintf("%q", method),
			msg:    "method not enabled; this broker accepts " + strings.Join(a.Methods(), ", "),
			kind:   ErrUnknownMethod,
		}
	}
	role, err := p.Authenticate(ctx, c)
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return "", err
	case err != nil && !errors.Is(err, ErrUnauthenticated):
		// A provider's own failure still must read as a refusal to the
		// caller, which maps refusals to Pulsar's AuthenticationError.
		return "", &refusal{method: method, msg: "provider failed", cause: err}
	case err != nil:
		return "", err
	case role == "":
		return "", refuse(method, "provider returned an empty role")
	}
	return role, nil
}

// ExpiresAt returns when credentials that Authenticate accepted for method
// stop being valid: zero when never, or when the method's credentials do
// not expire.
func (a *Authenticator) ExpiresAt(method string, c Credentials) time.Time {
	if p, ok := a.providers[method].(Expiring); ok && a.enabled {
		return p.ExpiresAt(c)
	}
	return time.Time{}
}
