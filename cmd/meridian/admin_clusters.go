package main

import (
	"context"
	"errors"
	"sort"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// `meridian admin clusters`: the regions, as Pulsar's clusters.

func (a *adminCLI) clustersCommand() *cobra.Command {
	list := a.verb("list", "List clusters (regions)", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		cs, err := c.Clusters().ListWithContext(ctx)
		if err != nil {
			return err
		}
		sort.Strings(cs)
		return p.list(cs)
	})
	get := a.verb("get CLUSTER", "Show a cluster's service URLs", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		d, err := c.Clusters().GetWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.table(d, []string{"SERVICE URL", "SERVICE URL TLS", "BROKER SERVICE URL", "BROKER SERVICE URL TLS", "PEERS"},
			[][]string{{orDash(d.ServiceURL), orDash(d.ServiceURLTls), orDash(d.BrokerServiceURL), orDash(d.BrokerServiceURLTls), joinOrNone(d.PeerClusterNames)}})
	})
	withURLs := func(use, short string, fn func(context.Context, pulsaradmin.Client, utils.ClusterData) error) *cobra.Command {
		var d utils.ClusterData
		cmd := a.verb(use, short, 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			d.Name = args[0]
			if d.ServiceURL == "" && d.ServiceURLTls == "" && d.BrokerServiceURL == "" && d.BrokerServiceURLTls == "" {
				return errors.New("give at least one of --url, --url-secure, --broker-url, --broker-url-secure")
			}
			return fn(ctx, c, d)
		})
		f := cmd.Flags()
		f.StringVar(&d.ServiceURL, "url", "", "web service URL (http://host:8080)")
		f.StringVar(&d.ServiceURLTls, "url-secure", "", "web service TLS URL (https://host:8443)")
		f.StringVar(&d.BrokerServiceURL, "broker-url", "", "broker service URL (pulsar://host:6650)")
		f.StringVar(&d.BrokerServiceURLTls, "broker-url-secure", "", "broker service TLS URL (pulsar+ssl://host:6651)")
		return cmd
	}
	create := withURLs("create CLUSTER", "Create a cluster", func(ctx context.Context, c pulsaradmin.Client, d utils.ClusterData) error {
		return c.Clusters().CreateWithContext(ctx, d)
	})
	update := withURLs("update CLUSTER", "Change a cluster's service URLs", func(ctx context.Context, c pulsaradmin.Client, d utils.ClusterData) error {
		return c.Clusters().UpdateWithContext(ctx, d)
	})
	del := a.verb("delete CLUSTER", "Delete a cluster (no tenant or namespace may still use it)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Clusters().DeleteWithContext(ctx, args[0])
	})
	return group("clusters", "Manage clusters (regions)", list, get, create, update, del)
}
