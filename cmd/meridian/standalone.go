package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/node"
)

// defaultStandaloneDir is where `meridian standalone` keeps its data when
// --data-dir is not given: relative to the working directory, like Pulsar's
// standalone (data/standalone under its home).
var defaultStandaloneDir = filepath.Join("data", "standalone")

// newStandaloneCommand runs a whole region in one process: an embedded
// etcd, one bookie and one broker (node.Standalone).
func newStandaloneCommand() *cobra.Command {
	cfg := node.Standalone(defaultStandaloneDir)
	b := cfg.Regions[0].Broker
	var configFile, bookieToken string
	var logs *logFlags
	cmd := &cobra.Command{
		Use:   "standalone",
		Short: "Run a whole region in one process (etcd, a bookie and a broker) until SIGINT or SIGTERM",
		Long: `Run a whole region in one process: an embedded etcd (the region's metadata
and the global configuration), one bookie and one broker serving the Pulsar
protocol. Tenant "public" and namespace "public/default" exist from the start.
  meridian standalone --data-dir /tmp/meridian
Once serving it prints one line on stdout:
  standalone ready: pulsar://localhost:6650 http://localhost:8080 etcd=http://127.0.0.1:41234
followed, when TLS is served, by the pulsar+ssl:// and https:// URLs. The
etcd URL is for tools that edit policies directly. --config reads Pulsar's
standalone.conf or broker.conf (ports, TLS, authentication, authorization,
policy defaults, ledger settings); flags given on the command line win,
and every key Meridian does not support is named in one warning each.
  meridian standalone --config conf/standalone.conf --data-dir /tmp/meridian
With metadataStoreUrl (and configurationMetadataStoreUrl) in --config, the
metadata lives in that etcd instead of an embedded one; the --etcd-* flags
(and --global-etcd-*), or the file metadataStoreConfigPath names, say how to
reach it when it is secured.
Everything lives under --data-dir (etcd/, bookie/): stopping, even
with SIGKILL, and starting again on the same directory and ports continues
where it stopped; acknowledged messages are kept and consumers resume from
their acknowledged positions (acks of the last second before a crash may be
delivered again).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logs.logger(cmd)
			if err := applyPulsarConf(cmd, configFile, &cfg, log); err != nil {
				return err
			}
			if err := requireBookieToken(&cfg, bookieToken); err != nil {
				return err
			}
			cfg.Logger = log
			return runNode(cmd, "standalone", cfg, func(n *node.Node) (string, error) {
				etcd := n.EtcdEndpoints()
				if etcd == nil { // metadataStoreUrl: an etcd of its own
					etcd = cfg.Etcd
				}
				return "standalone ready: " + strings.Join(readyURLs(n.Broker(), "etcd="+strings.Join(etcd, ",")), " "), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for etcd's and the bookie's data; reuse it to continue after a restart")
	f.StringVar(&configFile, "config", "", configFileHelp)
	f.StringVar(&b.BrokerAddr, "broker-listen", b.BrokerAddr, "address to serve the Pulsar protocol on")
	f.StringVar(&b.WebAddr, "web-listen", b.WebAddr, "address to serve HTTP (the admin API, /metrics) on")
	addTLSFlags(f, b)
	f.StringVar(&bookieToken, "bookie-auth-token-file", "", localBookieTokenHelp)
	addEtcdClientFlags(f, &cfg.EtcdAuth, &cfg.GlobalEtcdAuth)
	f.StringVar(&b.AdvertisedHost, "advertised-address", b.AdvertisedHost, "host clients are told to connect to (with the listeners' ports); with the broker port it is the broker's id")
	f.BoolVar(&b.Broker.ProxyThroughServiceURL, "proxy-through-service-url", b.Broker.ProxyThroughServiceURL, "answer lookups with proxyThroughServiceUrl: clients reach every topic through the service URL they were given, not the advertised address (behind a port mapping: a container)")
	logs = addServerFlags(f)
	return cmd
}

// readyURLs are the fields of a ready line: the node's plain URLs, then
// extra, then its TLS URLs if it serves TLS.
func readyURLs(n *node.Broker, extra ...string) []string {
	urls := append([]string{n.ServiceURL(), n.WebURL()}, extra...)
	for _, u := range []string{n.ServiceURLTLS(), n.WebURLTLS()} {
		if u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}
