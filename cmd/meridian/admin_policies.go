package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	padmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The policy verbs of `meridian admin`, with pulsar-admin's names and
// flags: retention, message TTL, deduplication, backlog quota and auto
// topic creation, set, shown and removed per namespace.

// retentionFlags are set-retention's flags, of a namespace or a topic.
type retentionFlags struct{ size, time string }

func (f *retentionFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.size, "size", "s", "", "size limit: bytes, or a number with k, M, G or T (e.g. 10G); -1 for unlimited")
	cmd.Flags().StringVarP(&f.time, "time", "t", "", "time limit: seconds, or a number with s, m, h, d, w or y (e.g. 3d); -1 for unlimited")
}

// policy is the retention the flags give, as pulsar-admin computes it.
func (f *retentionFlags) policy() (utils.RetentionPolicies, error) {
	if f.size == "" || f.time == "" {
		return utils.RetentionPolicies{}, errors.New("give both --size and --time (-1 means unlimited, 0 no retention)")
	}
	bytes, err := parseSize(f.size)
	if err != nil {
		return utils.RetentionPolicies{}, fmt.Errorf("--size: %w", err)
	}
	secs, err := parseSeconds(f.time)
	if err != nil {
		return utils.RetentionPolicies{}, fmt.Errorf("--time: %w", err)
	}
	pol := utils.RetentionPolicies{RetentionSizeInMB: -1, RetentionTimeInMinutes: -1}
	if bytes >= 0 {
		pol.RetentionSizeInMB = bytes / (1 << 20)
	}
	if secs >= 0 {
		pol.RetentionTimeInMinutes = int(secs / 60)
	}
	return pol, nil
}

func (a *adminCLI) retentionCommands() [2]*cobra.Command {
	var f retentionFlags
	set := a.verb("set-retention NAMESPACE", "Set how long and how much acknowledged data is kept", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		pol, err := f.policy()
		if err != nil {
			return err
		}
		return c.Namespaces().SetRetentionWithContext(ctx, args[0], pol)
	})
	f.register(set)
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
		secs, err := ttlSeconds("--messageTTL", ttl)
		if err != nil {
			return err
		}
		return c.Namespaces().SetNamespaceMessageTTLWithContext(ctx, args[0], secs)
	})
	cmd.Flags().StringVar(&ttl, "messageTTL", "", "time to live: seconds, or a number with s, m, h, d or w; 0 disables")
	cmd.Flags().StringVar(&ttl, "ttl", "", "same as --messageTTL")
	withShorthand(cmd.Flags(), "messageTTL", "ttl")
	return cmd
}

// ttlSeconds parses a message TTL given with flag: seconds, or a time
// such as 1h; 0 means messages never expire.
func ttlSeconds(flag, ttl string) (int, error) {
	if ttl == "" {
		return 0, fmt.Errorf("give %s (seconds, or e.g. 1h; 0 means never)", flag)
	}
	secs, err := parseSeconds(ttl)
	if err != nil || secs < 0 || secs > math.MaxInt32 {
		return 0, fmt.Errorf("%s %q: want 0 or more seconds (e.g. 3600 or 1h)", flag, ttl)
	}
	return int(secs), nil
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

// switchFlags are pulsar-admin's --enable/-e and --disable/-d: exactly
// one must be given.
type switchFlags struct{ enable, disable bool }

func (f *switchFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVarP(&f.enable, "enable", "e", false, "enable "+what)
	cmd.Flags().BoolVarP(&f.disable, "disable", "d", false, "disable "+what)
}

// on reports whether --enable was given, and fails unless exactly one was.
func (f *switchFlags) on() (bool, error) {
	if f.enable == f.disable {
		return false, errors.New("give exactly one of --enable and --disable")
	}
	return f.enable, nil
}

func (a *adminCLI) setDedupCommand() *cobra.Command {
	var f switchFlags
	cmd := a.verb("set-deduplication NAMESPACE", "Turn message deduplication on (--enable) or off (--disable)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		on, err := f.on()
		if err != nil {
			return err
		}
		return c.Namespaces().SetDeduplicationStatusWithContext(ctx, args[0], on)
	})
	f.register(cmd, "deduplication")
	return cmd
}

