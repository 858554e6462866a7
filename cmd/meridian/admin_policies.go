package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The policy verbs of `meridian admin`, with pulsar-admin's names and
// flags: retention, message TTL, deduplication, backlog quota and auto
// topic creation, set, shown and removed per namespace.

func (a *adminCLI) retentionCommands() [2]*cobra.Command {
	var size, tm string
	set := a.verb("set-retention NAMESPACE", "Set how long and how much acknowledged data is kept", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if size == "" || tm == "" {
			return errors.New("give both --size and --time (-1 means unlimited, 0 no retention)")
		}
		bytes, err := parseSize(size)
		if err != nil {
			return fmt.Errorf("--size: %w", err)
		}
		secs, err := parseSeconds(tm)
		if err != nil {
			return fmt.Errorf("--time: %w", err)
		}
		pol := utils.RetentionPolicies{RetentionSizeInMB: -1, RetentionTimeInMinutes: -1}
		if bytes >= 0 {
			pol.RetentionSizeInMB = bytes / (1 << 20)
		}
		if secs >= 0 {
			pol.RetentionTimeInMinutes = int(secs / 60)
		}
		return c.Namespaces().SetRetentionWithContext(ctx, args[0], pol)
	})
	set.Flags().StringVarP(&size, "size", "s", "", "size limit: bytes, or a number with k, M, G or T (e.g. 10G); -1 for unlimited")
	set.Flags().StringVarP(&tm, "time", "t", "", "time limit: seconds, or a number with s, m, h, d, w or y (e.g. 3d); -1 for unlimited")
	get := a.verb("get-retention NAMESPACE", "Show a namespace's retention", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		r, err := c.Namespaces().GetRetentionWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if r == nil {
			r = &utils.RetentionPolicies{}
		}
		return p.table(r, []string{"RETENTION TIME (MINUTES)", "RETENTION SIZE (MB)"},
			[][]string{{strconv.Itoa(r.RetentionTimeInMinutes), strconv.FormatInt(r.RetentionSizeInMB, 10)}})
	})
	return [2]*cobra.Command{set, get}
}

func (a *adminCLI) setTTLCommand() *cobra.Command {
	var ttl string
	cmd := a.verb("set-message-ttl NAMESPACE", "Set the time after which unacknowledged messages expire (0: never)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if ttl == "" {
			return errors.New("give --messageTTL (seconds, or e.g. 1h; 0 means never)")
		}
		secs, err := parseSeconds(ttl)
		if err != nil || secs < 0 {
			return fmt.Errorf("--messageTTL %q: want 0 or more seconds (e.g. 3600 or 1h)", ttl)
		}
		return c.Namespaces().SetNamespaceMessageTTLWithContext(ctx, args[0], int(secs))
	})
	cmd.Flags().StringVar(&ttl, "messageTTL", "", "time to live: seconds, or a number with s, m, h, d or w; 0 disables")
	cmd.Flags().StringVar(&ttl, "ttl", "", "same as --messageTTL")
	withShorthand(cmd.Flags(), "messageTTL", "ttl")
	return cmd
}

func (a *adminCLI) getTTLCommand() *cobra.Command {
	return a.verb("get-message-ttl NAMESPACE", "Show a namespace's message TTL in seconds", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ttl, err := c.Namespaces().GetNamespaceMessageTTLWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		return p.scalar(strconv.Itoa(ttl), ttl)
	})
}

func (a *adminCLI) setDedupCommand() *cobra.Command {
	var enable, disable bool
	cmd := a.verb("set-deduplication NAMESPACE", "Turn message deduplication on (--enable) or off (--disable)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		if enable == disable {
			return errors.New("give exactly one of --enable and --disable")
		}
		return c.Namespaces().SetDeduplicationStatusWithContext(ctx, args[0], enable)
	})
	cmd.Flags().BoolVarP(&enable, "enable", "e", false, "enable deduplication")
	cmd.Flags().BoolVarP(&disable, "disable", "d", false, "disable deduplication")
	return cmd
}

func (a *adminCLI) getDedupCommand() *cobra.Command {
	return a.verb("get-deduplication NAMESPACE", "Show whether deduplication is on (unset: the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		// pulsaradmin has no getter of its own: the flag is part of the policies.
		pol, err := c.Namespaces().GetPoliciesWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if pol == nil || pol.DeduplicationEnabled == nil {
			return p.scalar("unset (broker default)", nil)
		}
		return p.scalar(strconv.FormatBool(*pol.DeduplicationEnabled), *pol.DeduplicationEnabled)
	})
}

