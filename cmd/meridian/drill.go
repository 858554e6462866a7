package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/drill"
)

// `meridian drill`: rehearse losing a region under load (the drill
// package does the work; this file maps flags onto drill.Config and the
// admin CLI's credentials onto the drill's admin and Pulsar clients).

func newDrillCommand() *cobra.Command {
	a := &adminCLI{}
	cfg := drill.DefaultConfig()
	var serviceURLs, adminURLs []string
	cmd := &cobra.Command{
		Use:   "drill --namespace TENANT/NS --lose REGION",
		Short: "Rehearse losing a region under real load; report RPO, RTO, duplicates and losses",
		Long: `Rehearse the loss of a region: run keyed, sequenced producers and consumers on
replicated subscriptions on the drill's own topics in the namespace, cut the
region off, fail over, restore it, fail back, and report what the clients saw:
RPO (messages the lost region had receipted that the new one lacked), RTO (per
client, median and maximum), duplicates per subscription, order per key and
producer, and the fail back. A missed threshold, or any message lost for good,
exits non-zero. The report is DIR/report.json and DIR/report.html.

  meridian drill --admin-url http://localhost:8080 --namespace public/default --lose us-east

--cut isolate (the default) fences the region for the drill's topics only,
under a TTL the drill renews (a killed drill's fence lapses by itself); the
switch moves those topics' own active region. --cut command runs your
commands instead (stop the region's processes, firewall it), for a cut that
exercises the whole region:

  meridian drill --namespace acme/orders --lose us-east --cut command \
    --cut-command 'kubectl -n us-east scale sts broker --replicas=0' \
    --restore-command 'kubectl -n us-east scale sts broker --replicas=3'

--mode unplanned (the default) cuts first, then switches to --to at once (or,
with --cut command, no --to and automatic failover on the namespace, waits
for it); --mode planned switches first, then cuts. The first Ctrl-C (or
SIGTERM) restores the region and fails back before exiting; a second exits at
once and says what is still cut.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.ServiceURLs, err = regionURLs("--service-url-of", serviceURLs); err != nil {
				return err
			}
			if cfg.AdminURLs, err = regionURLs("--admin-url-of", adminURLs); err != nil {
				return err
			}
			return runDrill(cmd, a, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.url, "admin-url", "http://localhost:8080", "the admin REST API of any region (regions and their URLs are read from the cluster records through it)")
	f.StringVar(&a.authPlugin, "auth-plugin", "", "authentication plugin: token or tls, as meridian admin")
	f.StringVar(&a.authParams, "auth-params", "", "the plugin's parameters, as meridian admin")
	a.register(cmd)
	f.StringVar(&cfg.Namespace, "namespace", "", "TENANT/NS: the namespace drilled; it must replicate to --lose and --to")
	f.StringVar(&cfg.Lose, "lose", "", "the region lost")
	f.StringVar(&cfg.To, "to", "", "the region that takes over (default: the namespace's first fallback region, else the replication cluster after --lose)")
	f.StringVar((*string)(&cfg.Cut), "cut", string(cfg.Cut), "how the region is cut: isolate (a fence on the drill's topics only) or command (your commands)")
	f.StringVar(&cfg.CutCommand, "cut-command", "", "with --cut command: the shell command that cuts the region")
	f.StringVar(&cfg.RestoreCommand, "restore-command", "", "with --cut command: the shell command that restores it")
	f.StringVar((*string)(&cfg.Mode), "mode", string(cfg.Mode), "unplanned (cut, then switch) or planned (switch, then cut)")
	f.IntVar(&cfg.Rate, "rate", cfg.Rate, "messages per second over all the drill's producers")
	f.IntVar(&cfg.Topics, "topics", cfg.Topics, "how many topics, each with one producer and one replicated subscription")
	f.StringVar(&cfg.SubscriptionType, "subscription-type", cfg.SubscriptionType, "Exclusive, Failover, Shared or Key_Shared")
	f.DurationVar(&cfg.Before, "before", cfg.Before, "warm-up before the cut")
	f.DurationVar(&cfg.Outage, "outage", cfg.Outage, "how long the region stays cut")
	f.DurationVar(&cfg.After, "after", cfg.After, "how long the load runs after the fail back")
	f.DurationVar(&cfg.Drain, "drain", cfg.Drain, "how long to wait, once the producers stop, for every receipted message to be delivered")
	f.DurationVar(&cfg.FenceTTL, "fence-ttl", cfg.FenceTTL, "with --cut isolate: how long the fence outlives a drill that stops renewing it (3s..5m)")
	f.StringVar(&cfg.ReportDir, "report", "", "directory for report.json and report.html (default drill-report-<time>)")
	f.DurationVar(&cfg.Thresholds.MaxRTO, "max-rto", cfg.Thresholds.MaxRTO, "fail when a client's RTO exceeds this")
	f.Float64Var(&cfg.Thresholds.MaxDuplicatesSeconds, "max-duplicates-seconds", cfg.Thresholds.MaxDuplicatesSeconds, "fail when a subscription's duplicates span more seconds of traffic")
	f.DurationVar(&cfg.Thresholds.MaxFailBack, "max-fail-back", cfg.Thresholds.MaxFailBack, "fail when a client takes longer to be home again")
	f.IntVar(&cfg.Thresholds.MaxOrderViolations, "max-order-violations", cfg.Thresholds.MaxOrderViolations, "fail when more messages are first delivered out of order (ordered subscription types)")
	f.IntVar(&cfg.Thresholds.MaxSendErrors, "max-send-errors", cfg.Thresholds.MaxSendErrors, "fail when more sends fail for good (-1: not judged)")
	f.DurationVar(&cfg.Client.KeepAlive, "keep-alive", cfg.Client.KeepAlive, "the clients' keep-alive interval (a dead connection is noticed after two)")
	f.DurationVar(&cfg.Client.MaxBackoff, "max-backoff", cfg.Client.MaxBackoff, "the clients' reconnect backoff cap")
	f.StringArrayVar(&serviceURLs, "service-url-of", nil, "REGION=pulsar://host:port,...: reach REGION's brokers here instead of its cluster record's URL (repeatable)")
	f.StringArrayVar(&adminURLs, "admin-url-of", nil, "REGION=http://host:port: reach REGION's admin API here instead of its cluster record's URL (repeatable)")
	return cmd
}

// regionURLs parses REGION=URL flags.
func regionURLs(flag string, pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		region, u, ok := strings.Cut(p, "=")
		if !ok || region == "" || u == "" {
			return nil, fmt.Errorf("%s %q: want REGION=URL", flag, p)
		}
		out[region] = u
	}
	return out, nil
}

// runDrill plans the drill (refusing bad input before anything is
// touched), runs it, prints the summary and exits non-zero when it failed.
func runDrill(cmd *cobra.Command, a *adminCLI, cfg drill.Config) error {
	ctx := cmd.Context()
	rc, err := a.restClient()
	if err != nil {
		return err
	}
	admin := &drill.HTTPAdmin{URL: strings.TrimSuffix(a.url, "/"), Client: rc.HTTPClient}
	plan, err := drill.MakePlan(ctx, cfg, admin)
	if err != nil {
		return err
	}
	if plan.ReportDir == "" {
		plan.ReportDir = "drill-report-" + time.Now().UTC().Format("20060102-150405")
	}
	auth, err := a.pulsarAuthentication()
	if err != nil {
		return err
	}
	newClient := func(o pulsar.ClientOptions) (pulsar.Client, error) {
		o.Authentication = auth
		o.TLSTrustCertsFilePath, o.TLSAllowInsecureConnection = a.trustCert, a.insecure
		return pulsar.NewClient(o)
	}
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupts)
	out := cmd.OutOrStdout()
	report, err := drill.Run(ctx, plan, drill.Env{Admin: admin, NewClient: newClient, Out: out, Terminal: isTerminal(out),
		Interrupts: interrupts, Exit: os.Exit})
	fmt.Fprintln(out, drill.Summary(report))
	fmt.Fprintf(out, "report: %s/report.json, %s/report.html\n", plan.ReportDir, plan.ReportDir)
	if err != nil {
		return err
	}
	if !report.Verdict.Pass {
		var names []string
		for _, c := range report.Verdict.Failed() {
			names = append(names, fmt.Sprintf("%s (%s, limit %s)", c.Name, c.Value, c.Limit))
		}
		return errors.New("drill failed: " + strings.Join(names, "; "))
	}
	return nil
}

// pulsarAuthentication is the workload clients' authentication from the
// same flags as the admin client's.
func (a *adminCLI) pulsarAuthentication() (pulsar.Authentication, error) {
	if _, err := a.config(); err != nil { // checks the flags together
		return nil, err
	}
	switch {
	case a.token != "":
		return pulsar.NewAuthenticationToken(a.token), nil
	case a.tokenFile != "":
		return pulsar.NewAuthenticationTokenFromFile(a.tokenFile), nil
	case a.certFile != "":
		return pulsar.NewAuthenticationTLS(a.certFile, a.keyFile), nil
	case a.authPlugin != "":
		auth, err := pulsar.NewAuthentication(a.authPlugin, a.authParams)
		if err != nil {
			return nil, fmt.Errorf("--auth-plugin %s: %w", a.authPlugin, err)
		}
		return auth, nil
	}
	return nil, nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