func (a *adminCLI) getDedupCommand() *cobra.Command {
	return a.verb("get-deduplication NAMESPACE", "Show whether deduplication is on (unset: the broker default applies)", 1, func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
		path, err := namespaceEndpointPath(args[0], "deduplication")
		if err != nil {
			return err
		}
		// pulsaradmin has no getter of its own.
		body, err := a.rawGet(ctx, path, nil)
		if err != nil {
			return err
		}
		var on *bool
		if b := bytes.TrimSpace(body); len(b) > 0 {
			if err := json.Unmarshal(b, &on); err != nil {
				return fmt.Errorf("the server's answer is not a deduplication switch: %w", err)
			}
		}
		if on == nil {
			return p.scalar("unset (broker default)", nil)
		}
		return p.scalar(strconv.FormatBool(*on), *on)
	})
}

// backlogQuotaFlags are set-backlog-quota's flags, of a namespace or a
// topic.
type backlogQuotaFlags struct{ limit, limitTime, policy, typ string }

func (f *backlogQuotaFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.limit, "limit", "l", "", "size limit for destination_storage: bytes, or a number with k, M, G or T")
	fs.StringVar(&f.limitTime, "limitTime", "", "age limit for message_age: seconds, or a number with s, m, h, d or w")
	withShorthand(fs, "limitTime", "lt")
	fs.StringVarP(&f.policy, "policy", "p", "", "producer_request_hold, producer_exception or consumer_backlog_eviction (required)")
	fs.StringVarP(&f.typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")
}

// quota is the quota the flags give, and its type.
func (f *backlogQuotaFlags) quota() (utils.BacklogQuota, utils.BacklogQuotaType, error) {
	qt, err := utils.ParseBacklogQuotaType(f.typ)
	if err != nil {
		return utils.BacklogQuota{}, "", fmt.Errorf("--type: %w", err)
	}
	pol, err := utils.ParseRetentionPolicy(f.policy)
	if err != nil {
		return utils.BacklogQuota{}, "", fmt.Errorf("--policy %q: want producer_request_hold, producer_exception or consumer_backlog_eviction", f.policy)
	}
	q := utils.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: pol}
	switch qt {
	case utils.DestinationStorage:
		if f.limit == "" {
			return utils.BacklogQuota{}, "", errors.New("a destination_storage quota needs --limit (e.g. 10G)")
		}
		if q.LimitSize, err = parseSize(f.limit); err != nil {
			return utils.BacklogQuota{}, "", fmt.Errorf("--limit: %w", err)
		}
	case utils.MessageAge:
		if f.limitTime == "" {
			return utils.BacklogQuota{}, "", errors.New("a message_age quota needs --limitTime (-lt, e.g. 1h)")
		}
		if q.LimitTime, err = parseSeconds(f.limitTime); err != nil {
			return utils.BacklogQuota{}, "", fmt.Errorf("--limitTime: %w", err)
		}
	}
	return q, qt, nil
}

func (a *adminCLI) setBacklogQuotaCommand() *cobra.Command {
	var f backlogQuotaFlags
	cmd := a.verb("set-backlog-quota NAMESPACE", "Limit a namespace's backlog per topic, and say what happens past it", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		q, qt, err := f.quota()
		if err != nil {
			return err
		}
		return c.Namespaces().SetBacklogQuotaWithContext(ctx, args[0], q, qt)
	})
	f.register(cmd)
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

func (a *adminCLI) removeTTLCommand() *cobra.Command {
	return a.verb("remove-message-ttl NAMESPACE", "Remove a namespace's message TTL (the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		return c.Namespaces().RemoveNamespaceMessageTTLWithContext(ctx, args[0])
	})
}

// removeNamespacePolicyCommand is remove-<name>, which DELETEs a
// namespace policy's endpoint: the request pulsar-admin sends, for the
// policies pulsaradmin has no remove call for.
func (a *adminCLI) removeNamespacePolicyCommand(name, endpoint, what string) *cobra.Command {
	return a.verb("remove-"+name+" NAMESPACE", "Remove a namespace's "+what+" (the broker default applies)", 1, func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
		path, err := namespaceEndpointPath(args[0], endpoint)
		if err != nil {
			return err
		}
		return a.restDelete(ctx, path)
	})
}

