package main

import (
	"context"
	"errors"
	"net/url"
	"sort"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"

	"github.com/meridian-mq/meridian/global"
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
	return group("clusters", "Manage clusters (regions)", list, get, create, update, del,
		a.updateClusterMigrationCommand(), a.getClusterMigrationCommand())
}

// updateClusterMigrationCommand is pulsar-admin's `clusters
// update-cluster-migration` (PIP-188): with --migrated, every client of the
// cluster moves to the URLs given (producers at once, consumers once they
// have drained the cluster's backlog); without it, the URLs are only
// recorded.
func (a *adminCLI) updateClusterMigrationCommand() *cobra.Command {
	var (
		migrated bool
		to       global.ClusterURL
	)
	cmd := a.verb("update-cluster-migration CLUSTER", "Move every client of a cluster to another cluster (--migrated), or only record where they would go",
		1, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			return rc.PostWithQueryParamsWithContext(ctx, "/admin/v2/clusters/"+url.PathEscape(args[0])+"/migrate", &to,
				map[string]string{"migrated": strconv.FormatBool(migrated)})
		})
	f := cmd.Flags()
	f.BoolVar(&migrated, "migrated", false, "move the cluster's clients now (without it the URLs are only recorded)")
	f.StringVar(&to.ServiceURL, "service-url", "", "the new cluster's web service URL (http://host:8080)")
	f.StringVar(&to.ServiceURLTLS, "service-url-secure", "", "the new cluster's web service TLS URL (https://host:8443)")
	f.StringVar(&to.BrokerServiceURL, "broker-url", "", "the new cluster's broker service URL (pulsar://host:6650[,host:6650...])")
	f.StringVar(&to.BrokerServiceURLTLS, "broker-url-secure", "", "the new cluster's broker service TLS URL (pulsar+ssl://host:6651[,...])")
	return cmd
}

// getClusterMigrationCommand is pulsar-admin's `clusters
// get-cluster-migration`: Pulsar's ClusterPolicies, as the server sends it.
func (a *adminCLI) getClusterMigrationCommand() *cobra.Command {
	return a.verb("get-cluster-migration CLUSTER", "Show whether a cluster is migrated, and where to", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			body, err := a.rawGet(ctx, "/admin/v2/clusters/"+url.PathEscape(args[0])+"/migrate", nil)
			if err != nil {
				return err
			}
			return p.raw(body)
		})
}
