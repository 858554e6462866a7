package meta

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"gopkg.in/yaml.v3"
)

// PulsarEtcdConfig is Pulsar's etcd client configuration: the YAML file
// that broker.conf's metadataStoreConfigPath names when metadataStoreUrl
// is an etcd (pulsar-metadata's EtcdConfig). Pulsar reads the one file for
// its local and its configuration metadata stores alike.
//
//	useTls: true
//	tlsProvider: JDK
//	tlsTrustCertsFilePath: /pulsar/certs/ca.pem
//	tlsCertificateFilePath: /pulsar/certs/broker.pem
//	tlsKeyFilePath: /pulsar/certs/broker-key.pem
//	authority: etcd.example.com
//
// Pulsar has no etcd user or password here: a client certificate is its
// etcd credential (etcd takes the certificate's CommonName as the user).
type PulsarEtcdConfig struct {
	// UseTLS connects over TLS, with the three files below when they are
	// set. Pulsar reads the files only with it.
	UseTLS bool `yaml:"useTls"`
	// TLSProvider is Pulsar's TLS implementation (Netty's SslProvider:
	// JDK, OPENSSL or OPENSSL_REFCNT). Go has one, so the value is checked
	// and does nothing else.
	TLSProvider string `yaml:"tlsProvider"`
	// TrustCertsFile holds the PEM CAs that verify the members (empty:
	// the system's roots).
	TrustCertsFile string `yaml:"tlsTrustCertsFilePath"`
	// CertFile and KeyFile are the PEM client certificate and its key,
	// for an etcd run with --client-cert-auth; both or neither.
	CertFile string `yaml:"tlsCertificateFilePath"`
	KeyFile  string `yaml:"tlsKeyFilePath"`
	// Authority is EtcdConfig.Authority.
	Authority string `yaml:"authority"`
}

// pulsarTLSProviders are the names Pulsar's tlsProvider takes.
var pulsarTLSProviders = []string{"JDK", "OPENSSL", "OPENSSL_REFCNT"}

// ReadPulsarEtcdConfig reads Pulsar's etcd client configuration from the
// file at path. As Pulsar does, it refuses a key it does not know and a
// file with no setting; unlike Pulsar, it also refuses TLS files without
// useTls (Pulsar would connect in plain text and ignore them) and a
// certificate without its key, so that a slip never turns TLS off.
func ReadPulsarEtcdConfig(path string) (PulsarEtcdConfig, error) {
	var c PulsarEtcdConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("meta: Pulsar etcd configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	switch err := dec.Decode(&c); {
	case errors.Is(err, io.EOF):
		return c, fmt.Errorf("meta: Pulsar etcd configuration %s holds no setting", path)
	case err != nil:
		return c, fmt.Errorf("meta: Pulsar etcd configuration %s: %w (Pulsar reads it as YAML, one \"key: value\" a line, with the keys useTls, tlsProvider, tlsTrustCertsFilePath, tlsCertificateFilePath, tlsKeyFilePath and authority)", path, err)
	}
	if err := c.validate(); err != nil {
		return c, fmt.Errorf("meta: Pulsar etcd configuration %s: %w", path, err)
	}
	return c, nil
}

func (c PulsarEtcdConfig) validate() error {
	switch {
	case c.TLSProvider != "" && !slices.Contains(pulsarTLSProviders, c.TLSProvider):
		return fmt.Errorf("tlsProvider %q: want one of %v", c.TLSProvider, pulsarTLSProviders)
	case !c.UseTLS && (c.TrustCertsFile != "" || c.CertFile != "" || c.KeyFile != ""):
		return errors.New("TLS files are set but useTls is not true (Pulsar would ignore them and connect in plain text): set useTls: true, or remove them")
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("tlsCertificateFilePath %q and tlsKeyFilePath %q go together", c.CertFile, c.KeyFile)
	}
	if err := checkAuthority(c.Authority); err != nil {
		return fmt.Errorf("authority: %w", err)
	}
	return nil
}