// The namespace policies that are one number, with pulsar-admin's verbs
// (set-<name>, get-<name>, remove-<name>) and flags. A get prints the
// server's answer: nothing set is "null". Where pulsaradmin has no call for
// a policy (set and remove nil), the verbs send the requests pulsar-admin
// sends.
var intNamespacePolicies = []struct {
	name, endpoint, what, flag, short string
	set                               func(padminNamespaces) func(context.Context, utils.NameSpaceName, int) error
	remove                            func(padminNamespaces) func(context.Context, utils.NameSpaceName) error
}{
	{"max-topics-per-namespace", "maxTopicsPerNamespace", "maximum number of topics", "max-topics-per-namespace", "t",
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName, int) error {
			return c.SetMaxTopicsPerNamespaceWithContext
		},
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName) error {
			return c.RemoveMaxTopicsPerNamespaceWithContext
		}},
	{"max-producers-per-topic", "maxProducersPerTopic", "maximum number of producers per topic", "max-producers-per-topic", "p",
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName, int) error {
			return c.SetMaxProducersPerTopicWithContext
		},
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName) error {
			return c.RemoveMaxProducersPerTopicWithContext
		}},
	{"max-consumers-per-topic", "maxConsumersPerTopic", "maximum number of consumers per topic", "max-consumers-per-topic", "c",
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName, int) error {
			return c.SetMaxConsumersPerTopicWithContext
		},
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName) error {
			return c.RemoveMaxConsumersPerTopicWithContext
		}},
	{"max-consumers-per-subscription", "maxConsumersPerSubscription", "maximum number of consumers per subscription", "max-consumers-per-subscription", "c",
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName, int) error {
			return c.SetMaxConsumersPerSubscriptionWithContext
		},
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName) error {
			return c.RemoveMaxConsumersPerSubscriptionWithContext
		}},
	{"subscription-expiration-time", "subscriptionExpirationTime", "subscription expiration time, in minutes", "time", "t",
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName, int) error {
			return c.SetSubscriptionExpirationTimeWithContext
		},
		func(c padminNamespaces) func(context.Context, utils.NameSpaceName) error {
			return c.RemoveSubscriptionExpirationTimeWithContext
		}},
	{"max-unacked-messages-per-consumer", "maxUnackedMessagesPerConsumer", "maximum of unacknowledged messages per consumer",
		"max-unacked-messages-per-topic", "c", nil, nil},
	{"max-unacked-messages-per-subscription", "maxUnackedMessagesPerSubscription", "maximum of unacknowledged messages per subscription",
		"max-unacked-messages-per-subscription", "c", nil, nil},
}

// padminNamespaces is pulsaradmin's client of namespaces.
type padminNamespaces = padmin.Namespaces

// getNamespacePolicyCommand is get-<name>: the policy's endpoint as the
// server answers it.
func (a *adminCLI) getNamespacePolicyCommand(name, endpoint, what string) *cobra.Command {
	return a.verb("get-"+name+" NAMESPACE", "Show a namespace's "+what+" (null: none set)", 1, func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
		body, err := a.namespacePolicy(ctx, args[0], endpoint)
		if err != nil {
			return err
		}
		return p.raw(body)
	})
}

// namespacePolicy is the server's answer to a GET of a namespace policy's
// endpoint: its JSON, or null when none is set.
func (a *adminCLI) namespacePolicy(ctx context.Context, ns, endpoint string) ([]byte, error) {
	path, err := namespaceEndpointPath(ns, endpoint)
	if err != nil {
		return nil, err
	}
	body, err := a.rawGet(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 { // 204: none set
		return []byte("null"), nil
	}
	return body, nil
}

func (a *adminCLI) intNamespacePolicyCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, pol := range intNamespacePolicies {
		var n int
		set := a.verb("set-"+pol.name+" NAMESPACE", "Set a namespace's "+pol.what, 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			if n < 0 {
				return fmt.Errorf("--%s %d: want 0 or more", pol.flag, n)
			}
			if pol.set == nil {
				path, err := namespaceEndpointPath(args[0], pol.endpoint)
				if err != nil {
					return err
				}
				rc, err := a.restClient()
				if err != nil {
					return err
				}
				return rc.PostWithContext(ctx, path, n)
			}
			return pol.set(c.Namespaces())(ctx, ns, n)
		})
		set.Flags().IntVarP(&n, pol.flag, pol.short, -1, "the "+pol.what+" (required)")
		if pol.remove == nil {
			cmds = append(cmds, set, a.getNamespacePolicyCommand(pol.name, pol.endpoint, pol.what),
				a.removeNamespacePolicyCommand(pol.name, pol.endpoint, pol.what))
			continue
		}
		remove := a.verb("remove-"+pol.name+" NAMESPACE", "Remove a namespace's "+pol.what+" (the broker default applies)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			return pol.remove(c.Namespaces())(ctx, ns)
		})
		cmds = append(cmds, set, a.getNamespacePolicyCommand(pol.name, pol.endpoint, pol.what), remove)
	}
	return cmds
}

