package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS is the "tls" provider, Pulsar's AuthenticationProviderTls: the role
// is the Subject CommonName of the client's certificate.
//
// It trusts only a certificate that the TLS handshake verified against the
// broker's trust store (VerifiedChains). Pulsar with
// tlsAllowInsecureConnection also takes the CN of an unverified
// certificate; Meridian refuses that, since anyone can mint a certificate
// with any CN.
type TLS struct{}

// NewTLS returns the "tls" provider; it has no settings.
func NewTLS() *TLS { return &TLS{} }

// Method returns "tls".
func (*TLS) Method() string { return MethodTLS }

// Authenticate returns the CommonName of c.TLS's verified client
// certificate; c.Data is ignored (Pulsar's clients send none).
func (*TLS) Authenticate(_ context.Context, c Credentials) (string, error) {
	cs := c.TLS
	switch {
	case cs == nil:
		return "", refuse(MethodTLS, "the connection is not TLS")
	case !cs.HandshakeComplete:
		return "", refuse(MethodTLS, "the TLS handshake is not complete")
	case len(cs.PeerCertificates) == 0:
		return "", refuse(MethodTLS, "the client presented no certificate")
	case len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0:
		return "", refuse(MethodTLS, "the client certificate was not verified against the broker's trust store (set tlsTrustCertsFilePath, and do not allow insecure connections)")
	}
	leaf := cs.VerifiedChains[0][0]
	if leaf.Subject.CommonName == "" {
		return "", refuse(MethodTLS, fmt.Sprintf("the client certificate (subject %q) has no CommonName to take the role from", leaf.Subject.String()))
	}
	return leaf.Subject.CommonName, nil
}

// ServerTLSConfig builds the broker's TLS configuration from Pulsar's
// settings: tlsCertificateFilePath and tlsKeyFilePath (PEM), the broker's
// own certificate chain and key; tlsTrustCertsFilePath (PEM, optional), the
// CAs that client certificates are verified against;
// tlsRequireTrustedClientCertOnConnect (requireClientCert); and
// tlsAllowInsecureConnection.
//
// With a trust file, a client certificate is requested and, if sent,
// verified (a bad one fails the handshake); with requireClientCert a
// client without one is refused too. Without a trust file no client
// certificate can be verified, so requireClientCert is an error unless
// allowInsecureConnection, which requests certificates without verifying
// them: the connection is encrypted but the "tls" method refuses such
// clients. TLS 1.2 is the minimum, as in Pulsar's defaults.
func ServerTLSConfig(certFile, keyFile, trustCertsFile string, requireClientCert, allowInsecureConnection bool) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate file (tlsCertificateFilePath) and a key file (tlsKeyFilePath)", ErrInvalidConfig)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: loading the broker's certificate %s and key %s: %v", ErrInvalidConfig, certFile, keyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	switch {
	case allowInsecureConnection && requireClientCert:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case allowInsecureConnection:
		cfg.ClientAuth = tls.RequestClientCert
	case trustCertsFile == "" && requireClientCert:
		return nil, fmt.Errorf("%w: requiring trusted client certificates needs a trust file (tlsTrustCertsFilePath) to verify them against", ErrInvalidConfig)
	case trustCertsFile == "":
		cfg.ClientAuth = tls.NoClientCert
	case requireClientCert:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if trustCertsFile != "" && !allowInsecureConnection {
		pool, err := loadCertPool(trustCertsFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

func loadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: trust file %s does not exist", ErrInvalidConfig, path)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: trust file %s holds no PEM certificate", ErrInvalidConfig, path)
	}
	return pool, nil
}
