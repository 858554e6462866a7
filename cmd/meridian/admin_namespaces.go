package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

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
		a.splitBundleVerb(),
		a.setActiveRegionCommand(), a.getActiveRegionCommand(), a.removeActiveRegionCommand())
}

// activeRegion is the body of Meridian's activeRegion endpoint (pulsaradmin
// has no call for it): the region that answers the namespace's lookups and
// the regions that take over from it, in order.
type activeRegion struct {
	ActiveRegion    string   `json:"activeRegion"`
	FallbackRegions []string `json:"fallbackRegions,omitempty"`
}

func activeRegionPath(ns string) (string, error) {
	name, err := namespaceArg(ns)
	if err != nil {
		return "", err
	}
	return "/admin/v2/namespaces/" + name.String() + "/activeRegion", nil
}

func (a *adminCLI) setActiveRegionCommand() *cobra.Command {
	var fallback []string
	cmd := a.verb("set-active-region NAMESPACE REGION", "Make REGION answer every lookup of the namespace (it must be one of its replication clusters)", 2,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			path, err := activeRegionPath(args[0])
			if err != nil {
				return err
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			return rc.PostWithContext(ctx, path, activeRegion{ActiveRegion: args[1], FallbackRegions: fallback})
		})
	cmd.Flags().StringSliceVar(&fallback, "fallback", nil, "comma-separated regions that take over from the active region, in order (replication clusters other than REGION)")
	return cmd
}

func (a *adminCLI) getActiveRegionCommand() *cobra.Command {
	return a.verb("get-active-region NAMESPACE", "Show a namespace's active region and its fallback regions", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			path, err := activeRegionPath(args[0])
			if err != nil {
				return err
			}
			body, err := a.rawGet(ctx, path, nil)
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(body)) == 0 { // 204: none set
				return p.scalar("none: every region serves its own clients", nil)
			}
			var ar activeRegion
			if err := json.Unmarshal(body, &ar); err != nil {
				return fmt.Errorf("the server's answer is not an active region: %w", err)
			}
			text := ar.ActiveRegion
			if len(ar.FallbackRegions) > 0 {
				text += " (fallback: " + strings.Join(ar.FallbackRegions, ", ") + ")"
			}
			return p.scalar(text, ar)
		})
}

func (a *adminCLI) removeActiveRegionCommand() *cobra.Command {
	return a.verb("remove-active-region NAMESPACE", "Remove a namespace's active region and fallback regions: every region serves its own clients", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			path, err := activeRegionPath(args[0])
			if err != nil {
				return err
			}
			return a.restDelete(ctx, path)
		})
}
