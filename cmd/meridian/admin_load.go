package main

import (
	"context"
	"errors"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/spf13/cobra"
)

// The admin verbs of load balancing: a broker's load report, the region's
// leader and bundle split, as pulsar-admin names them.

// brokerStatsCommand is `admin broker-stats`.
func (a *adminCLI) brokerStatsCommand() *cobra.Command {
	// Raw, as statistics print: pulsaradmin's GetLoadReport drops the
	// server's error, and its types drop Meridian's fields.
	report := a.rawVerb("load-report", "Show the broker's load report (Pulsar's LocalBrokerData), of the broker at --admin-url", "/admin/v2/broker-stats/load-report")
	topics := a.rawVerb("topics", "Show the statistics of the topics the broker at --admin-url serves, by namespace and bundle", "/admin/v2/broker-stats/topics")
	topics.Aliases = []string{"destinations"}
	metrics := a.rawVerb("monitoring-metrics", "Show the broker's metrics per namespace, in Pulsar's monitoring-metrics form", "/admin/v2/broker-stats/metrics")
	for _, cmd := range []*cobra.Command{topics, metrics} {
		// pulsar-admin's -i/--indent: the JSON here is always indented.
		cmd.Flags().BoolP("indent", "i", true, "indent the JSON (always: accepted for pulsar-admin's command lines)")
	}
	return group("broker-stats", "Inspect a broker's load and statistics", report, topics, metrics)
}

// leaderBrokerVerb is `admin brokers leader-broker`.
func (a *adminCLI) leaderBrokerVerb() *cobra.Command {
	return a.verb("leader-broker", "Show the region's elected leader broker", 0,
		func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
			info, err := c.Brokers().GetLeaderBrokerWithContext(ctx)
			if err != nil {
				return err
			}
			return p.object(info)
		})
}

// splitBundleVerb is `admin namespaces split-bundle NAMESPACE -b BUNDLE`.
func (a *adminCLI) splitBundleVerb() *cobra.Command {
	var (
		bundle string
		unload bool
	)
	cmd := a.verb("split-bundle NAMESPACE", "Split a namespace bundle in two halves of its hash range", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			if _, err := namespaceArg(args[0]); err != nil {
				return err
			}
			if bundle == "" {
				return errors.New("give --bundle (a range such as 0x00000000_0x40000000; see namespaces bundles)")
			}
			return c.Namespaces().SplitNamespaceBundleWithContext(ctx, args[0], bundle, unload)
		})
	cmd.Flags().StringVarP(&bundle, "bundle", "b", "", "the bundle's range, {start}_{end}")
	cmd.Flags().BoolVarP(&unload, "unload", "u", false, "unload the new bundles' topics after the split")
	return cmd
}
