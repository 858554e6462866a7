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

// addEtcdClientFlags registers how the process reaches the region's etcd
// (--etcd) onto region: TLS files named as etcdctl names them with an
// etcd- prefix, an etcd user whose password is in a file (etcdctl's
// --user and --password, which take the password itself), and the name
// the members' certificates carry (Pulsar's authority). With global
// non-nil, a command that takes --global-etcd gets the same flags with a
// global- prefix, for that etcd.
func addEtcdClientFlags(f *pflag.FlagSet, region, global *node.EtcdClientAuth) {
	type side struct {
		prefix, etcd, note string
		auth               *node.EtcdClientAuth
	}
	sides := []side{{"etcd-", "the region's etcd", "", region}}
	if global != nil {
		sides = append(sides, side{"global-etcd-", "the global configuration store's etcd", " (if no --global-etcd-* flag is given, the --etcd-* ones apply)", global})
	}
	for _, s := range sides {
		f.StringVar(&s.auth.TLS.CAFile, s.prefix+"cacert", "", "PEM CA certificates that verify the members of "+s.etcd+" (https:// URLs; default: the system's roots)"+s.note)
		f.StringVar(&s.auth.TLS.CertFile, s.prefix+"cert", "", "PEM client certificate for "+s.etcd+", run with --client-cert-auth"+s.note)
		f.StringVar(&s.auth.TLS.KeyFile, s.prefix+"key", "", "PEM private key of --"+s.prefix+"cert")
		f.StringVar(&s.auth.Username, s.prefix+"user", "", "user of "+s.etcd+" (its authentication and roles, etcdctl user add), with read and write on /meridian/"+s.note)
		f.StringVar(&s.auth.PasswordFile, s.prefix+"password-file", "", "file holding the password of --"+s.prefix+"user")
		f.StringVar(&s.auth.Authority, s.prefix+"authority", "", "host name the certificates of "+s.etcd+" are verified against, instead of each URL's host (Pulsar's authority)"+s.note)
	}
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
