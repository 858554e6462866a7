package main

import (
	"context"
	"errors"
	"sort"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

func (a *adminCLI) tenantsCommand() *cobra.Command {
	list := a.verb("list", "List tenants", 0, func(ctx context.Context, c pulsaradmin.Client, p *printer, _ []string) error {
		ts, err := c.Tenants().ListWithContext(ctx)
		if err != nil {
			return err
		}
		sort.Strings(ts)
		return p.list(ts)
	})
	get := a.verb("get TENANT", "Show a tenant's admin roles and allowed clusters", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		t, err := c.Tenants().GetWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.table(t, []string{"ADMIN ROLES", "ALLOWED CLUSTERS"},
			[][]string{{joinOrNone(t.AdminRoles), joinOrNone(t.AllowedClusters)}})
	})

	var roles, clusters []string
	create := a.verb("create TENANT", "Create a tenant (allowed clusters default to every cluster)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		allowed := clusters
		if len(allowed) == 0 {
			// pulsar-admin's default: the tenant may use every cluster.
			all, err := c.Clusters().ListWithContext(ctx)
			if err != nil {
				return err
			}
			allowed = all
		}
		return c.Tenants().CreateWithContext(ctx, utils.TenantData{Name: args[0], AdminRoles: nonNil(roles), AllowedClusters: allowed})
	})
	create.Flags().StringSliceVarP(&roles, "admin-roles", "r", nil, "comma-separated admin roles")
	create.Flags().StringSliceVarP(&clusters, "allowed-clusters", "c", nil, "comma-separated clusters the tenant may use (default: all)")

	var uRoles, uClusters []string
	update := &cobra.Command{Use: "update TENANT", Short: "Change a tenant's admin roles or allowed clusters (the one not given is kept)", Args: cobra.ExactArgs(1)}
	update.RunE = a.runE(func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		rolesSet, clustersSet := update.Flags().Changed("admin-roles"), update.Flags().Changed("allowed-clusters")
		if !rolesSet && !clustersSet {
			return errors.New("nothing to change: give --admin-roles and/or --allowed-clusters")
		}
		t := utils.TenantData{Name: args[0], AdminRoles: nonNil(uRoles), AllowedClusters: nonNil(uClusters)}
		if !rolesSet || !clustersSet {
			cur, err := c.Tenants().GetWithContext(ctx, args[0])
			if err != nil {
				return err
			}
			if !rolesSet {
				t.AdminRoles = nonNil(cur.AdminRoles)
			}
			if !clustersSet {
				t.AllowedClusters = nonNil(cur.AllowedClusters)
			}
		}
		return c.Tenants().UpdateWithContext(ctx, t)
	})
	update.Flags().StringSliceVarP(&uRoles, "admin-roles", "r", nil, "comma-separated admin roles (replaces the current ones)")
	update.Flags().StringSliceVarP(&uClusters, "allowed-clusters", "c", nil, "comma-separated allowed clusters (replaces the current ones)")

	del := a.verb("delete TENANT", "Delete a tenant (it must have no namespaces)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Tenants().DeleteWithContext(ctx, args[0])
	})
	return group("tenants", "Manage tenants", list, get, create, update, del)
}
