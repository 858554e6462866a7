package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// `meridian admin brokers`. Its leader-broker verb is in admin_load.go.

func (a *adminCLI) brokersCommand() *cobra.Command {
	list := &cobra.Command{Use: "list [CLUSTER]", Short: "List the active brokers (of one cluster, or of this one)", Args: cobra.MaximumNArgs(1)}
	list.RunE = a.runE(func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		var bs []string
		var err error
		if len(args) == 1 {
			bs, err = c.Brokers().GetActiveBrokersWithContext(ctx, args[0])
		} else {
			bs, err = c.Brokers().GetListActiveBrokersWithContext(ctx)
		}
		if err != nil {
			return err
		}
		sort.Strings(bs)
		return p.list(bs)
	})
	var version string
	health := a.verb("healthcheck", "Check that the broker serves: prints ok, or fails", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		v := utils.TopicVersion(strings.ToUpper(version))
		if v != utils.TopicVersionV1 && v != utils.TopicVersionV2 {
			return fmt.Errorf("--topic-version %q: want V1 or V2", version)
		}
		if err := c.Brokers().HealthCheckWithTopicVersionWithContext(ctx, v); err != nil {
			return err
		}
		return p.scalar("ok", "ok")
	})
	health.Flags().StringVar(&version, "topic-version", string(utils.TopicVersionV1), "name form of the health check topic: V1 or V2")
	return group("brokers", "Inspect brokers", list, health, a.leaderBrokerVerb())
}
