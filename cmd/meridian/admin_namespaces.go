package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/spf13/cobra"
)

// `meridian admin namespaces`: the group, and its verbs that are neither a
// policy's, a permission's, replication's nor a bundle's (those each have
// their own file; see admin.go).

func (a *adminCLI) namespacesCommand() *cobra.Command {
	list := a.verb("list TENANT", "List a tenant's namespaces", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := c.Namespaces().GetNamespacesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		sort.Strings(ns)
		return p.list(ns)
	})
	topics := a.verb("topics NAMESPACE", "List a namespace's topics", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ts, err := c.Namespaces().GetTopicsWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		sort.Strings(ts)
		return p.list(ts)
	})

	var (
		createClusters []string
		bundles        int
	)
	create := a.verb("create NAMESPACE", "Create a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if _, err := namespaceArg(args[0]); err != nil {
			return err
		}
		var err error
		if bundles > 0 {
			err = c.Namespaces().CreateNsWithNumBundlesWithContext(ctx, args[0], bundles)
		} else {
			err = c.Namespaces().CreateNamespaceWithContext(ctx, args[0])
		}
		if err != nil || len(createClusters) == 0 {
			return err
		}
		if err := c.Namespaces().SetNamespaceReplicationClustersWithContext(ctx, args[0], createClusters); err != nil {
			return fmt.Errorf("namespace %s created, but setting its clusters failed: %w", args[0], err)
		}
		return nil
	})
	create.Flags().StringSliceVarP(&createClusters, "clusters", "c", nil, "comma-separated replication clusters (default: the broker's)")
	create.Flags().IntVarP(&bundles, "bundles", "b", 0, "number of bundles (default: the broker's)")

	del := a.verb("delete NAMESPACE", "Delete a namespace (it must have no topics)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Namespaces().DeleteNamespaceWithContext(ctx, args[0])
	})
	policies := a.verb("policies NAMESPACE", "Show all of a namespace's policies", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		pol, err := c.Namespaces().GetPoliciesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.object(pol)
	})

	retention := a.retentionCommands()
	return group("namespaces", "Manage namespaces and their policies", list, topics, create, del, policies,
		a.unloadNamespaceCommand(),
		retention[0], retention[1],
		a.setTTLCommand(), a.getTTLCommand(),
		a.setDedupCommand(), a.getDedupCommand(),
		a.grantCommand(), a.revokeCommand(), a.permissionsCommand(),
		a.setClustersCommand(), a.getClustersCommand(),
		a.setBacklogQuotaCommand(), a.getBacklogQuotaCommand(), a.removeBacklogQuotaCommand(),
		a.setAutoTopicCreationCommand(), a.getAutoTopicCreationCommand(), a.removeAutoTopicCreationCommand(),
		a.setNamespaceDispatchRateCommand(), a.getNamespaceDispatchRateCommand(), a.removeNamespaceDispatchRateCommand(),
		a.splitBundleVerb())
}
