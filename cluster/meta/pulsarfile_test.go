package meta

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadPulsarEtcdConfig: Pulsar's etcd client file is read as Pulsar
// reads it (YAML, its six keys); what Pulsar refuses, and what would turn
// TLS off without a word, is an error that names the file and says what
// is wrong.
func TestReadPulsarEtcdConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.yaml", `# Pulsar's EtcdConfig
useTls: true
tlsProvider: OPENSSL
tlsTrustCertsFilePath: /certs/ca.pem
tlsCertificateFilePath: /certs/broker.pem
tlsKeyFilePath: /certs/broker-key.pem
authority: etcd.example.com
`)
	got, err := ReadPulsarEtcdConfig(full)
	want := PulsarEtcdConfig{UseTLS: true, TLSProvider: "OPENSSL", TrustCertsFile: "/certs/ca.pem",
		CertFile: "/certs/broker.pem", KeyFile: "/certs/broker-key.pem", Authority: "etcd.example.com"}
	if err != nil || got != want {
		t.Fatalf("full file: %+v, %v; want %+v", got, err, want)
	}
	// Pulsar's documented template, with its keys left empty.
	if got, err := ReadPulsarEtcdConfig(write("empty-values.yaml", "useTls: false\ntlsProvider: JDK\ntlsTrustCertsFilePath:\nauthority:\n")); err != nil || got.UseTLS {
		t.Errorf("template with empty values: %+v, %v", got, err)
	}

	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "# nothing\n", "holds no setting"},
		{"properties form", "useTls=true\ntlsTrustCertsFilePath=/certs/ca.pem\n", "cannot unmarshal !!str `useTls="},
		{"unknown key", "useTls: true\nuserName: meridian\n", "field userName not found"},
		{"not a boolean", "useTls: sometimes\n", "into bool"},
		{"provider", "useTls: true\ntlsProvider: BORINGSSL\n", `tlsProvider "BORINGSSL": want one of [JDK OPENSSL OPENSSL_REFCNT]`},
		{"files without useTls", "tlsTrustCertsFilePath: /certs/ca.pem\n", "set useTls: true, or remove them"},
		{"certificate without key", "useTls: true\ntlsCertificateFilePath: /certs/broker.pem\n", "go together"},
		{"authority as a URL", "authority: https://etcd.example.com\n", "authority: want a host or host:port"},
	} {
		p := write(tc.name+".yaml", tc.text)
		_, err := ReadPulsarEtcdConfig(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s and containing %q", tc.name, err, p, tc.want)
		}
	}
	if _, err := ReadPulsarEtcdConfig(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDialRefusesTLSOverHTTP: the etcd client would speak plain http to an
// http:// endpoint whatever its TLS settings, so Dial refuses the mix
// before it connects, naming the https:// URL to write instead.
func TestDialRefusesTLSOverHTTP(t *testing.T) {
	cfg := DefaultEtcdConfig()
	cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	_, err := Dial(context.Background(), []string{"https://10.0.0.1:2379", "http://10.0.0.2:2379"}, cfg)
	if err == nil || !strings.Contains(err.Error(), "write https://10.0.0.2:2379") {
		t.Fatalf("TLS settings with an http:// endpoint: %v", err)
	}
}
