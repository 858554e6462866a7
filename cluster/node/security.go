package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// TLSFiles names the PEM files of one side of a TLS connection, as the
// flags and the README give them. Which files a role needs:
//
//	a client of a server with its own CA        CAFile
//	a client of a server that requires mTLS     CAFile, CertFile, KeyFile
//	a server                                    CertFile, KeyFile
//	a server that requires mTLS                 CertFile, KeyFile, CAFile (the clients' CA)
type TLSFiles struct {
	// CAFile holds the CA certificates that verify the other side: the
	// server's, for a client (empty: the system's roots); the clients',
	// for a server, which then requires and verifies client certificates.
	CAFile string
	// CertFile and KeyFile are this side's certificate chain and key;
	// both or neither.
	CertFile, KeyFile string
}

// IsZero reports whether no file is named: no TLS.
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

// ClientConfig reads the files into a client's TLS configuration (TLS 1.2
// at least), or nil when no file is named.
func (f TLSFiles) ClientConfig() (*tls.Config, error) {
	if f.IsZero() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	var err error
	if f.CAFile != "" {
		if c.RootCAs, err = readPool(f.CAFile); err != nil {
			return nil, err
		}
	}
	if c.Certificates, err = f.keyPair(false); err != nil {
		return nil, err
	}
	return c, nil
}

// ServerConfig reads the files into a server's TLS configuration, or nil
// when no file is named. With CAFile, the server requires a client
// certificate signed by it (mutual TLS).
func (f TLSFiles) ServerConfig() (*tls.Config, error) {
	if f.IsZero() {
		return nil, nil
	}
	certs, err := f.keyPair(true)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs}
	if f.CAFile != "" {
		if c.ClientCAs, err = readPool(f.CAFile); err != nil {
			return nil, err
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

func (f TLSFiles) keyPair(required bool) ([]tls.Certificate, error) {
	switch {
	case f.CertFile == "" && f.KeyFile == "" && !required:
		return nil, nil
	case f.CertFile == "" || f.KeyFile == "":
		return nil, fmt.Errorf("node: TLS: a certificate file and its key file go together (got %q and %q)", f.CertFile, f.KeyFile)
	}
	c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("node: TLS: %w", err)
	}
	return []tls.Certificate{c}, nil
}

func readPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("node: TLS CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("node: TLS CA file %s holds no PEM certificate", file)
	}
	return p, nil
}

// ReadToken reads a secret token from file, without the surrounding
// white space a text editor leaves. An empty file is an error: it would
// turn authentication off without a word.
func ReadToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("node: token file: %w", err)
	}
	t := string(bytes.TrimSpace(b))
	if t == "" {
		return "", fmt.Errorf("node: token file %s is empty", file)
	}
	return t, nil
}

// BookieClientAuth is how a region's ledger client (its broker, replicator
// and auto-recovery) authenticates to the region's bookies: the bookies'
// Config.AuthToken and Config.TLS must agree with it. The zero value
// authenticates nothing, for bookies that require nothing.
type BookieClientAuth struct {
	// TokenFile holds the region's bookie token (bookie.Config.AuthToken).
	TokenFile string
	// TLS: CAFile verifies the bookies' certificates; CertFile and KeyFile
	// are the client certificate of bookies that require mutual TLS.
	TLS TLSFiles
}

// connConfig is the bookie connections' configuration, with a's
// credentials.
func (a BookieClientAuth) connConfig() (bkproto.ConnConfig, error) {
	cfg := bkproto.DefaultConnConfig(nil)
	if a.TokenFile != "" {
		t, err := ReadToken(a.TokenFile)
		if err != nil {
			return cfg, err
		}
		cfg.Token = []byte(t)
	}
	var err error
	cfg.TLS, err = a.TLS.ClientConfig()
	return cfg, err
}

// BookieServerAuth reads a bookie's credentials from files: the token
// its clients must present (tokenFile; empty: none) and its TLS (empty
// files: plain TCP; with a CA file: mutual TLS).
func BookieServerAuth(tokenFile string, files TLSFiles) (token string, tlsCfg *tls.Config, err error) {
	if tokenFile != "" {
		if token, err = ReadToken(tokenFile); err != nil {
			return "", nil, err
		}
	}
	if files.CAFile != "" && files.CertFile == "" {
		return "", nil, errors.New("node: a bookie's client CA (mutual TLS) needs its own certificate and key too")
	}
	tlsCfg, err = files.ServerConfig()
	return token, tlsCfg, err
}
