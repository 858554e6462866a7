package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

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
	strategy := a.namespaceSchemaStrategyCommands()
	stored := append(a.intNamespacePolicyCommands(), a.namespaceAutoSubscriptionCreationCommands()...)
	stored = append(stored, a.namespaceSchemaValidationCommands()...)
	stored = append(stored, a.namespacePropertiesCommands()...)
	stored = append(stored, a.namespaceOffloadCommands()...)
	stored = append(stored, a.bookieAffinityCommands()...)
	stored = append(stored, a.namespacePolicyCommands()...) // admin_nspolicies.go
	cmds := []*cobra.Command{list, topics, create, del, policies,
		a.unloadNamespaceCommand(), a.bundlesCommand(), strategy[0], strategy[1],
		a.grantSubscriptionCommand(), a.revokeSubscriptionCommand(), a.subscriptionPermissionsCommand(),
		retention[0], retention[1], a.removeNamespacePolicyCommand("retention", "retention", "retention"),
		a.setTTLCommand(), a.getTTLCommand(), a.removeTTLCommand(),
		a.setDedupCommand(), a.getDedupCommand(), a.removeNamespacePolicyCommand("deduplication", "deduplication", "deduplication switch"),
		a.grantCommand(), a.revokeCommand(), a.permissionsCommand(),
		a.setClustersCommand(), a.getClustersCommand(),
		a.setBacklogQuotaCommand(), a.getBacklogQuotaCommand(), a.removeBacklogQuotaCommand(),
		a.setAutoTopicCreationCommand(), a.getAutoTopicCreationCommand(), a.removeAutoTopicCreationCommand(),
		a.setNamespaceDispatchRateCommand(), a.getNamespaceDispatchRateCommand(), a.removeNamespaceDispatchRateCommand(),
		a.splitBundleVerb(),
		a.setActiveRegionCommand(), a.getActiveRegionCommand(), a.removeActiveRegionCommand(),
		a.setAutoFailoverCommand(), a.getAutoFailoverCommand(), a.removeAutoFailoverCommand()}
	return group("namespaces", "Manage namespaces and their policies", append(cmds, stored...)...)
}

// activeRegion is the body of Meridian's activeRegion endpoint (pulsaradmin
// has no call for it): the region that answers the namespace's lookups and
// the regions that take over from it, in order.
type activeRegion struct {
	ActiveRegion    string   `json:"activeRegion"`
	FallbackRegions []string `json:"fallbackRegions,omitempty"`
}

// namespaceEndpointPath is the path of one of Meridian's own endpoints of
// namespace ns (activeRegion, autoFailover).
func namespaceEndpointPath(ns, endpoint string) (string, error) {
	name, err := namespaceArg(ns)
	if err != nil {
		return "", err
	}
	return "/admin/v2/namespaces/" + name.String() + "/" + endpoint, nil
}

func activeRegionPath(ns string) (string, error) { return namespaceEndpointPath(ns, "activeRegion") }

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
			return a.printActiveRegion(ctx, p, path, nil, "none: every region serves its own clients")
		})
}

// printActiveRegion prints the active region that path (a namespace's or a
// topic's activeRegion endpoint) answers, or none when none is set.
func (a *adminCLI) printActiveRegion(ctx context.Context, p *printer, path string, query map[string]string, none string) error {
	body, err := a.rawGet(ctx, path, query)
	if err != nil {
		return err
	}
	if b := bytes.TrimSpace(body); len(b) == 0 || string(b) == "null" { // none set: a namespace's 204, a topic's null
		return p.scalar(none, nil)
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

func autoFailoverPath(ns string) (string, error) { return namespaceEndpointPath(ns, "autoFailover") }

// autoFailover is the body and answer of Meridian's autoFailover endpoint.
type autoFailover struct {
	DelaySeconds int `json:"delaySeconds"`
	LastSwitch   *struct {
		From     string `json:"from"`
		To       string `json:"to"`
		AtMillis int64  `json:"atMillis"`
	} `json:"lastSwitch,omitempty"`
}

func (a *adminCLI) setAutoFailoverCommand() *cobra.Command {
	var delay time.Duration
	cmd := a.verb("set-auto-failover NAMESPACE", "Let the namespace's active region move to its first fallback region when a majority of its regions have seen it unreachable, or it has held no session, for --delay (a superuser's; needs an active region, a fallback region and 3 replication clusters)", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			path, err := autoFailoverPath(args[0])
			if err != nil {
				return err
			}
			if delay < time.Second || delay%time.Second != 0 {
				return fmt.Errorf("--delay %v: want whole seconds, at least 1s", delay)
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			return rc.PostWithContext(ctx, path, autoFailover{DelaySeconds: int(delay / time.Second)})
		})
	cmd.Flags().DurationVar(&delay, "delay", 30*time.Second, "how long the active region must be seen lost before the switch")
	return cmd
}

func (a *adminCLI) getAutoFailoverCommand() *cobra.Command {
	return a.verb("get-auto-failover NAMESPACE", "Show a namespace's automatic failover: its delay and its last switch", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			path, err := autoFailoverPath(args[0])
			if err != nil {
				return err
			}
			body, err := a.rawGet(ctx, path, nil)
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(body)) == 0 { // 204: off
				return p.scalar("off", nil)
			}
			var af autoFailover
			if err := json.Unmarshal(body, &af); err != nil {
				return fmt.Errorf("the server's answer is not an automatic failover: %w", err)
			}
			text := fmt.Sprintf("on, delay %ds", af.DelaySeconds)
			if sw := af.LastSwitch; sw != nil {
				text += fmt.Sprintf(" (last switch %s -> %s at %s)", sw.From, sw.To, time.UnixMilli(sw.AtMillis).UTC().Format(time.RFC3339))
			}
			return p.scalar(text, af)
		})
}

func (a *adminCLI) removeAutoFailoverCommand() *cobra.Command {
	return a.verb("remove-auto-failover NAMESPACE", "Turn a namespace's automatic failover off (a superuser's)", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			path, err := autoFailoverPath(args[0])
			if err != nil {
				return err
			}
			return a.restDelete(ctx, path)
		})
}
