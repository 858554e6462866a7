package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/node"
	"github.com/meridian-mq/meridian/replicator"
)

// defaultReplicatorHTTP is the replicator's metrics and health port: next
// to the bookie's 8000, so that both fit on one host.
const defaultReplicatorHTTP = "0.0.0.0:8001"

// newReplicatorCommand runs one replication worker of a region as its own
// process: a node with one region that has only a replicator.
func newReplicatorCommand() *cobra.Command {
	cfg := replicator.DefaultConfig("")
	var (
		region           string
		etcd, globalEtcd []string
		metricsAddr      string
	)
	var logs *logFlags
	var bookieAuth node.BookieClientAuth
	var etcdAuth, globalEtcdAuth node.EtcdClientAuth
	cmd := &cobra.Command{
		Use:   "replicator",
		Short: "Run one replication worker of a region until SIGINT or SIGTERM",
		Long: `Run one replication worker: it copies the region's topics to the other regions of
their replication clusters, reading the topics' ledgers straight from the
region's bookies (never through its brokers) and publishing to the remote
regions' brokers over the Pulsar protocol, effectively once and in order.
  meridian replicator --region us-east --etcd http://127.0.0.1:2379 --global-etcd http://127.0.0.1:2479
Several workers of a region share its tasks (one per topic partition and
remote region) through leases in the region's etcd; when one dies, the
others take its tasks within --lease-ttl plus a scan. It prints one line
on stdout once registered:
  replicator <worker-id> ready: region us-east`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case region == "":
				return errors.New("--region is required: the worker replicates that region's topics")
			case len(etcd) == 0:
				return errors.New("--etcd is required: the region's etcd holds the topics, cursors and task leases")
			}
			ncfg := node.Config{Etcd: etcd, GlobalEtcd: globalEtcd, EtcdAuth: etcdAuth, GlobalEtcdAuth: globalEtcdAuth, Logger: logs.logger(cmd), Regions: []node.RegionConfig{
				{Name: region, Replicator: &cfg, MetricsAddr: metricsAddr, BookieClient: bookieAuth},
			}}
			return runNode(cmd, "replicator", ncfg, func(n *node.Node) (string, error) {
				return fmt.Sprintf("replicator %s ready: region %s", n.Regions()[0].Replicator().ID(), region), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&region, "region", "", "region whose topics this worker replicates (required)")
	f.StringSliceVar(&etcd, "etcd", nil, "comma-separated client URLs of the region's etcd (required)")
	f.StringSliceVar(&globalEtcd, "global-etcd", nil, "comma-separated client URLs of the global configuration store's etcd (default: --etcd)")
	f.StringVar(&metricsAddr, "metrics-listen", defaultReplicatorHTTP, "address to serve /metrics, /health and /ready on; empty: none")
	f.StringVar(&cfg.WorkerID, "worker-id", "", "the worker's id among the region's workers (default: random); a restart under the same id waits for its previous run's lease to lapse")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "lease on the worker's tasks: how long the tasks of a dead worker wait for another")
	f.DurationVar(&cfg.ScanInterval, "scan-interval", cfg.ScanInterval, "how often the worker looks for tasks to start or stop")
	f.DurationVar(&cfg.CursorPersistInterval, "cursor-persist-interval", cfg.CursorPersistInterval, "longest wait before a task writes its cursor (what a crash sends again, deduplicated by the remote)")
	f.IntVar(&cfg.Remote.MaxInFlightEntries, "max-in-flight", cfg.Remote.MaxInFlightEntries, "entries per task sent and not yet acknowledged by the remote (cover a WAN round trip at the rate)")
	addBookieClientFlags(f, &bookieAuth)
	addEtcdClientFlags(f, &etcdAuth, &globalEtcdAuth)
	logs = addServerFlags(f)
	return cmd
}