func (a *adminCLI) namespaceAutoSubscriptionCreationCommands() []*cobra.Command {
	var f switchFlags
	set := a.verb("set-auto-subscription-creation NAMESPACE", "Allow (--enable) or forbid (--disable) creating subscriptions on first use", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			on, err := f.on()
			if err != nil {
				return err
			}
			path, err := namespaceEndpointPath(args[0], "autoSubscriptionCreation")
			if err != nil {
				return err
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			// pulsaradmin has no call for it.
			return rc.PostWithContext(ctx, path, utils.AutoSubscriptionCreationOverride{AllowAutoSubscriptionCreation: on})
		})
	f.register(set, "auto subscription creation")
	return []*cobra.Command{set,
		a.getNamespacePolicyCommand("auto-subscription-creation", "autoSubscriptionCreation", "auto subscription creation override"),
		a.removeNamespacePolicyCommand("auto-subscription-creation", "autoSubscriptionCreation", "auto subscription creation override")}
}

// namespaceSchemaValidationCommands are pulsar-admin's
// set-schema-validation-enforce and get-schema-validation-enforce: whether
// a producer without a schema is refused on the namespace's topics that
// have one. pulsar-admin has no remove verb; remove-schema-validation-enforce
// sends the DELETE the server serves, after which the broker's
// isSchemaValidationEnforced applies.
func (a *adminCLI) namespaceSchemaValidationCommands() []*cobra.Command {
	const name, endpoint, what = "schema-validation-enforce", "schemaValidationEnforced", "schema validation switch"
	var f switchFlags
	set := a.verb("set-"+name+" NAMESPACE", "Refuse (--enable) or allow (--disable) producers without a schema on topics that have one", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			on, err := f.on()
			if err != nil {
				return err
			}
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			return c.Namespaces().SetSchemaValidationEnforcedWithContext(ctx, ns, on)
		})
	f.register(set, "schema validation")
	return []*cobra.Command{set, a.getNamespacePolicyCommand(name, endpoint, what), a.removeNamespacePolicyCommand(name, endpoint, what)}
}

// A namespace's properties: metadata kept with it.
func (a *adminCLI) namespacePropertiesCommands() []*cobra.Command {
	var pairs []string
	set := a.verb("set-properties NAMESPACE", "Add or change properties of a namespace (the others are kept)", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		props, err := propertiesArg("--properties", pairs)
		if err != nil {
			return err
		}
		return c.Namespaces().UpdatePropertiesWithContext(ctx, ns, props)
	})
	set.Flags().StringSliceVarP(&pairs, "properties", "p", nil, "key=value (repeat -p, or separate them with commas)")
	get := a.verb("get-properties NAMESPACE", "Show a namespace's properties", 1, func(ctx context.Context, c pulsaradmin.Client, p *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		props, err := c.Namespaces().GetPropertiesWithContext(ctx, ns)
		if err != nil {
			return err
		}
		return p.settings(props)
	})
	clear := a.verb("clear-properties NAMESPACE", "Remove every property of a namespace", 1, func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
		ns, err := namespaceArg(args[0])
		if err != nil {
			return err
		}
		return c.Namespaces().RemovePropertiesWithContext(ctx, ns)
	})
	return []*cobra.Command{set, get, clear}
}

