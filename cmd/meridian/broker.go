package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/broker/standalone"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// newBrokerCommand runs one broker as its own process against a region's
// etcd and bookies that run elsewhere (standalone.StartNode). It starts
// neither etcd nor bookies.
func newBrokerCommand() *cobra.Command {
	cfg := standalone.DefaultNodeConfig("", "")
	cfg.BrokerAddr, cfg.WebAddr = "0.0.0.0:6650", "0.0.0.0:8080"
	var (
		etcd, globalEtcd string
		configFile       string
		logLevel         = slog.LevelInfo
	)
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
--config reads Pulsar's broker.conf (clusterName, ports, TLS,
authentication, authorization, policy defaults, ledger settings); flags
given on the command line win, and every key Meridian does not support is
named in one warning each. Tenants and namespaces are not created: that is the operator's job (or
'meridian standalone' for a one-process region). The broker id (default: the
advertised address with the broker port) must be stable across restarts: a
restarted broker revokes its previous run's ownership at once, instead of
clients waiting --ownership-ttl for it to expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: logLevel}))
			if configFile != "" {
				if err := applyConfigFile(cmd, configFile, &cfg, log); err != nil {
					return err
				}
			}
			switch {
			case cfg.Region == "":
				return errors.New("--region is required (or clusterName in --config)")
			case etcd == "":
				return errors.New("--etcd is required: the broker keeps ownership, ledgers and cursors in the region's etcd")
			case cfg.AdvertisedHost == "":
				return errors.New("--advertised-address is required: it is the host clients are sent to (or advertisedAddress in --config)")
			}
			if globalEtcd == "" {
				globalEtcd = etcd
			}
			cfg.Logger = log
			cfg.Ledgers.Region, cfg.Ledger.Region = cfg.Region, cfg.Region
			return runBroker(cmd, cfg, strings.Split(etcd, ","), strings.Split(globalEtcd, ","), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Region, "region", "", "region this broker serves (required)")
	f.StringVar(&etcd, "etcd", "", "comma-separated client URLs of the region's etcd (required)")
	f.StringVar(&globalEtcd, "global-etcd", "", "comma-separated client URLs of the global configuration store's etcd (default: --etcd)")
	f.StringVar(&cfg.AdvertisedHost, "advertised-address", "", "host clients are told to connect to, with the listeners' ports (required)")
	f.StringVar(&cfg.BrokerAddr, "broker-listen", cfg.BrokerAddr, "address to serve the Pulsar protocol on")
	f.StringVar(&cfg.WebAddr, "web-listen", cfg.WebAddr, "address to serve HTTP (/metrics) on")
	addTLSFlags(f, &cfg)
	f.StringVar(&configFile, "config", "", configFileHelp)
	f.StringVar(&cfg.BrokerID, "broker-id", "", "broker id, stable across restarts (default: --advertised-address with the broker port)")
	f.IntVar(&cfg.Ledgers.EnsembleSize, "ensemble-size", cfg.Ledgers.EnsembleSize, "bookies each new ledger is striped over (E)")
	f.IntVar(&cfg.Ledgers.WriteQuorum, "write-quorum", cfg.Ledgers.WriteQuorum, "bookies each entry is written to (Qw <= E)")
	f.IntVar(&cfg.Ledgers.AckQuorum, "ack-quorum", cfg.Ledgers.AckQuorum, "bookies that must confirm an entry before it is acknowledged (Qa <= Qw)")
	f.DurationVar(&cfg.Service.OwnershipTTL, "ownership-ttl", cfg.Service.OwnershipTTL, "lease on the bundles this broker owns: how long its topics stay unavailable after it dies")
	f.DurationVar(&cfg.Ledgers.CursorPersistInterval, "cursor-persist-interval", cfg.Ledgers.CursorPersistInterval, "shortest time between two writes of one subscription's position (acks of the last interval are redelivered after a crash)")
	f.DurationVar(&cfg.BookieWait, "bookie-wait", cfg.BookieWait, "how long to wait at start for --ensemble-size bookies to register")
	f.TextVar(&logLevel, "log-level", logLevel, "lowest level of log records to print (debug, info, warn, error)")
	return cmd
}

// runBroker connects to the metadata stores, starts the node, prints the
// ready line and runs until a signal; then it closes its topics cleanly and
// gives up its ownership, so that another broker takes over at once.
func runBroker(cmd *cobra.Command, cfg standalone.NodeConfig, endpoints, globalEndpoints []string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ecfg := meta.DefaultEtcdConfig()
	ecfg.Logger = log
	store, err := meta.Dial(ctx, endpoints, ecfg)
	if err != nil {
		return fmt.Errorf("connect to the region's etcd %v: %w", endpoints, err)
	}
	defer store.Close()
	cfg.Store, cfg.Global = store, store
	if strings.Join(globalEndpoints, ",") != strings.Join(endpoints, ",") {
		gstore, err := meta.Dial(ctx, globalEndpoints, ecfg)
		if err != nil {
			return fmt.Errorf("connect to the global etcd %v: %w", globalEndpoints, err)
		}
		defer gstore.Close()
		cfg.Global = gstore
	}
	n, err := standalone.StartNode(ctx, cfg)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "broker %s ready: %s\n", n.BrokerID(), strings.Join(readyURLs(n), " ")); err != nil {
		log.Warn("cannot write the ready line", "err", err)
	}
	<-ctx.Done()
	log.Info("shutting down broker")
	began := time.Now()
	n.Close()
	log.Info("broker stopped", "took", time.Since(began).Round(time.Millisecond))
	return nil
}
