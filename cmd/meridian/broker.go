package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridian-mq/meridian/cluster/broker"
	"github.com/meridian-mq/meridian/cluster/node"
)

// newBrokerCommand runs one broker as its own process against a region's
// etcd and bookies that run elsewhere: a node with one region that has only
// a broker. It starts neither etcd nor bookies.
func newBrokerCommand() *cobra.Command {
	b := node.DefaultBrokerConfig("")
	b.BrokerAddr, b.WebAddr = "0.0.0.0:6650", "0.0.0.0:8080"
	cfg := node.Config{Regions: []node.RegionConfig{{Broker: &b}}}
	var configFile string
	var logs *logFlags
	var autoRecovery *autoRecoveryFlags
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run one broker (Pulsar protocol) until SIGINT or SIGTERM",
		Long: `Run one broker of a region: it serves the Pulsar protocol on --broker-listen and
HTTP (/metrics) on --web-listen (and over TLS on --broker-tls-listen and
--web-tls-listen), stores topics on the region's bookies, keeps
its metadata in the region's etcd (--etcd) and reads policies from the global
configuration store (--global-etcd, default the same etcd).
  meridian broker --region us-east --etcd http://127.0.0.1:2379 \
    --advertised-address broker1.example.com --ensemble-size 3 --write-quorum 3 --ack-quorum 2
It waits for --ensemble-size bookies to register, creates the region's cluster
record in the global store if there is none (an existing one is left as it is),
and prints one line on stdout once serving:
  broker broker1.example.com:6650 ready: pulsar://broker1.example.com:6650 http://broker1.example.com:8080
--config reads Pulsar's broker.conf (clusterName, the metadata stores and
their TLS, ports, TLS, authentication, authorization, policy defaults, ledger
settings); flags
given on the command line win, and every key Meridian does not support is
named in one warning each. Tenants and namespaces are not created: that is the operator's job (or
'meridian standalone' for a one-process region). The broker id (default: the
advertised address with the broker port) must be stable across restarts: a
restarted broker revokes its previous run's ownership at once, instead of
clients waiting --ownership-ttl for it to expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logs.logger(cmd)
			if err := applyPulsarConf(cmd, configFile, &cfg, log); err != nil {
				return err
			}
			switch {
			case cfg.Regions[0].Name == "":
				return errors.New("--region is required (or clusterName in --config)")
			case len(cfg.Etcd) == 0:
				return errors.New("--etcd is required (or metadataStoreUrl in --config): the broker keeps ownership, ledgers and cursors in the region's etcd")
			case b.AdvertisedHost == "" && b.AdvertisedListeners == "":
				return errors.New("--advertised-address or --advertised-listeners is required: it is where clients are sent (or advertisedAddress / advertisedListeners in --config)")
			}
			ar, err := autoRecovery.config()
			if err != nil {
				return err
			}
			cfg.Regions[0].AutoRecovery = ar
			cfg.Logger = log
			return runNode(cmd, "broker", cfg, func(n *node.Node) (string, error) {
				return fmt.Sprintf("broker %s ready: %s", n.Broker().BrokerID(), strings.Join(readyURLs(n.Broker()), " ")), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Regions[0].Name, "region", "", "region this broker serves (required; broker.conf's clusterName)")
	f.StringSliceVar(&cfg.Etcd, "etcd", nil, "comma-separated client URLs of the region's etcd (required; broker.conf's metadataStoreUrl)")
	f.StringSliceVar(&cfg.GlobalEtcd, "global-etcd", nil, "comma-separated client URLs of the global configuration store's etcd (default: --etcd; broker.conf's configurationMetadataStoreUrl)")
	f.StringVar(&b.AdvertisedHost, "advertised-address", "", "host clients are told to connect to, with the listeners' ports (required without --advertised-listeners)")
	f.StringVar(&b.AdvertisedListeners, "advertised-listeners", "", "named addresses for clients of different networks, name:pulsar://host:port[,name:pulsar+ssl://host:port]... (e.g. internal:pulsar://10.0.0.5:6650,external:pulsar://broker1.example.com:16650); a client picks one with its ListenerName, and the internal one is the broker's own address (broker.conf's advertisedListeners)")
	f.StringVar(&b.InternalListenerName, "internal-listener-name", "", "the listener of --advertised-listeners that brokers, replicators and clients naming none use (default: the first; broker.conf's internalListenerName)")
	f.StringVar(&b.BrokerAddr, "broker-listen", b.BrokerAddr, "address to serve the Pulsar protocol on")
	f.StringVar(&b.WebAddr, "web-listen", b.WebAddr, "address to serve HTTP (the admin API, /metrics) on")
	addTLSFlags(f, &b)
	f.StringVar(&configFile, "config", "", configFileHelp)
	f.StringVar(&b.BrokerID, "broker-id", "", "broker id, stable across restarts (default: --advertised-address with the broker port)")
	f.IntVar(&b.Ledgers.EnsembleSize, "ensemble-size", b.Ledgers.EnsembleSize, "bookies each new ledger is striped over (E)")
	f.IntVar(&b.Ledgers.WriteQuorum, "write-quorum", b.Ledgers.WriteQuorum, "bookies each entry is written to (Qw <= E)")
	f.IntVar(&b.Ledgers.AckQuorum, "ack-quorum", b.Ledgers.AckQuorum, "bookies that must confirm an entry before it is acknowledged (Qa <= Qw)")
	f.DurationVar(&b.Service.OwnershipTTL, "ownership-ttl", b.Service.OwnershipTTL, "lease on the bundles this broker owns: how long its topics wait for another broker when it is frozen or cut off from etcd (a crashed broker's port refuses, and a lookup takes its bundles at once)")
	addFailoverFlags(f, &b.Service.Failover)
	f.DurationVar(&b.Ledgers.CursorPersistInterval, "cursor-persist-interval", b.Ledgers.CursorPersistInterval, "shortest time between two writes of one subscription's position (acks of the last interval are redelivered after a crash)")
	f.DurationVar(&b.BookieWait, "bookie-wait", b.BookieWait, "how long to wait at start for --ensemble-size bookies to register")
	autoRecovery = addAutoRecoveryFlags(f)
	addBookieClientFlags(f, &cfg.Regions[0].BookieClient)
	addEtcdClientFlags(f, &cfg.EtcdAuth, &cfg.GlobalEtcdAuth)
	logs = addServerFlags(f)
	return cmd
}

// addFailoverFlags binds automatic region failover's settings
// (broker.FailoverConfig) to f.
func addFailoverFlags(f *pflag.FlagSet, c *broker.FailoverConfig) {
	f.DurationVar(&c.SessionTTL, "failover-session-ttl", c.SessionTTL, "automatic failover: lease of this broker's failover session; a region cut off from the global store stops dispatching its opted-in namespaces' replicated subscriptions within it, and a revoked region is taken over this long after the revocation")
	f.DurationVar(&c.Margin, "failover-margin", c.Margin, "automatic failover: time taken off the session's time left, for clock drift and process pauses")
	f.DurationVar(&c.Interval, "failover-interval", c.Interval, "automatic failover: how often the session is checked, the active regions probed, and a switch decided")
	f.DurationVar(&c.ProbeTimeout, "failover-probe-timeout", c.ProbeTimeout, "automatic failover: bound on one probe (a lookup through the active region's broker service URL)")
}
