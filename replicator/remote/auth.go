package remote

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/meridian-mq/meridian/global"
)

// The authentication plugins the replicator speaks, by Pulsar's class name
// and pulsar-client-go's short name.
const (
	pluginTokenClass = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
	pluginToken      = "token"
	// methodToken is what CONNECT's auth_method_name says for a token.
	methodToken = "token"
)

// authMethod is what CONNECT carries: a method name and, for each
// handshake, its data. A token given as a file is read again on every
// handshake, so that a rotated token is picked up by the next connection.
type authMethod struct {
	name string
	data func() ([]byte, error)
}

// noAuth is the anonymous method: CONNECT carries no auth fields.
var noAuth = authMethod{}

// newAuth parses a cluster record's authenticationPlugin and
// authenticationParameters as Pulsar's AuthenticationToken.configure does:
// "token:<jwt>", "file:<path or file:// URI>", a JSON object with "token"
// or "file", or else the whole string as the token.
func newAuth(plugin, params string) (authMethod, error) {
	switch plugin {
	case "":
		return noAuth, nil
	case pluginToken, pluginTokenClass:
	default:
		return authMethod{}, fmt.Errorf("%w: authenticationPlugin %q is not supported by the replicator; use %s (token authentication)",
			ErrInvalidConfig, plugin, pluginTokenClass)
	}
	params = strings.TrimSpace(params)
	var token, file string
	switch {
	case strings.HasPrefix(params, "token:"):
		token = strings.TrimPrefix(params, "token:")
	case strings.HasPrefix(params, "file:"):
		file = params
	case strings.HasPrefix(params, "{"):
		var p struct{ Token, File string }
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			return authMethod{}, fmt.Errorf("%w: authenticationParameters are not valid JSON: %v", ErrInvalidConfig, err)
		}
		token, file = p.Token, p.File
	default:
		token = params
	}
	if file != "" {
		path, err := tokenFilePath(file)
		if err != nil {
			return authMethod{}, err
		}
		return authMethod{name: methodToken, data: func() ([]byte, error) { return readToken(path) }}, nil
	}
	if token == "" {
		return authMethod{}, fmt.Errorf("%w: token authentication needs authenticationParameters \"token:<jwt>\" or {\"token\":\"<jwt>\"}", ErrInvalidConfig)
	}
	return authMethod{name: methodToken, data: func() ([]byte, error) { return []byte(token), nil }}, nil
}

// tokenFilePath accepts "file:///abs/path", "file:/abs/path" and
// "file:relative" (Pulsar accepts the URI forms; the last is a convenience).
func tokenFilePath(s string) (string, error) {
	u, err := url.Parse(s)
	if err == nil && u.Path != "" {
		return u.Path, nil
	}
	if path := strings.TrimPrefix(s, "file:"); path != "" {
		return path, nil
	}
	return "", fmt.Errorf("%w: token file %q has no path", ErrInvalidConfig, s)
}

func readToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: read token file: %v", ErrInvalidConfig, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return nil, fmt.Errorf("%w: token file %s is empty", ErrInvalidConfig, path)
	}
	return []byte(token), nil
}

// endpoint is one broker address to dial.
type endpoint struct {
	host string // host:port
	tls  bool
}

func (e endpoint) String() string {
	if e.tls {
		return "pulsar+ssl://" + e.host
	}
	return "pulsar://" + e.host
}

// serviceHosts returns the brokers of a cluster record to look topics up
// on: brokerServiceUrlTls when brokerClientTlsEnabled, else
// brokerServiceUrl, each possibly listing several hosts
// ("pulsar://a:6650,b:6650"). The replicator speaks the binary protocol
// only, so the HTTP service URLs are not used.
func serviceHosts(c global.ClusterData) ([]endpoint, error) {
	raw, scheme, field := c.BrokerServiceURL, "pulsar", "brokerServiceUrl"
	if c.BrokerClientTLSEnabled {
		raw, scheme, field = c.BrokerServiceURLTLS, "pulsar+ssl", "brokerServiceUrlTls"
	}
	if raw == "" {
		return nil, fmt.Errorf("%w: the cluster record has no %s for the replicator to connect to", ErrInvalidConfig, field)
	}
	got, hosts, ok := global.ServiceHosts(raw)
	if !ok || got != scheme {
		return nil, fmt.Errorf("%w: %s %q is not %s://host:port", ErrInvalidConfig, field, raw, scheme)
	}
	var eps []endpoint
	for _, h := range hosts {
		if !strings.Contains(h, ":") {
			return nil, fmt.Errorf("%w: %s %q: host %q is not host:port", ErrInvalidConfig, field, raw, h)
		}
		eps = append(eps, endpoint{host: h, tls: c.BrokerClientTLSEnabled})
	}
	return eps, nil
}

// redirectTarget is the broker a LOOKUP answer points to, on the transport
// this producer uses (pulsar-client-go's selectServiceURL).
func redirectTarget(useTLS bool, plain, secure string) (endpoint, error) {
	raw, scheme := plain, "pulsar://"
	if useTLS {
		raw, scheme = secure, "pulsar+ssl://"
	}
	host, ok := strings.CutPrefix(raw, scheme)
	if !ok || host == "" {
		return endpoint{}, fmt.Errorf("%w: lookup answered broker URL %q (TLS %q), want %shost:port", ErrProtocol, plain, secure, scheme)
	}
	return endpoint{host: strings.TrimSuffix(host, "/"), tls: useTLS}, nil
}

// tlsConfig is the client TLS configuration for a cluster record: its
// trust file (else the system's roots), or no verification at all when it
// allows insecure connections. The certificate's name is checked against
// the host dialled.
func tlsConfig(c global.ClusterData, host string) (*tls.Config, error) {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		return nil, fmt.Errorf("%w: broker address %q is not host:port", ErrInvalidConfig, host)
	}
	cfg := &tls.Config{ServerName: name, InsecureSkipVerify: c.TLSAllowInsecureConnection, MinVersion: tls.VersionTLS12}
	if c.BrokerClientTrustCertsFilePath != "" {
		pem, err := os.ReadFile(c.BrokerClientTrustCertsFilePath)
		if err != nil {
			return nil, fmt.Errorf("%w: brokerClientTrustCertsFilePath: %v", ErrInvalidConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: brokerClientTrustCertsFilePath %s holds no PEM certificate", ErrInvalidConfig, c.BrokerClientTrustCertsFilePath)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
