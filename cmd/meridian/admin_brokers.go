package main

import (
	"context"
	"errors"
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
	return group("brokers", "Inspect brokers and change their dynamic configuration", list, health, a.leaderBrokerVerb(),
		a.listDynamicConfigCommand(), a.getAllDynamicConfigCommand(), a.getRuntimeConfigCommand(),
		a.updateDynamicConfigCommand(), a.deleteDynamicConfigCommand())
}

// The brokers' dynamic configuration: the settings that may change while
// brokers run, set for all of them, as pulsar-admin's brokers verbs.

func (a *adminCLI) listDynamicConfigCommand() *cobra.Command {
	return a.verb("list-dynamic-config", "List the settings that may change while brokers run", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		names, err := c.Brokers().GetDynamicConfigurationNamesWithContext(ctx)
		if err != nil {
			return err
		}
		sort.Strings(names)
		return p.list(names)
	})
}

// settings prints name=value settings, one a line, or as a JSON object.
func (p *printer) settings(m map[string]string) error {
	if m == nil {
		m = map[string]string{}
	}
	rows := make([][]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		rows = append(rows, []string{k, m[k]})
	}
	return p.table(m, []string{"NAME", "VALUE"}, rows)
}

func (a *adminCLI) getAllDynamicConfigCommand() *cobra.Command {
	return a.verb("get-all-dynamic-config", "Show the dynamic settings that have been changed, with their values", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		m, err := c.Brokers().GetAllDynamicConfigurationsWithContext(ctx)
		if err != nil {
			return err
		}
		return p.settings(m)
	})
}

func (a *adminCLI) getRuntimeConfigCommand() *cobra.Command {
	return a.verb("get-runtime-config", "Show the configuration the broker at --admin-url runs with", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		m, err := c.Brokers().GetRuntimeConfigurationsWithContext(ctx)
		if err != nil {
			return err
		}
		return p.settings(m)
	})
}

func (a *adminCLI) updateDynamicConfigCommand() *cobra.Command {
	var name, value string
	cmd := a.verb("update-dynamic-config", "Change a dynamic setting on every broker", 0, func(ctx context.Context, c pulsaradmin.Client, _ *printer, _ []string) error {
		if name == "" || value == "" {
			return errors.New("give --config (-c) and --value (-v); list-dynamic-config names the settings")
		}
		return c.Brokers().UpdateDynamicConfigurationWithContext(ctx, name, value)
	})
	cmd.Flags().StringVarP(&name, "config", "c", "", "the setting's name (required)")
	cmd.Flags().StringVarP(&value, "value", "v", "", "its new value (required)")
	return cmd
}

func (a *adminCLI) deleteDynamicConfigCommand() *cobra.Command {
	var name string
	cmd := a.verb("delete-dynamic-config", "Undo the change of a dynamic setting: brokers go back to their configuration file's value", 0, func(ctx context.Context, c pulsaradmin.Client, _ *printer, _ []string) error {
		if name == "" {
			return errors.New("give --config (-c)")
		}
		return c.Brokers().DeleteDynamicConfigurationWithContext(ctx, name)
	})
	cmd.Flags().StringVarP(&name, "config", "c", "", "the setting's name (required)")
	return cmd
}