func (a *adminCLI) setBacklogQuotaCommand() *cobra.Command {
	var limit, limitTime, policy, typ string
	cmd := a.verb("set-backlog-quota NAMESPACE", "Limit a namespace's backlog per topic, and say what happens past it", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		qt, err := utils.ParseBacklogQuotaType(typ)
		if err != nil {
			return fmt.Errorf("--type: %w", err)
		}
		pol, err := utils.ParseRetentionPolicy(policy)
		if err != nil {
			return fmt.Errorf("--policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", policy)
		}
		q := utils.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: pol}
		switch qt {
		case utils.DestinationStorage:
			if limit == "" {
				return errors.New("a destination_storage quota needs --limit (e.g. 10G)")
			}
			if q.LimitSize, err = parseSize(limit); err != nil {
				return fmt.Errorf("--limit: %w", err)
			}
		case utils.MessageAge:
			if limitTime == "" {
				return errors.New("a message_age quota needs --limitTime (e.g. 1h)")
			}
			if q.LimitTime, err = parseSeconds(limitTime); err != nil {
				return fmt.Errorf("--limitTime: %w", err)
			}
		}
		return c.Namespaces().SetBacklogQuotaWithContext(ctx, args[0], q, qt)
	})
	f := cmd.Flags()
	f.StringVarP(&limit, "limit", "l", "", "size limit for destination_storage: bytes, or a number with k, M, G or T")
	f.StringVar(&limitTime, "limitTime", "", "age limit for message_age: seconds, or a number with s, m, h, d or w")
	f.StringVarP(&policy, "policy", "p", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
	f.StringVarP(&typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")
	return cmd
}

func (a *adminCLI) getBacklogQuotaCommand() *cobra.Command {
	cmd := a.verb("get-backlog-quota NAMESPACE", "Show a namespace's backlog quotas", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		m, err := c.Namespaces().GetBacklogQuotaMapWithContext(ctx, args[0])
		if err != nil {
			return err
		}
		if m == nil {
			m = map[utils.BacklogQuotaType]utils.BacklogQuota{}
		}
		types := make([]string, 0, len(m))
		for t := range m {
			types = append(types, string(t))
		}
		sort.Strings(types)
		rows := make([][]string, 0, len(types))
		for _, t := range types {
			q := m[utils.BacklogQuotaType(t)]
			rows = append(rows, []string{t, strconv.FormatInt(q.LimitSize, 10), strconv.FormatInt(q.LimitTime, 10), string(q.Policy)})
		}
		return p.table(m, []string{"TYPE", "LIMIT SIZE (BYTES)", "LIMIT TIME (SECONDS)", "POLICY"}, rows)
	})
	cmd.Aliases = []string{"get-backlog-quotas"}
	return cmd
}

func (a *adminCLI) removeBacklogQuotaCommand() *cobra.Command {
	return a.verb("remove-backlog-quota NAMESPACE", "Remove a namespace's backlog quota", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Namespaces().RemoveBacklogQuotaWithContext(ctx, args[0])
	})
}

func (a *adminCLI) setAutoTopicCreationCommand() *cobra.Command {
	var (
		enable     bool
		typ        string
		partitions int
	)
	cmd := a.verb("set-auto-topic-creation NAMESPACE", "Allow (--enable) or forbid (no --enable) creating topics on first use", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		tt, err := utils.ParseTopicType(typ)
		if err != nil {
			return fmt.Errorf("--type: %w", err)
		}
		cfg := utils.TopicAutoCreationConfig{Allow: enable, Type: tt}
		if tt == utils.Partitioned {
			if partitions <= 0 {
				return errors.New("--type partitioned needs --num-partitions of 1 or more")
			}
			cfg.Partitions = &partitions
		}
		return c.Namespaces().SetTopicAutoCreationWithContext(ctx, ns, cfg)
	})
	f := cmd.Flags()
	f.BoolVarP(&enable, "enable", "e", false, "allow auto-creation (without it, auto-creation is forbidden)")
	f.StringVarP(&typ, "type", "t", string(utils.NonPartitioned), "partitioned or non-partitioned")
	f.IntVarP(&partitions, "num-partitions", "n", 0, "partitions of an auto-created partitioned topic")
	return cmd
}

func (a *adminCLI) getAutoTopicCreationCommand() *cobra.Command {
	return a.verb("get-auto-topic-creation NAMESPACE", "Show a namespace's auto topic creation override", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		cfg, err := c.Namespaces().GetTopicAutoCreationWithContext(ctx, ns)
		if err != nil {
			return err
		}
		if cfg == nil {
			return p.scalar("unset (broker default)", nil)
		}
		parts := "-"
		if cfg.Partitions != nil {
			parts = strconv.Itoa(*cfg.Partitions)
		}
		return p.table(cfg, []string{"ALLOW", "TYPE", "PARTITIONS"},
			[][]string{{strconv.FormatBool(cfg.Allow), orDash(string(cfg.Type)), parts}})
	})
}

func (a *adminCLI) removeAutoTopicCreationCommand() *cobra.Command {
	return a.verb("remove-auto-topic-creation NAMESPACE", "Remove the namespace's override (the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		return c.Namespaces().RemoveTopicAutoCreationWithContext(ctx, ns)
	})
}
