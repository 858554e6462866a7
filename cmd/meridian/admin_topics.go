package main

import (
	"context"
	"errors"
	"sort"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// `meridian admin topics`: the group, and its verbs on topics themselves
// (create, delete, statistics, lookup). The verbs on a topic's
// subscriptions are in admin_subscriptions.go; see admin.go for the rest.

func (a *adminCLI) topicsCommand() *cobra.Command {
	list := a.verb("list NAMESPACE", "List a namespace's topics: partitioned topics and the others", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		part, nonPart, err := c.Topics().ListWithContext(ctx, ns)
		if err != nil {
			return err
		}
		sort.Strings(part)
		sort.Strings(nonPart)
		if p.json {
			return p.jsonValue(map[string][]string{"partitioned": nonNil(part), "nonPartitioned": nonNil(nonPart)})
		}
		return p.list(append(part, nonPart...))
	})
	create := a.topicVerb("create TOPIC", "Create a non-partitioned topic", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().CreateWithContext(ctx, t, 0)
	})
	partitionsVerb := func(use, short string, fn func(context.Context, pulsaradmin.Client, utils.TopicName, int) error) *cobra.Command {
		var n int
		cmd := a.topicVerb(use, short, func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			if n <= 0 {
				return errors.New("give --partitions (-p) of 1 or more")
			}
			return fn(ctx, c, t, n)
		})
		cmd.Flags().IntVarP(&n, "partitions", "p", 0, "number of partitions (required)")
		return cmd
	}
	createPart := partitionsVerb("create-partitioned-topic TOPIC", "Create a partitioned topic", func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName, n int) error {
		return c.Topics().CreateWithContext(ctx, t, n)
	})
	updatePart := partitionsVerb("update-partitioned-topic TOPIC", "Add partitions to a partitioned topic", func(ctx context.Context, c pulsaradmin.Client, t utils.TopicName, n int) error {
		return c.Topics().UpdateWithContext(ctx, t, n)
	})

	var force bool
	del := a.topicVerb("delete TOPIC", "Delete a topic, partitioned or not (-f: even with producers or consumers)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		// One verb for both kinds: the partitioned metadata says which
		// endpoint to call (0 partitions: a plain topic, or none at all).
		md, err := c.Topics().GetMetadataWithContext(ctx, t)
		if err != nil {
			return err
		}
		return c.Topics().DeleteWithContext(ctx, t, force, md.Partitions == 0)
	})
	del.Flags().BoolVarP(&force, "force", "f", false, "delete even with connected producers or consumers")
	var forcePart bool
	delPart := a.topicVerb("delete-partitioned-topic TOPIC", "Delete a partitioned topic and its partitions", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().DeleteWithContext(ctx, t, forcePart, false)
	})
	delPart.Flags().BoolVarP(&forcePart, "force", "f", false, "delete even with connected producers or consumers")

	stats := a.topicVerb("stats TOPIC", "Show a topic's statistics (the server's JSON, as it sent it)", func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
		body, err := a.rawGet(ctx, topicPath(t, "stats"), nil)
		if err != nil {
			return err
		}
		return p.raw(body)
	})
	var perPartition bool
	pstats := a.topicVerb("partitioned-stats TOPIC", "Show a partitioned topic's statistics, summed over its partitions", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		body, err := a.rawGet(ctx, topicPath(t, "partitioned-stats"), map[string]string{"perPartition": strconv.FormatBool(perPartition)})
		if err != nil {
			return err
		}
		return p.raw(body)
	})
	pstats.Flags().BoolVar(&perPartition, "per-partition", false, "also show each partition's statistics")
	internal := a.topicVerb("stats-internal TOPIC", "Show a topic's internal statistics (ledgers and cursors)", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		s, err := c.Topics().GetInternalStatsWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.object(s)
	})
	subs := a.topicVerb("subscriptions TOPIC", "List a topic's subscriptions", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		ss, err := c.Subscriptions().ListWithContext(ctx, t)
		if err != nil {
			return err
		}
		sort.Strings(ss)
		return p.list(ss)
	})
	terminate := a.topicVerb("terminate TOPIC", "Seal a topic: no more messages may be published", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		id, err := c.Topics().TerminateWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar("Topic successfully terminated at "+shortID(id), id)
	})
	unload := a.topicVerb("unload TOPIC", "Unload a topic from its broker (it loads again on next use)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return c.Topics().UnloadWithContext(ctx, t)
	})
	lookup := a.topicVerb("lookup TOPIC", "Show the broker that serves a topic", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		l, err := c.Topics().LookupWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar(l.BrokerURL, l)
	})
	last := a.topicVerb("last-message-id TOPIC", "Show the id of a topic's last message", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		id, err := c.Topics().GetLastMessageIDWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.scalar(shortID(id), id)
	})

	cmds := []*cobra.Command{list, create, createPart, updatePart, del, delPart,
		stats, pstats, internal, subs, a.createSubCommand(), a.unsubscribeCommand(), a.skipCommand(),
		a.clearBacklogCommand(), a.resetCursorCommand(), a.expireCommand(), a.peekCommand(),
		terminate, unload, lookup, last, a.bundleRangeCommand(),
		a.setTopicDispatchRateCommand(), a.getTopicDispatchRateCommand(), a.removeTopicDispatchRateCommand(),
		a.setTopicClustersCommand(), a.getTopicClustersCommand(), a.removeTopicClustersCommand(),
		a.setTopicActiveRegionCommand(), a.getTopicActiveRegionCommand(), a.removeTopicActiveRegionCommand()}
	cmds = append(cmds, a.grantTopicCommand(), a.revokeTopicCommand(), a.topicPermissionsCommand(),
		a.getMessageByIDCommand(), a.getMessageIDCommand(),
		a.setReplicatedSubscriptionCommand(), a.getReplicatedSubscriptionCommand())
	cmds = append(cmds, a.topicPropertiesCommands()...)
	cmds = append(cmds, a.topicSchemaStrategyCommands()...)
	cmds = append(cmds, a.topicPolicyVerbs()...)
	return group("topics", "Manage topics, their subscriptions and their policies", cmds...)
}

