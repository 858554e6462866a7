package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// newEtcdCommand runs one etcd member as its own process, through the same
// launcher (meta.StartEmbed) that standalone and dev embed. Every flag sets
// one meta.EmbedConfig field; the defaults are that struct's.
func newEtcdCommand() *cobra.Command {
	cfg := meta.DefaultEmbedConfig()
	cfg.ListenClientURLs = []string{"http://127.0.0.1:2379"}
	cfg.ListenPeerURLs = []string{"http://127.0.0.1:2380"}
	var logLevel slog.Level = slog.LevelWarn

	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one etcd member (metadata store) until SIGINT or SIGTERM",
		Long: `Run one member of an etcd cluster for Meridian's metadata, with periodic
auto-compaction, a backend quota and scheduled defragmentation.

A three-member cluster on one host:

  meridian etcd --name m1 --data-dir /var/lib/meridian/m1 \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster m1=http://127.0.0.1:2380,m2=http://127.0.0.1:2480,m3=http://127.0.0.1:2580

and the same for m2 and m3 with their own ports. Listen on loopback or the
region's private network only. To admit only the region's components, serve
https:// URLs with etcd's TLS flags and require client certificates of the
region's CA (components then take --etcd-cacert, --etcd-cert, --etcd-key):

  meridian etcd ... --listen-client-urls https://10.0.0.5:2379 \
    --cert-file etcd.pem --key-file etcd-key.pem --trusted-ca-file ca.pem --client-cert-auth \
    --listen-peer-urls https://10.0.0.5:2380 --peer-cert-file etcd.pem --peer-key-file etcd-key.pem \
    --peer-trusted-ca-file ca.pem --peer-client-cert-auth

If the database reaches the
quota, etcd refuses writes with a NOSPACE alarm: compact, defragment, then run
'etcdctl alarm disarm' (see the meta.EmbedConfig documentation).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DataDir == "" {
				return errors.New("--data-dir is required: a member's data must survive its restarts")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: min(logLevel, slog.LevelInfo)}))
			cfg.Logger, cfg.LogLevel = log, logLevel
			return runEtcd(cmd.Context(), cmd, cfg, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", cfg.Name, "member name, unique in the cluster")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the member's WAL and database (required)")
	f.StringSliceVar(&cfg.ListenClientURLs, "listen-client-urls", cfg.ListenClientURLs, "comma-separated URLs to serve clients on")
	f.StringSliceVar(&cfg.AdvertiseClientURLs, "advertise-client-urls", nil, "client URLs to publish to the cluster (default: the listen URLs)")
	f.StringSliceVar(&cfg.ListenPeerURLs, "listen-peer-urls", cfg.ListenPeerURLs, "comma-separated URLs to serve raft peers on")
	f.StringSliceVar(&cfg.AdvertisePeerURLs, "initial-advertise-peer-urls", nil, "peer URLs to publish; must match this member's --initial-cluster entry (default: the listen URLs)")
	f.StringSliceVar(&cfg.ListenMetricsURLs, "listen-metrics-urls", nil, "comma-separated extra URLs that serve only /metrics and /health, e.g. http://0.0.0.0:2381: for probes and scrapers without a client certificate (https:// uses the client certificate)")
	f.StringVar(&cfg.InitialCluster, "initial-cluster", "", "bootstrap membership name=peerURL,... (default: this member alone)")
	f.StringVar(&cfg.InitialClusterState, "initial-cluster-state", cfg.InitialClusterState, `"new" to bootstrap, "existing" to join after 'etcdctl member add'`)
	f.StringVar(&cfg.InitialClusterToken, "initial-cluster-token", cfg.InitialClusterToken, "bootstrap token that keeps separate clusters apart")
	f.DurationVar(&cfg.AutoCompactionRetention, "auto-compaction-retention", cfg.AutoCompactionRetention, "revision history kept by periodic compaction")
	f.Int64Var(&cfg.QuotaBackendBytes, "quota-backend-bytes", cfg.QuotaBackendBytes, "database size at which etcd raises NOSPACE and refuses writes")
	f.DurationVar(&cfg.DefragInterval, "defrag-interval", cfg.DefragInterval, "how often to check whether defragmenting is worth it")
	f.Int64Var(&cfg.DefragMinFree, "defrag-min-free-bytes", cfg.DefragMinFree, "free space in the database from which a check defragments")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", cfg.HeartbeatInterval, "raft heartbeat interval")
	f.DurationVar(&cfg.ElectionTimeout, "election-timeout", cfg.ElectionTimeout, "raft election timeout (at least 5 heartbeats)")
	f.DurationVar(&cfg.StartTimeout, "start-timeout", cfg.StartTimeout, "how long to wait for the member (and its quorum) to be ready")
	f.TextVar(&logLevel, "log-level", logLevel, "lowest level of etcd's own log records to print (debug, info, warn, error)")
	addEtcdServerTLSFlags(f, &cfg)
	f.IntVar(&cfg.BcryptCost, "bcrypt-cost", cfg.BcryptCost, "cost of the hashes of etcd's user passwords, once its authentication is on (etcdctl auth enable): each client's login checks one")
	return cmd
}

// runEtcd starts the member, reports its URLs on stdout, and runs until a
// signal, a fatal server error or the server stopping on its own.
func runEtcd(ctx context.Context, cmd *cobra.Command, cfg meta.EmbedConfig, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := meta.StartEmbed(ctx, cfg)
	if err != nil {
		return err
	}
	ready := fmt.Sprintf("etcd member %s ready: clients %v, peers %v", cfg.Name, e.Endpoints(), e.PeerURLs())
	if m := e.MetricsURLs(); len(m) > 0 {
		ready += fmt.Sprintf(", metrics %v", m)
	}
	if _, err := fmt.Fprintln(cmd.OutOrStdout(), ready); err != nil {
		log.Warn("cannot write the ready line", "err", err)
	}
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down etcd member", "etcd", cfg.Name)
	case err := <-e.Err():
		runErr = fmt.Errorf("etcd member %s failed: %w", cfg.Name, err)
	case <-e.Stopped():
		runErr = fmt.Errorf("etcd member %s stopped on its own (removed from the cluster?)", cfg.Name)
	}
	if err := e.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
