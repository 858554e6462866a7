package main

import (
	"github.com/spf13/pflag"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/node"
)

// The flags that secure the process's connections: to etcd, to the
// region's bookies, and a bookie's own listener. Every one names a file,
// never a secret itself, so that no secret shows in ps or in a shell's
// history; MERIDIAN_FLAG_* variables set them as they set every flag.

// addEtcdClientTLSFlags registers the etcd client's TLS files, named as
// etcdctl names them with an etcd- prefix.
func addEtcdClientTLSFlags(f *pflag.FlagSet, files *node.TLSFiles) {
	f.StringVar(&files.CAFile, "etcd-cacert", "", "PEM CA certificates that verify the etcd members (https:// --etcd URLs); default: the system's roots")
	f.StringVar(&files.CertFile, "etcd-cert", "", "PEM client certificate for an etcd run with --client-cert-auth (also used for --global-etcd)")
	f.StringVar(&files.KeyFile, "etcd-key", "", "PEM private key of --etcd-cert")
}

// addBookieClientFlags registers how a region's ledger client (its
// broker, replicator and auto-recovery) authenticates to the bookies.
func addBookieClientFlags(f *pflag.FlagSet, a *node.BookieClientAuth) {
	f.StringVar(&a.TokenFile, "bookie-auth-token-file", "", "file holding the region's bookie token, for bookies run with --auth-token-file")
	f.StringVar(&a.TLS.CAFile, "bookie-tls-ca-file", "", "PEM CA certificates that verify the bookies, for bookies run with --tls-cert-file")
	f.StringVar(&a.TLS.CertFile, "bookie-tls-cert-file", "", "PEM client certificate for bookies that require mutual TLS (--tls-client-ca-file)")
	f.StringVar(&a.TLS.KeyFile, "bookie-tls-key-file", "", "PEM private key of --bookie-tls-cert-file")
}

// bookieServerFlags are a bookie's own credentials, read at start.
type bookieServerFlags struct {
	tokenFile string
	tls       node.TLSFiles
}

func addBookieServerFlags(f *pflag.FlagSet) *bookieServerFlags {
	s := &bookieServerFlags{}
	f.StringVar(&s.tokenFile, "auth-token-file", "", "file holding the region's bookie token: every client must present it first on each connection (brokers, replicators and auto-recovery take it with --bookie-auth-token-file); default: no authentication")
	f.StringVar(&s.tls.CertFile, "tls-cert-file", "", "PEM certificate chain to serve the bookie protocol over TLS with; default: plain TCP")
	f.StringVar(&s.tls.KeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	f.StringVar(&s.tls.CAFile, "tls-client-ca-file", "", "PEM CA certificates of the region: clients must present a certificate signed by one (mutual TLS)")
	return s
}

// addEtcdServerTLSFlags registers etcd's own TLS flags, with etcd's names,
// onto an embedded member's configuration.
func addEtcdServerTLSFlags(f *pflag.FlagSet, cfg *meta.EmbedConfig) {
	for _, side := range []struct {
		prefix, who string
		tls         *meta.EmbedTLS
	}{{"", "client", &cfg.ClientTLS}, {"peer-", "peer", &cfg.PeerTLS}} {
		f.StringVar(&side.tls.CertFile, side.prefix+"cert-file", "", "PEM certificate for the "+side.who+" URLs, which must then be https://")
		f.StringVar(&side.tls.KeyFile, side.prefix+"key-file", "", "PEM private key of --"+side.prefix+"cert-file")
		f.StringVar(&side.tls.TrustedCAFile, side.prefix+"trusted-ca-file", "", "PEM CA certificates that verify "+side.who+" certificates")
		f.BoolVar(&side.tls.ClientCertAuth, side.prefix+"client-cert-auth", false, "require a "+side.who+" certificate signed by --"+side.prefix+"trusted-ca-file")
	}
}

// requireBookieToken makes every bookie that cfg runs require the token in
// tokenFile and every region's ledger client present it: standalone's and
// dev's one bookie flag, since their bookies and clients share the process
// (and a loopback port that any local user reaches). "" leaves cfg as is.
func requireBookieToken(cfg *node.Config, tokenFile string) error {
	if tokenFile == "" {
		return nil
	}
	token, err := node.ReadToken(tokenFile)
	if err != nil {
		return err
	}
	for i := range cfg.Regions {
		r := &cfg.Regions[i]
		for j := range r.Bookies {
			r.Bookies[j].AuthToken = token
		}
		r.BookieClient.TokenFile = tokenFile
	}
	return nil
}

const localBookieTokenHelp = "file holding a token that this process's bookies require and its brokers, replicators and auto-recovery present; default: no bookie authentication"