// A topic's own active region, over its namespace's (Meridian's endpoint;
// see cluster/admin/activeregion.go).

func (a *adminCLI) setTopicActiveRegionCommand() *cobra.Command {
	return a.verb("set-active-region TOPIC REGION", "Make REGION answer every lookup of the topic, over its namespace's active region, and move its clients there (switched by hand only: automatic failover does not move it)", 2,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			t, err := topicArg(args[0])
			if err != nil {
				return err
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			return rc.PostWithContext(ctx, topicPath(t, "activeRegion"), activeRegion{ActiveRegion: args[1]})
		})
}

func (a *adminCLI) getTopicActiveRegionCommand() *cobra.Command {
	var applied bool
	cmd := a.topicVerb("get-active-region TOPIC", "Show a topic's own active region (--applied: the one in effect, its own or else its namespace's)", func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
		none := "none: the namespace's active region applies"
		if applied {
			none = "none: every region serves its own clients"
		}
		return a.printActiveRegion(ctx, p, topicPath(t, "activeRegion"), map[string]string{"applied": strconv.FormatBool(applied)}, none)
	})
	cmd.Flags().BoolVar(&applied, "applied", false, "show the active region in effect")
	return cmd
}

func (a *adminCLI) removeTopicActiveRegionCommand() *cobra.Command {
	return a.topicVerb("remove-active-region TOPIC", "Remove a topic's own active region: its namespace's applies again", func(ctx context.Context, _ pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		return a.restDelete(ctx, topicPath(t, "activeRegion"))
	})
}

// A topic's properties: metadata kept with it, as pulsar-admin's
// get-properties, update-properties and remove-properties.

func (a *adminCLI) topicPropertiesCommands() []*cobra.Command {
	get := a.topicVerb("get-properties TOPIC", "Show a topic's properties", func(ctx context.Context, c pulsaradmin.Client, p *printer, t utils.TopicName) error {
		props, err := c.Topics().GetPropertiesWithContext(ctx, t)
		if err != nil {
			return err
		}
		return p.settings(props)
	})
	var pairs []string
	update := a.topicVerb("update-properties TOPIC", "Add or change properties of a topic (the others are kept)", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		props, err := propertiesArg("--property", pairs)
		if err != nil {
			return err
		}
		return c.Topics().UpdatePropertiesWithContext(ctx, t, props)
	})
	update.Flags().StringSliceVarP(&pairs, "property", "p", nil, "key=value (repeat -p, or separate them with commas)")
	var key string
	remove := a.topicVerb("remove-properties TOPIC", "Remove one property of a topic", func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
		if key == "" {
			return errors.New("give --key (-k)")
		}
		return c.Topics().RemovePropertyWithContext(ctx, t, key)
	})
	remove.Flags().StringVarP(&key, "key", "k", "", "the property to remove (required)")
	return []*cobra.Command{get, update, remove}
}
