package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridian-mq/meridian/cluster/broker/auth"
	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/telemetry"
)

// configFileHelp is the --config flag's help, shared by the commands that
// take a Pulsar broker.conf.
const configFileHelp = "Pulsar broker.conf or standalone.conf to read the supported settings from (Pulsar's variables in the environment win over it, flags over both; every other key is listed in a warning)"

// addTLSFlags registers the TLS listener and certificate flags of a
// broker.
func addTLSFlags(f *pflag.FlagSet, cfg *node.BrokerConfig) {
	f.StringVar(&cfg.BrokerTLSAddr, "broker-tls-listen", cfg.BrokerTLSAddr, "address to serve the Pulsar protocol over TLS on (pulsar+ssl://; Pulsar's brokerServicePortTls, 6651); empty: no TLS")
	f.StringVar(&cfg.WebTLSAddr, "web-tls-listen", cfg.WebTLSAddr, "address to serve HTTPS on (Pulsar's webServicePortTls, 8443); empty: no TLS")
	f.StringVar(&cfg.TLS.CertFile, "tls-cert-file", cfg.TLS.CertFile, "the broker's PEM certificate chain (tlsCertificateFilePath)")
	f.StringVar(&cfg.TLS.KeyFile, "tls-key-file", cfg.TLS.KeyFile, "the broker's PEM private key (tlsKeyFilePath)")
	f.StringVar(&cfg.TLS.TrustCertsFile, "tls-trust-certs-file", cfg.TLS.TrustCertsFile, "PEM CAs that client certificates are verified against (tlsTrustCertsFilePath)")
}

// applyPulsarConf reads Pulsar's settings onto cfg: from the
// configuration file at path (none when ""), then from the environment as
// Pulsar's images give them (node.PulsarConfFromEnv), which wins over the
// file. Then it puts back the value of every flag set on the command line
// or through the environment (envflags.go), so that flags win over both.
// Each setting given that Meridian does not support is logged once, as a
// warning.
func applyPulsarConf(cmd *cobra.Command, path string, cfg *node.Config, log *slog.Logger) error {
	type setFlag struct {
		name  string
		value string
		slice []string // for slice flags, whose String() does not parse back
		isSl  bool
	}
	var set []setFlag
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		s := setFlag{name: fl.Name, value: fl.Value.String()}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			s.slice, s.isSl = slices.Clone(sv.GetSlice()), true
		}
		set = append(set, s)
	})
	conf := node.PulsarConfFromEnv(nil)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		defer f.Close()
		if conf, err = node.ReadPulsarConf(f, path); err != nil {
			return err
		}
	}
	conf.Override(node.PulsarConfFromEnv(os.Environ()))
	if err := conf.Apply(cfg); err != nil {
		return err
	}
	ignored := conf.Ignored()
	for _, k := range ignored {
		if k.Variable != "" {
			log.Warn("configuration key ignored: Meridian does not support it", "key", k.Key, "variable", k.Variable)
		} else {
			log.Warn("configuration key ignored: Meridian does not support it", "key", k.Key, "file", k.Source, "line", k.Line)
		}
	}
	basicFromPulsarOpts(cfg.Regions[0].Broker, log)
	for _, s := range set {
		fl := cmd.Flags().Lookup(s.name)
		var err error
		if s.isSl {
			err = fl.Value.(pflag.SliceValue).Replace(s.slice)
		} else {
			err = fl.Value.Set(s.value)
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", s.name, err)
		}
	}
	if path != "" {
		log.Info("configuration file read", "file", path, "ignored_keys", len(ignored), "flags_over_file", len(set))
	}
	return nil
}

// basicFromPulsarOpts takes the htpasswd file of the "basic" method from
// PULSAR_EXTRA_OPTS's -Dpulsar.auth.basic.conf=FILE when the configuration
// file names none: Pulsar's AuthenticationProviderBasic reads that Java
// system property, and Pulsar's Docker images (pulsar-client-go's test
// image among them) set it that way.
func basicFromPulsarOpts(cfg *node.BrokerConfig, log *slog.Logger) {
	if cfg.Auth.Basic.Conf != "" || !slices.ContainsFunc(cfg.Auth.Providers, isBasicProvider) {
		return
	}
	for opt := range strings.FieldsSeq(os.Getenv("PULSAR_EXTRA_OPTS")) {
		if v, ok := strings.CutPrefix(opt, "-Dpulsar.auth.basic.conf="); ok && v != "" {
			cfg.Auth.Basic.Conf = v
			log.Info("basic authentication: htpasswd file from PULSAR_EXTRA_OPTS", "file", v)
			return
		}
	}
}

func isBasicProvider(p string) bool {
	p = strings.TrimSpace(p)
	return p == auth.MethodBasic || p == "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	level  slog.Level
	format telemetry.LogFormat
}

// addServerFlags adds the flags every long-running command takes: its
// logging, and --enable-pprof, which runNode reads.
func addServerFlags(f *pflag.FlagSet) *logFlags {
	l := &logFlags{level: slog.LevelInfo, format: telemetry.LogText}
	f.TextVar(&l.level, "log-level", l.level, "lowest level of log records to print (debug, info, warn, error)")
	f.TextVar(&l.format, "log-format", l.format, "how log records are written on stderr: text (key=value) or json (one object per line)")
	f.Bool(enablePprofFlag, false, "serve Go's profiles under /debug/pprof/ on the process's HTTP listeners (a broker's web port; a bookie's or replicator's metrics port), as etcd's --enable-pprof; unauthenticated, so off by default")
	return l
}

const enablePprofFlag = "enable-pprof"

// logger writes the command's log records to its stderr.
func (l *logFlags) logger(cmd *cobra.Command) *slog.Logger {
	return telemetry.NewLogger(cmd.ErrOrStderr(), l.format, l.level)
}

// runNode starts cfg, prints the ready line that ready returns, and runs
// until SIGINT or SIGTERM, or until a part stops by itself (a bookie whose
// journal failed: then the error is returned, so the process exits
// non-zero). Either way it stops every part before it returns.
func runNode(cmd *cobra.Command, what string, cfg node.Config, ready func(*node.Node) (string, error)) (err error) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := cfg.Logger
	if cfg.EnablePprof, err = cmd.Flags().GetBool(enablePprofFlag); err != nil {
		return err
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	line, err := ready(n)
	if err != nil {
		n.Close()
		return err
	}
	if _, err := fmt.Fprintln(cmd.OutOrStdout(), line); err != nil {
		log.Warn("cannot write the ready line", "err", err)
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down " + what)
	case <-n.Done():
	}
	began := time.Now()
	closeErr := n.Close()
	if err := n.Err(); err != nil {
		return err
	}
	log.Info(what+" stopped", "took", time.Since(began).Round(time.Millisecond))
	return closeErr
}
