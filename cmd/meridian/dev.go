package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/cluster/broker/standalone"
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
// (standalone.StartDev).
func newDevCommand() *cobra.Command {
	var (
		regions     = []string{"us-east", "eu-west", "ap-south"}
		dataDir     = filepath.Join("data", "dev")
		portBase    = 6650
		webPortBase = 8080
		readyFile   string
		advertised  = "localhost"
		logLevel    = slog.LevelInfo
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run several regions in one process (one etcd; a bookie and a broker per region) until SIGINT or SIGTERM",
		Long: `Run several regions in one process, for development: one embedded etcd holds
the global configuration and every region's metadata, and each region has its
own bookie and broker. Region i serves the Pulsar protocol on --port-base+100*i
and HTTP on --web-port-base+100*i:
  meridian dev                       us-east  pulsar://localhost:6650 http://localhost:8080
                                     eu-west  pulsar://localhost:6750 http://localhost:8180
                                     ap-south pulsar://localhost:6850 http://localhost:8280
Tenant "public" and namespace "public/default" exist from the start, and
public/default lists every region as a replication cluster.
Replication: not yet. Geo-replication (DESIGN §6) is not built, so each
region keeps its own messages; a message produced in one region is not
delivered in another.
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
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: logLevel}))
			cfg := standalone.DefaultDevConfig(dataDir, regions, portBase, webPortBase)
			cfg.Logger = log
			for i := range cfg.Regions {
				cfg.Regions[i].AdvertisedHost, cfg.Regions[i].Logger = advertised, log.With("region", cfg.Regions[i].Region)
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("--regions: %w", err)
			}
			return runDev(cmd, cfg, readyFile, log)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&regions, "regions", regions, "comma-separated region names, one bookie and broker each")
	f.StringVar(&dataDir, "data-dir", dataDir, "directory for etcd's and the bookies' data; reuse it to continue after a restart")
	f.IntVar(&portBase, "port-base", portBase, "Pulsar protocol port of the first region; region i listens on base+100*i (0: free ports)")
	f.IntVar(&webPortBase, "web-port-base", webPortBase, "HTTP port of the first region; region i listens on base+100*i (0: free ports)")
	f.StringVar(&readyFile, "ready-file", "", `file to write {"regions":[{"name","serviceUrl","webServiceUrl"}]} to once every region serves`)
	f.StringVar(&advertised, "advertised-address", advertised, "host clients are told to connect to (and that the listeners bind)")
	f.TextVar(&logLevel, "log-level", logLevel, "lowest level of log records to print (debug, info, warn, error)")
	return cmd
}

// runDev starts the regions, writes the ready file and line, and runs
// until a signal; then it stops every part cleanly and returns nil.
func runDev(cmd *cobra.Command, cfg standalone.DevConfig, readyFile string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for i := range cfg.Regions {
		// The listeners bind the advertised host: localhost by default.
		r := &cfg.Regions[i]
		_, p, _ := net.SplitHostPort(r.BrokerAddr)
		_, w, _ := net.SplitHostPort(r.WebAddr)
		r.BrokerAddr, r.WebAddr = net.JoinHostPort(r.AdvertisedHost, p), net.JoinHostPort(r.AdvertisedHost, w)
	}
	if readyFile != "" {
		// A ready file left by an earlier run must not be taken for this
		// one's.
		if err := os.Remove(readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--ready-file: %w", err)
		}
	}
	s, err := standalone.StartDev(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	var ready devReady
	fields := []string{}
	for _, n := range s.Nodes() {
		name := n.Service().Region()
		ready.Regions = append(ready.Regions, devRegion{Name: name, ServiceURL: n.ServiceURL(), WebServiceURL: n.WebURL()})
		fields = append(fields, fmt.Sprintf("%s=%s,%s", name, n.ServiceURL(), n.WebURL()))
	}
	if readyFile != "" {
		if err := writeFileAtomic(readyFile, ready); err != nil {
			return fmt.Errorf("--ready-file: %w", err)
		}
		defer os.Remove(readyFile)
	}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "dev ready: %s etcd=%s\n", strings.Join(fields, " "), strings.Join(s.EtcdEndpoints(), ",")); err != nil {
		log.Warn("cannot write the ready line", "err", err)
	}
	<-ctx.Done()
	log.Info("shutting down dev regions")
	began := time.Now()
	s.Close()
	log.Info("dev regions stopped", "took", time.Since(began).Round(time.Millisecond))
	return nil
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
