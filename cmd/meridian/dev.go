package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/node"
)

// devReady is the --ready-file of `meridian dev` (DESIGN §7).
type devReady struct {
	Regions []devRegion `json:"regions"`
}

type devRegion struct {
	Name          string `json:"name"`
	ServiceURL    string `json:"serviceUrl"`
	WebServiceURL string `json:"webServiceUrl"`
}

// newDevCommand runs several regions in one process on one embedded etcd
// (node.Dev).
func newDevCommand() *cobra.Command {
	var (
		regions     = []string{"us-east", "eu-west", "ap-south"}
		dataDir     = filepath.Join("data", "dev")
		portBase    = 6650
		webPortBase = 8080
		readyFile   string
		advertised  = "localhost"
		bookieToken string
	)
	var logs *logFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run several regions in one process (one etcd; a bookie, a broker and a replicator per region) until SIGINT or SIGTERM",
		Long: `Run several regions in one process, for development: one embedded etcd holds
the global configuration and every region's metadata, and each region has its
own bookie and broker. Region i serves the Pulsar protocol on --port-base+100*i
and HTTP on --web-port-base+100*i:
  meridian dev                       us-east  pulsar://localhost:6650 http://localhost:8080
                                     eu-west  pulsar://localhost:6750 http://localhost:8180
                                     ap-south pulsar://localhost:6850 http://localhost:8280
Tenant "public" and namespace "public/default" exist from the start, and
public/default replicates to every region: each region runs a replication
worker that reads its topics from its bookie and publishes them to the other
regions' brokers, so a message produced in one region is delivered in every
other (effectively once, in order per topic, never back to its origin).
Once every region serves, it writes --ready-file (if given), JSON:
  {"regions":[{"name":"us-east","serviceUrl":"pulsar://localhost:6650","webServiceUrl":"http://localhost:8080"}, ...]}
and prints one line on stdout:
  dev ready: us-east=pulsar://localhost:6650,http://localhost:8080 ... etcd=http://127.0.0.1:41234
A port base of 0 puts every listener on a free port (tests). Everything lives
under --data-dir (etcd/, <region>/bookie/); a restart on the same directory
and ports continues where it stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for i := range regions {
				regions[i] = strings.TrimSpace(regions[i])
			}
			cfg := node.Dev(dataDir, regions, portBase, webPortBase)
			cfg.Logger = logs.logger(cmd)
			if err := requireBookieToken(&cfg, bookieToken); err != nil {
				return err
			}
			for _, r := range cfg.Regions {
				// The listeners bind the advertised host: localhost by
				// default.
				b := r.Broker
				_, p, _ := net.SplitHostPort(b.BrokerAddr)
				_, w, _ := net.SplitHostPort(b.WebAddr)
				b.AdvertisedHost = advertised
				b.BrokerAddr, b.WebAddr = net.JoinHostPort(advertised, p), net.JoinHostPort(advertised, w)
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("--regions: %w", err)
			}
			return runDev(cmd, cfg, readyFile)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&regions, "regions", regions, "comma-separated region names, one bookie and broker each")
	f.StringVar(&dataDir, "data-dir", dataDir, "directory for etcd's and the bookies' data; reuse it to continue after a restart")
	f.IntVar(&portBase, "port-base", portBase, "Pulsar protocol port of the first region; region i listens on base+100*i (0: free ports)")
	f.IntVar(&webPortBase, "web-port-base", webPortBase, "HTTP port of the first region; region i listens on base+100*i (0: free ports)")
	f.StringVar(&readyFile, "ready-file", "", `file to write {"regions":[{"name","serviceUrl","webServiceUrl"}]} to once every region serves`)
	f.StringVar(&advertised, "advertised-address", advertised, "host clients are told to connect to (and that the listeners bind)")
	f.StringVar(&bookieToken, "bookie-auth-token-file", "", localBookieTokenHelp)
	logs = addServerFlags(f)
	return cmd
}

// runDev runs the regions, and once all serve writes the ready file (removed
// again when it stops) and the ready line.
func runDev(cmd *cobra.Command, cfg node.Config, readyFile string) error {
	if readyFile != "" {
		// A ready file left by an earlier run must not be taken for this
		// one's.
		if err := os.Remove(readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--ready-file: %w", err)
		}
		defer os.Remove(readyFile)
	}
	return runNode(cmd, "dev regions", cfg, func(n *node.Node) (string, error) {
		var ready devReady
		fields := []string{}
		for _, r := range n.Regions() {
			b := r.Broker()
			ready.Regions = append(ready.Regions, devRegion{Name: r.Name(), ServiceURL: b.ServiceURL(), WebServiceURL: b.WebURL()})
			fields = append(fields, fmt.Sprintf("%s=%s,%s", r.Name(), b.ServiceURL(), b.WebURL()))
		}
		if readyFile != "" {
			if err := writeFileAtomic(readyFile, ready); err != nil {
				return "", fmt.Errorf("--ready-file: %w", err)
			}
		}
		return fmt.Sprintf("dev ready: %s etcd=%s", strings.Join(fields, " "), strings.Join(n.EtcdEndpoints(), ",")), nil
	})
}

// writeFileAtomic writes v as JSON to path through a temporary file and a
// rename, so that a reader never sees half of it.
func writeFileAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
