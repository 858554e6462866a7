package main

import (
	"context"
	"errors"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The replication commands of `meridian admin`: the replicator dispatch
// rate of a namespace (the region's, as Pulsar keys it by cluster) and of a
// topic, a namespace's replication clusters and a topic's override of them,
// with pulsar-admin's verbs and flags.

// dispatchRateFlags are pulsar-admin's flags of set-replicator-dispatch-rate,
// with its defaults: -1 is no limit, and the period is one second.
type dispatchRateFlags struct {
	msgs, bytes int64
	period      int
}

func (f *dispatchRateFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.Int64Var(&f.msgs, "msg-dispatch-rate", -1, "messages per period (-1: no limit)")
	fs.Int64Var(&f.bytes, "byte-dispatch-rate", -1, "bytes per period (-1: no limit)")
	fs.IntVar(&f.period, "dispatch-rate-period", 1, "the period, in seconds")
	withShorthand(fs, "msg-dispatch-rate", "md")
	withShorthand(fs, "byte-dispatch-rate", "bd")
	withShorthand(fs, "dispatch-rate-period", "dt")
}

func (f *dispatchRateFlags) check() error {
	if f.period < 1 {
		return errors.New("--dispatch-rate-period must be 1 or more")
	}
	return nil
}

func (a *adminCLI) setNamespaceDispatchRateCommand() *cobra.Command {
	var f dispatchRateFlags
	cmd := a.verb("set-replicator-dispatch-rate NAMESPACE", "Set the rate at which this region replicates a namespace's messages to the others",
		1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return c.Namespaces().SetReplicatorDispatchRateWithContext(ctx, ns, utils.DispatchRate{
				DispatchThrottlingRateInMsg: int(f.msgs), DispatchThrottlingRateInByte: f.bytes, RatePeriodInSecond: f.period})
		})
	f.register(cmd)
	return cmd
}

func (a *adminCLI) getNamespaceDispatchRateCommand() *cobra.Command {
	return a.verb("get-replicator-dispatch-rate NAMESPACE", "Show the rate at which this region replicates a namespace's messages (null: none)",
		1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			rate, err := c.Namespaces().GetReplicatorDispatchRateWithContext(ctx, ns)
			if err != nil {
				return err
			}
			if rate == (utils.DispatchRate{}) { // 204: none set
				return p.jsonValue(nil)
			}
			return p.object(rate)
		})
}

func (a *adminCLI) removeNamespaceDispatchRateCommand() *cobra.Command {
	return a.verb("remove-replicator-dispatch-rate NAMESPACE", "Remove the rate at which this region replicates a namespace's messages",
		1, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			// pulsaradmin has no call for it; this is the request
			// pulsar-admin sends.
			return a.restDelete(ctx, "/admin/v2/namespaces/"+ns.String()+"/replicatorDispatchRate")
		})
}

// restDelete sends DELETE path with the flags' URL and credentials, as
// pulsaradmin would.
func (a *adminCLI) restDelete(ctx context.Context, path string) error {
	c, err := a.restClient()
	if err != nil {
		return err
	}
	return c.DeleteWithContext(ctx, path)
}

func (a *adminCLI) setTopicDispatchRateCommand() *cobra.Command {
	var f dispatchRateFlags
	cmd := a.topicVerb("set-replicator-dispatch-rate TOPIC", "Set the rate at which a topic's messages replicate to the other regions (over its namespace's)",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			if err := f.check(); err != nil {
				return err
			}
			return c.Topics().SetReplicatorDispatchRateWithContext(ctx, t, utils.DispatchRateData{
				DispatchThrottlingRateInMsg: f.msgs, DispatchThrottlingRateInByte: f.bytes, RatePeriodInSecond: int64(f.period)})
		})
	f.register(cmd)
	return cmd
}

func (a *adminCLI) getTopicDispatchRateCommand() *cobra.Command {
	return a.topicVerb("get-replicator-dispatch-rate TOPIC", "Show a topic's own replicator dispatch rate (null: none)",
		func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
			rate, err := c.Topics().GetReplicatorDispatchRateWithContext(ctx, t)
			if err != nil {
				return err
			}
			return p.object(rate)
		})
}

func (a *adminCLI) removeTopicDispatchRateCommand() *cobra.Command {
	return a.topicVerb("remove-replicator-dispatch-rate TOPIC", "Remove a topic's own replicator dispatch rate (its namespace's applies)",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			return c.Topics().RemoveReplicatorDispatchRateWithContext(ctx, t)
		})
}

func (a *adminCLI) setClustersCommand() *cobra.Command {
	var clusters []string
	cmd := a.verb("set-clusters NAMESPACE", "Set the clusters a namespace's topics replicate to", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if len(clusters) == 0 {
			return errors.New("give --clusters (comma-separated)")
		}
		return c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, args[0], clusters)
	})
	cmd.Flags().StringSliceVarP(&clusters, "clusters", "c", nil, "comma-separated replication clusters (required)")
	return cmd
}

func (a *adminCLI) getClustersCommand() *cobra.Command {
	return a.verb("get-clusters NAMESPACE", "Show the clusters a namespace replicates to", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		cs, err := c.Namespaces().GetNamespaceReplicationClustersWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.list(cs)
	})
}

func (a *adminCLI) setTopicClustersCommand() *cobra.Command {
	var clusters []string
	cmd := a.topicVerb("set-replication-clusters TOPIC", "Set the clusters a topic replicates to, over its namespace's",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			if len(clusters) == 0 {
				return errors.New("give --clusters (comma-separated)")
			}
			return c.Topics().SetReplicationClustersWithContext(ctx, t, clusters)
		})
	cmd.Flags().StringSliceVarP(&clusters, "clusters", "c", nil, "comma-separated replication clusters (required)")
	return cmd
}

func (a *adminCLI) getTopicClustersCommand() *cobra.Command {
	return a.topicVerb("get-replication-clusters TOPIC", "Show a topic's override of its namespace's replication clusters (nothing when unset)",
		func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
			cs, err := c.Topics().GetReplicationClustersWithContext(ctx, t)
			if err != nil {
				return err
			}
			return p.list(cs)
		})
}

func (a *adminCLI) removeTopicClustersCommand() *cobra.Command {
	return a.topicVerb("remove-replication-clusters TOPIC", "Remove a topic's override of its namespace's replication clusters",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			return c.Topics().RemoveReplicationClustersWithContext(ctx, t)
		})
}
