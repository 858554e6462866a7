package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/bookie"
	"github.com/meridian-mq/meridian/cluster/node"
)

// newBookieCommand runs one bookie as its own process: a node with one region
// that has only a bookie, and /metrics on --metrics-listen. Every other flag
// sets one bookie.Config field; the defaults are that struct's.
func newBookieCommand() *cobra.Command {
	cfg := bookie.DefaultConfig()
	var (
		region      string
		etcd        []string
		failpoints  string
		metricsAddr string
		storage     string
	)
	var logs *logFlags
	var creds *bookieServerFlags
	var etcdAuth node.EtcdClientAuth
	cmd := &cobra.Command{
		Use:   "bookie",
		Short: "Run one bookie (ledger storage) until SIGINT or SIGTERM",
		Long: `Run one bookie: it stores ledger entries in --data-dir (a journal with group
commit, whose files are also the entry log, and an index), serves the bookie protocol on --listen, and registers
itself under /meridian/regions/<region>/bookies/<id> in etcd.

  meridian bookie --region us-east --etcd http://10.0.0.5:2379 \
    --data-dir /var/lib/meridian/bookie-1 --listen 10.0.1.7:3181 --rack r1 --id bookie-1

Listen on the address of the region's private network, never one open to
the world: whoever reaches the port can read every entry. Turn on
authentication (docs/operations.md, Security) with --auth-token-file (a
token the region's brokers and replicators present, --bookie-auth-token-file)
and/or --tls-cert-file, --tls-key-file and --tls-client-ca-file (mutual TLS
with the region's CA); then nothing unauthenticated reaches a read, an add
or a fence. Every add and fence also carries the ledger's master key.

The bookie exits non-zero if its journal fsync fails: acknowledged data may
not be on disk, so check the disk before restarting it. A full disk makes it
read-only (it keeps serving reads). --storage memory turns every journal fsync
off, for benchmarks only: acknowledged entries then live in the page cache and
a machine crash loses them (the bookie warns at start). Fault injection for tests: --failpoints or
` + bookie.FailpointsEnv + `, e.g. "journal-fsync=error@100;entry-corrupt=3:7" or
"journal-fsync=delay:20ms"; --failpoint-endpoint ADDR serves GET/PUT/DELETE
http://ADDR/failpoints to switch them while the bookie runs (tests only: it
has no authentication and is off by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logs.logger(cmd)
			if failpoints == "" {
				failpoints = os.Getenv(bookie.FailpointsEnv)
			}
			fp, err := bookie.ParseFailpoints(failpoints)
			if err != nil {
				return err
			}
			cfg.Failpoints = fp
			if cfg.AuthToken, cfg.TLS, err = node.BookieServerAuth(creds.tokenFile, creds.tls); err != nil {
				return err
			}
			if cfg.NoSync, err = parseStorage(storage); err != nil {
				return err
			}
			if cfg.ID == "" {
				cfg.ID = cfg.AdvertiseAddr
				if cfg.ID == "" && !strings.HasSuffix(cfg.ListenAddr, ":0") {
					cfg.ID = cfg.ListenAddr
				}
				if cfg.ID == "" {
					return errors.New("--id is required when --listen has port 0 and there is no --advertise address")
				}
			}
			switch {
			case region == "":
				return errors.New("--region is required: the bookie registers under its region")
			case len(etcd) == 0:
				return errors.New("--etcd is required: the bookie registers in the region's metadata store")
			case cfg.DataDir == "":
				return errors.New("--data-dir is required: the bookie's journal and index live there")
			}
			ncfg := node.Config{Etcd: etcd, EtcdAuth: etcdAuth, Logger: log, Regions: []node.RegionConfig{
				{Name: region, Bookies: []bookie.Config{cfg}, MetricsAddr: metricsAddr},
			}}
			// A bookie whose journal fsync failed stops, and so does the
			// process, non-zero: acknowledged data may not be on disk.
			return runNode(cmd, "bookie", ncfg, func(n *node.Node) (string, error) {
				return fmt.Sprintf("bookie %s ready: %s", cfg.ID, n.Regions()[0].Bookies()[0].Addr()), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&region, "region", "", "region this bookie belongs to (required)")
	f.StringSliceVar(&etcd, "etcd", nil, "comma-separated etcd client URLs of the region's metadata store (required)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for the journal and the entry index (required)")
	f.StringVar(&cfg.ListenAddr, "listen", cfg.ListenAddr, "address to serve the bookie protocol on")
	f.StringVar(&cfg.AdvertiseAddr, "advertise", "", "address to register, if clients must use another than --listen")
	f.StringVar(&cfg.Rack, "rack", "", "rack (failure domain) for rack-aware placement")
	f.StringVar(&cfg.ID, "id", "", "bookie id, stable across restarts (default: the advertised or listen address)")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "registration lease TTL: how long a dead bookie stays listed")
	f.DurationVar(&cfg.GCInterval, "gc-interval", cfg.GCInterval, "how often to delete ledgers whose metadata is gone (0: never)")
	f.DurationVar(&cfg.ReadOnlyProbeInterval, "read-only-probe-interval", cfg.ReadOnlyProbeInterval, "how often a bookie made read-only by a full disk tests whether it has room again")
	f.DurationVar(&cfg.JournalMaxWait, "journal-max-wait", cfg.JournalMaxWait, "cap on how long one group commit keeps collecting while adds keep arriving")
	f.Int64Var(&cfg.JournalQueueBytes, "journal-queue-bytes", cfg.JournalQueueBytes, "bytes of adds waiting for the journal before writers are slowed (the write memory bound)")
	f.IntVar(&cfg.JournalMaxBatchBytes, "journal-max-batch-bytes", cfg.JournalMaxBatchBytes, "cap on one group commit's size")
	f.Int64Var(&cfg.JournalFileSize, "journal-file-size", cfg.JournalFileSize, "journal file size at which it rolls and checkpoints (journal files also hold the entries)")
	f.IntVar(&cfg.MaxEntrySize, "max-entry-size", cfg.MaxEntrySize, "largest entry accepted, in bytes")
	f.Int64Var(&cfg.IndexCacheSize, "index-cache-size", cfg.IndexCacheSize, "index (pebble) block cache, in bytes")
	f.Float64Var(&cfg.CompactionThreshold, "compaction-threshold", cfg.CompactionThreshold, "compact a journal file when its live entries fall below this fraction of it (0: never)")
	f.DurationVar(&cfg.CompactionInterval, "compaction-interval", cfg.CompactionInterval, "how often to look for journal files to compact (0: never)")
	f.StringVar(&storage, "storage", storageDisk, "disk (every journal write fsynced) or memory (no fsync: not durable, for benchmarks only)")
	f.StringVar(&failpoints, "failpoints", "", "fault injection for tests (default: $"+bookie.FailpointsEnv+")")
	f.StringVar(&cfg.FailpointEndpoint, "failpoint-endpoint", "", "address of an HTTP endpoint, /failpoints, that switches failpoints at run time; for tests only (default: off)")
	f.StringVar(&metricsAddr, "metrics-listen", defaultBookieHTTP, "address to serve /metrics, /health, /ready and BookKeeper's /api/v1/bookie/is_ready and /state on (BookKeeper's HTTP port, 8000); empty: none")
	creds = addBookieServerFlags(f)
	addEtcdClientFlags(f, &etcdAuth, nil)
	logs = addServerFlags(f)
	return cmd
}

// defaultBookieHTTP is BookKeeper's httpServerPort and
// prometheusStatsHttpPort, where its tooling and charts look.
const defaultBookieHTTP = "0.0.0.0:8000"

// The bookie's --storage values.
const (
	storageDisk   = "disk"
	storageMemory = "memory"
)

// parseStorage maps --storage onto bookie.Config.NoSync.
func parseStorage(s string) (noSync bool, err error) {
	switch s {
	case storageDisk:
		return false, nil
	case storageMemory:
		return true, nil
	}
	return false, fmt.Errorf("--storage %q: want %s or %s", s, storageDisk, storageMemory)
}
