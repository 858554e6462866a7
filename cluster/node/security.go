package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
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
func ReadToken(file string) (string, error) { return readSecret(file, "token") }

// readSecret reads the secret in file as ReadToken does; what names it in
// errors, which never quote the file's content.
func readSecret(file, what string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("node: %s file: %w", what, err)
	}
	t := string(bytes.TrimSpace(b))
	if t == "" {
		return "", fmt.Errorf("node: %s file %s is empty", what, file)
	}
	return t, nil
}

// EtcdClientAuth is how this process's etcd clients reach one secured
// etcd cluster (the region's, or the global configuration store's): its
// TLS and its RBAC user. The zero value is plain http with no user.
type EtcdClientAuth struct {
	// TLS, for https:// URLs: CAFile verifies the members (empty: the
	// system's roots); CertFile and KeyFile are the client certificate of
	// an etcd run with --client-cert-auth (with etcd's authentication on,
	// etcd takes the user from its CommonName when Username is empty).
	TLS TLSFiles
	// Username is the etcd user (`etcdctl user add`) whose roles grant
	// read and write on /meridian/; its password is in PasswordFile. Both
	// or neither. The password is a file's, never a value of its own, so
	// that it shows in no process list, shell history or log.
	Username, PasswordFile string
	// Authority is the name the members' certificates are verified
	// against instead of each URL's host (meta.EtcdConfig.Authority;
	// Pulsar's authority). Empty: each URL's host.
	Authority string
}

// IsZero reports whether a says nothing: plain http, no user.
func (a EtcdClientAuth) IsZero() bool { return a == EtcdClientAuth{} }

// Validate checks that the user and its password file go together.
// A user name holding ':' is refused without being quoted: it is
// etcdctl's user:password form, so it likely holds a password.
func (a EtcdClientAuth) Validate() error {
	switch {
	case strings.Contains(a.Username, ":"):
		return errors.New("node: the etcd user name holds ':' (etcdctl's user:password form?): give the user alone, and its password in a file")
	case a.Username != "" && a.PasswordFile == "":
		return fmt.Errorf("node: etcd user %q needs a password file", a.Username)
	case a.Username == "" && a.PasswordFile != "":
		return fmt.Errorf("node: the etcd password file %s needs a user", a.PasswordFile)
	}
	return nil
}

// apply reads a's files onto cfg: its TLS, its user and password.
func (a EtcdClientAuth) apply(cfg *meta.EtcdConfig) error {
	if err := a.Validate(); err != nil {
		return err
	}
	cfg.Authority = a.Authority
	var err error
	if cfg.TLS, err = a.TLS.ClientConfig(); err != nil {
		return fmt.Errorf("node: etcd client TLS: %w", err)
	}
	if a.Username != "" {
		cfg.Username = a.Username
		if cfg.Password, err = readSecret(a.PasswordFile, "etcd password"); err != nil {
			return fmt.Errorf("node: etcd user %q: %w", a.Username, err)
		}
	}
	return nil
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