// A namespace's offload thresholds and deletion lag, with pulsar-admin's
// verbs. Meridian stores them and offloads nothing (the server says so in
// a Warning, which meridian admin prints).
func (a *adminCLI) namespaceOffloadCommands() []*cobra.Command {
	var size, age string
	set := a.verb("set-offload-threshold NAMESPACE", "Set how much (--size) or how old (--time) a topic's data is before it is offloaded", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			if size == "" && age == "" {
				return errors.New("give --size (-s) or --time (-t), or both")
			}
			if size != "" {
				bytes, err := parseSize(size)
				if err != nil {
					return fmt.Errorf("--size: %w", err)
				}
				if err := c.Namespaces().SetOffloadThresholdWithContext(ctx, ns, bytes); err != nil {
					return err
				}
			}
			if age == "" {
				return nil
			}
			secs, err := parseSeconds(age)
			if err != nil {
				return fmt.Errorf("--time: %w", err)
			}
			return c.Namespaces().SetOffloadThresholdInSecondsWithContext(ctx, ns, secs)
		})
	set.Flags().StringVarP(&size, "size", "s", "", "bytes kept in the bookies before offloading: bytes, or a number with k, M, G or T; -1: the broker's")
	set.Flags().StringVarP(&age, "time", "t", "", "age of data before offloading: seconds, or a number with s, m, h, d or w; -1: the broker's")
	get := a.verb("get-offload-threshold NAMESPACE", "Show a namespace's offload thresholds: size in bytes and time in seconds (null: none set)", 1,
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, args []string) error {
			out := map[string]json.RawMessage{}
			for key, endpoint := range map[string]string{"size": "offloadThreshold", "time": "offloadThresholdInSeconds"} {
				body, err := a.namespacePolicy(ctx, args[0], endpoint)
				if err != nil {
					return err
				}
				out[key] = body
			}
			return p.object(out)
		})
	remove := a.verb("remove-offload-threshold NAMESPACE", "Remove a namespace's offload thresholds, size and time (the broker's apply)", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			for _, endpoint := range []string{"offloadThreshold", "offloadThresholdInSeconds"} {
				path, err := namespaceEndpointPath(args[0], endpoint)
				if err != nil {
					return err
				}
				if err := a.restDelete(ctx, path); err != nil {
					return err
				}
			}
			return nil
		})
	var lag string
	setLag := a.verb("set-offload-deletion-lag NAMESPACE", "Set how long offloaded data stays in the bookies", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			d, err := parseRelativeTime(lag)
			if err != nil {
				return fmt.Errorf("--lag %q: want a time such as 10m or 1h", lag)
			}
			return c.Namespaces().SetOffloadDeleteLagWithContext(ctx, ns, d.Milliseconds())
		})
	setLag.Flags().StringVarP(&lag, "lag", "l", "", "the lag, e.g. 10m or 1h (required)")
	clearLag := a.verb("clear-offload-deletion-lag NAMESPACE", "Remove a namespace's offload deletion lag (the broker's applies)", 1,
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, args []string) error {
			ns, err := namespaceArg(args[0])
			if err != nil {
				return err
			}
			return c.Namespaces().ClearOffloadDeleteLagWithContext(ctx, ns)
		})
	return []*cobra.Command{set, get, remove, setLag,
		a.getNamespacePolicyCommand("offload-deletion-lag", "offloadDeletionLagMs", "offload deletion lag, in milliseconds"), clearLag}
}

// A namespace's bookie affinity groups: the bookie groups its ledgers
// prefer, as pulsar-admin's set-, get- and delete-bookie-affinity-group.
func (a *adminCLI) bookieAffinityCommands() []*cobra.Command {
	const endpoint = "persistence/bookieAffinity"
	var group utils.BookieAffinityGroupData
	set := a.verb("set-bookie-affinity-group NAMESPACE", "Set the bookie groups a namespace's ledgers prefer", 1,
		func(ctx context.Context, _ pulsaradmin.Client, _ *printer, args []string) error {
			path, err := namespaceEndpointPath(args[0], endpoint)
			if err != nil {
				return err
			}
			if group.BookkeeperAffinityGroupPrimary == "" {
				return errors.New("give --primary-group (-pg)")
			}
			rc, err := a.restClient()
			if err != nil {
				return err
			}
			// pulsaradmin has no call for it.
			return rc.PostWithContext(ctx, path, group)
		})
	set.Flags().StringVar(&group.BookkeeperAffinityGroupPrimary, "primary-group", "", "the primary bookie group (required)")
	set.Flags().StringVar(&group.BookkeeperAffinityGroupSecondary, "secondary-group", "", "the secondary bookie group")
	withShorthand(set.Flags(), "primary-group", "pg")
	withShorthand(set.Flags(), "secondary-group", "sg")
	del := a.removeNamespacePolicyCommand("bookie-affinity-group", endpoint, "bookie affinity groups")
	del.Use = "delete-bookie-affinity-group NAMESPACE"
	return []*cobra.Command{set, a.getNamespacePolicyCommand("bookie-affinity-group", endpoint, "bookie affinity groups"), del}
}
