package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin"
	padmin "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"github.com/spf13/cobra"
)

// The policies of one topic, over its namespace's, with pulsar-admin's
// verbs on `topics` (set-<policy>, get-<policy>, remove-<policy>) and
// flags. A get prints the policy as the server answers it: null when the
// topic has none of its own, and with --applied (-ap) the one in effect,
// the topic's or else its namespace's or the broker's. (pulsaradmin's typed
// getters print an unset policy as zero, and take no applied flag for most
// policies.) Setting and removing go through pulsaradmin.

// topicPolicy is one topic policy: its verbs' name (set-<name>...), its
// endpoint below the topic, what it is (for help texts), and the calls
// that remove it.
type topicPolicy struct {
	name, endpoint, what string
	remove               func(context.Context, padminTopics, utils.TopicName) error
}

// commands are the policy's get and remove verbs, after set.
func (a *adminCLI) topicPolicyCommands(pol topicPolicy, set *cobra.Command) []*cobra.Command {
	var applied bool
	get := a.topicVerb("get-"+pol.name+" TOPIC", "Show a topic's "+pol.what+" (null: none of its own; --applied: the one in effect)",
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
			body, err := a.rawGet(ctx, topicPath(t, pol.endpoint), map[string]string{"applied": strconv.FormatBool(applied)})
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(body)) == 0 {
				body = []byte("null")
			}
			return p.raw(body)
		})
	get.Flags().BoolVar(&applied, "applied", false, "show the policy in effect: the topic's, or else its namespace's or the broker's")
	withShorthand(get.Flags(), "applied", "ap")
	remove := a.topicVerb("remove-"+pol.name+" TOPIC", "Remove a topic's "+pol.what+" (its namespace's applies)",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			return pol.remove(ctx, c.Topics(), t)
		})
	return []*cobra.Command{set, get, remove}
}

// topicSetVerb is a policy's set-<name> verb.
func (a *adminCLI) topicSetVerb(pol topicPolicy, fn func(ctx context.Context, c padminTopics, t utils.TopicName) error) *cobra.Command {
	return a.topicVerb("set-"+pol.name+" TOPIC", "Set a topic's "+pol.what+", over its namespace's",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			return fn(ctx, c.Topics(), t)
		})
}

// intTopicPolicies are the topic policies that are one number, each set
// with one flag (pulsar-admin's name and short form).
var intTopicPolicies = []struct {
	topicPolicy
	flag, short string
	set         func(padminTopics) func(context.Context, utils.TopicName, int) error
}{
	{topicPolicy{"max-producers", "maxProducers", "maximum number of producers",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxProducersWithContext(ctx, t)
		}},
		"max-producers", "p", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxProducersWithContext
		}},
	{topicPolicy{"max-consumers", "maxConsumers", "maximum number of consumers",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxConsumersWithContext(ctx, t)
		}},
		"max-consumers", "c", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxConsumersWithContext
		}},
	{topicPolicy{"max-consumers-per-subscription", "maxConsumersPerSubscription", "maximum number of consumers per subscription",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxConsumersPerSubscriptionWithContext(ctx, t)
		}},
		"max-consumers-per-subscription", "c", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxConsumersPerSubscriptionWithContext
		}},
	{topicPolicy{"max-subscriptions", "maxSubscriptionsPerTopic", "maximum number of subscriptions",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxSubscriptionsPerTopicWithContext(ctx, t)
		}},
		"max-subscriptions-per-topic", "m", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxSubscriptionsPerTopicWithContext
		}},
	{topicPolicy{"max-unacked-messages-per-consumer", "maxUnackedMessagesOnConsumer", "maximum of unacknowledged messages per consumer",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxUnackMessagesPerConsumerWithContext(ctx, t)
		}},
		"maxNum", "m", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxUnackMessagesPerConsumerWithContext
		}},
	{topicPolicy{"max-unacked-messages-per-subscription", "maxUnackedMessagesOnSubscription", "maximum of unacknowledged messages per subscription",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxUnackMessagesPerSubscriptionWithContext(ctx, t)
		}},
		"maxNum", "m", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxUnackMessagesPerSubscriptionWithContext
		}},
	{topicPolicy{"max-message-size", "maxMessageSize", "largest message, in bytes",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMaxMessageSizeWithContext(ctx, t)
		}},
		"max-message-size", "m", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetMaxMessageSizeWithContext
		}},
	{topicPolicy{"deduplication-snapshot-interval", "deduplicationSnapshotInterval", "deduplication snapshot interval, in seconds",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveDeduplicationSnapshotIntervalWithContext(ctx, t)
		}},
		"interval", "i", func(c padminTopics) func(context.Context, utils.TopicName, int) error {
			return c.SetDeduplicationSnapshotIntervalWithContext
		}},
}

func (a *adminCLI) intTopicPolicyCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, pol := range intTopicPolicies {
		var n int
		set := a.topicSetVerb(pol.topicPolicy, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			if n < 0 {
				return fmt.Errorf("--%s %d: want 0 or more", pol.flag, n)
			}
			return pol.set(c)(ctx, t, n)
		})
		set.Flags().IntVarP(&n, pol.flag, pol.short, -1, "the "+pol.what+" (required)")
		cmds = append(cmds, a.topicPolicyCommands(pol.topicPolicy, set)...)
	}
	return cmds
}

func (a *adminCLI) topicRetentionCommands() []*cobra.Command {
	pol := topicPolicy{"retention", "retention", "retention",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveRetentionWithContext(ctx, t)
		}}
	var f retentionFlags
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		r, err := f.policy()
		if err != nil {
			return err
		}
		return c.SetRetentionWithContext(ctx, t, r)
	})
	f.register(set)
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicTTLCommands() []*cobra.Command {
	pol := topicPolicy{"message-ttl", "messageTTL", "message TTL, in seconds",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveMessageTTLWithContext(ctx, t)
		}}
	var ttl string
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		secs, err := ttlSeconds("--ttl", ttl)
		if err != nil {
			return err
		}
		return c.SetMessageTTLWithContext(ctx, t, secs)
	})
	set.Flags().StringVarP(&ttl, "ttl", "t", "", "time to live: seconds, or a number with s, m, h, d or w; 0 disables (required)")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicDedupCommands() []*cobra.Command {
	pol := topicPolicy{"deduplication", "deduplicationEnabled", "deduplication switch",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveDeduplicationStatusWithContext(ctx, t)
		}}
	var f switchFlags
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		on, err := f.on()
		if err != nil {
			return err
		}
		return c.SetDeduplicationStatusWithContext(ctx, t, on)
	})
	f.register(set, "deduplication")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicBacklogQuotaCommands() []*cobra.Command {
	var f backlogQuotaFlags
	set := a.topicVerb("set-backlog-quota TOPIC", "Limit a topic's backlog, and say what happens past it, over its namespace's quota",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			q, qt, err := f.quota()
			if err != nil {
				return err
			}
			return c.Topics().SetBacklogQuotaWithContext(ctx, t, q, qt)
		})
	f.register(set)
	var applied bool
	get := a.topicVerb("get-backlog-quotas TOPIC", "Show a topic's backlog quotas (--applied: the ones in effect)",
		func(ctx context.Context, _ pulsaradmin.Client, p *printer, t utils.TopicName) error {
			body, err := a.rawGet(ctx, topicPath(t, "backlogQuotaMap"), map[string]string{"applied": strconv.FormatBool(applied)})
			if err != nil {
				return err
			}
			return p.raw(body)
		})
	get.Flags().BoolVar(&applied, "applied", false, "show the quotas in effect: the topic's, or else its namespace's")
	withShorthand(get.Flags(), "applied", "ap")
	var typ string
	remove := a.topicVerb("remove-backlog-quota TOPIC", "Remove one of a topic's backlog quotas (its namespace's applies)",
		func(ctx context.Context, c pulsaradmin.Client, _ *printer, t utils.TopicName) error {
			qt, err := utils.ParseBacklogQuotaType(typ)
			if err != nil {
				return fmt.Errorf("--type: %w", err)
			}
			return c.Topics().RemoveBacklogQuotaWithContext(ctx, t, qt)
		})
	remove.Flags().StringVarP(&typ, "type", "t", string(utils.DestinationStorage), "destination_storage or message_age")
	return []*cobra.Command{set, get, remove}
}

// topicDispatchRateFlags are the flags of a topic's dispatch rates:
// set-replicator-dispatch-rate's, and -rp (--relative-to-publish-rate).
type topicDispatchRateFlags struct {
	dispatchRateFlags
	relative bool
}

func (f *topicDispatchRateFlags) register(cmd *cobra.Command) {
	f.dispatchRateFlags.register(cmd)
	cmd.Flags().BoolVar(&f.relative, "relative-to-publish-rate", false, "the rate is relative to the publish rate")
	withShorthand(cmd.Flags(), "relative-to-publish-rate", "rp")
}

func (f *topicDispatchRateFlags) rate() (utils.DispatchRateData, error) {
	if err := f.check(); err != nil {
		return utils.DispatchRateData{}, err
	}
	return utils.DispatchRateData{DispatchThrottlingRateInMsg: f.msgs, DispatchThrottlingRateInByte: f.bytes,
		RatePeriodInSecond: int64(f.period), RelativeToPublishRate: f.relative}, nil
}

func (a *adminCLI) topicDispatchRateCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, r := range []struct {
		pol topicPolicy
		set func(padminTopics) func(context.Context, utils.TopicName, utils.DispatchRateData) error
	}{
		{topicPolicy{"dispatch-rate", "dispatchRate", "dispatch rate to its consumers",
			func(ctx context.Context, c padminTopics, t utils.TopicName) error {
				return c.RemoveDispatchRateWithContext(ctx, t)
			}},
			func(c padminTopics) func(context.Context, utils.TopicName, utils.DispatchRateData) error {
				return c.SetDispatchRateWithContext
			}},
		{topicPolicy{"subscription-dispatch-rate", "subscriptionDispatchRate", "dispatch rate per subscription",
			func(ctx context.Context, c padminTopics, t utils.TopicName) error {
				return c.RemoveSubscriptionDispatchRateWithContext(ctx, t)
			}},
			func(c padminTopics) func(context.Context, utils.TopicName, utils.DispatchRateData) error {
				return c.SetSubscriptionDispatchRateWithContext
			}},
	} {
		var f topicDispatchRateFlags
		set := a.topicSetVerb(r.pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			rate, err := f.rate()
			if err != nil {
				return err
			}
			return r.set(c)(ctx, t, rate)
		})
		f.register(set)
		cmds = append(cmds, a.topicPolicyCommands(r.pol, set)...)
	}
	return cmds
}

func (a *adminCLI) topicPublishRateCommands() []*cobra.Command {
	pol := topicPolicy{"publish-rate", "publishRate", "publish rate",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemovePublishRateWithContext(ctx, t)
		}}
	var msgs, bytes int64
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		return c.SetPublishRateWithContext(ctx, t, utils.PublishRateData{PublishThrottlingRateInMsg: msgs, PublishThrottlingRateInByte: bytes})
	})
	set.Flags().Int64VarP(&msgs, "msg-publish-rate", "m", -1, "messages per second (-1: no limit)")
	set.Flags().Int64VarP(&bytes, "byte-publish-rate", "b", -1, "bytes per second (-1: no limit)")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicSubscribeRateCommands() []*cobra.Command {
	pol := topicPolicy{"subscribe-rate", "subscribeRate", "subscribe rate per consumer",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveSubscribeRateWithContext(ctx, t)
		}}
	var rate, period int
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		if period < 1 {
			return errors.New("--subscribe-rate-period must be 1 or more")
		}
		return c.SetSubscribeRateWithContext(ctx, t, utils.SubscribeRate{SubscribeThrottlingRatePerConsumer: rate, RatePeriodInSecond: period})
	})
	set.Flags().IntVar(&rate, "subscribe-rate", -1, "subscribes per consumer per period (-1: no limit)")
	set.Flags().IntVar(&period, "subscribe-rate-period", 30, "the period, in seconds")
	withShorthand(set.Flags(), "subscribe-rate", "sr")
	withShorthand(set.Flags(), "subscribe-rate-period", "st")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicPersistenceCommands() []*cobra.Command {
	pol := topicPolicy{"persistence", "persistence", "persistence (ensemble, write and ack quorums)",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemovePersistenceWithContext(ctx, t)
		}}
	var d utils.PersistenceData
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		if d.BookkeeperAckQuorum < 1 || d.BookkeeperWriteQuorum < d.BookkeeperAckQuorum || d.BookkeeperEnsemble < d.BookkeeperWriteQuorum {
			return fmt.Errorf("want ensemble >= write quorum >= ack quorum >= 1, got -e %d -w %d -a %d",
				d.BookkeeperEnsemble, d.BookkeeperWriteQuorum, d.BookkeeperAckQuorum)
		}
		return c.SetPersistenceWithContext(ctx, t, d)
	})
	f := set.Flags()
	f.Int64VarP(&d.BookkeeperEnsemble, "bookkeeper-ensemble", "e", 0, "bookies each ledger is striped over (E, required)")
	f.Int64VarP(&d.BookkeeperWriteQuorum, "bookkeeper-write-quorum", "w", 0, "copies written of each entry (Qw, required)")
	f.Int64VarP(&d.BookkeeperAckQuorum, "bookkeeper-ack-quorum", "a", 0, "copies acknowledged before an entry is (Qa, required)")
	f.Float64VarP(&d.ManagedLedgerMaxMarkDeleteRate, "ml-mark-delete-max-rate", "r", 0, "most writes of each cursor's mark-delete per second (0: the region's --cursor-persist-interval)")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicDelayedDeliveryCommands() []*cobra.Command {
	pol := topicPolicy{"delayed-delivery", "delayedDelivery", "delayed delivery policy",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveDelayedDeliveryWithContext(ctx, t)
		}}
	var (
		f    switchFlags
		tick string
	)
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		on, err := f.on()
		if err != nil {
			return err
		}
		d, err := parseRelativeTime(tick)
		if err != nil || d <= 0 {
			return fmt.Errorf("--time %q: want a tick such as 1s or 10s", tick)
		}
		return c.SetDelayedDeliveryWithContext(ctx, t, utils.DelayedDeliveryData{Active: on, TickTime: float64(d / time.Millisecond)})
	})
	f.register(set, "delayed delivery")
	set.Flags().StringVarP(&tick, "time", "t", "1s", "the tick: how often delayed messages are checked for delivery (e.g. 1s, 10s)")
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicOffloadCommands() []*cobra.Command {
	pol := topicPolicy{"offload-policies", "offloadPolicies", "offload policies",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveOffloadPoliciesWithContext(ctx, t)
		}}
	var (
		o         utils.OffloadPolicies
		threshold string
	)
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		if o.ManagedLedgerOffloadDriver == "" {
			return errors.New("give --driver (-d)")
		}
		n, err := parseSize(threshold)
		if err != nil {
			return fmt.Errorf("--offloadThresholdInBytes: %w", err)
		}
		o.ManagedLedgerOffloadThresholdInBytes = n
		return c.SetOffloadPoliciesWithContext(ctx, t, o)
	})
	f := set.Flags()
	f.StringVarP(&o.ManagedLedgerOffloadDriver, "driver", "d", "", "the offload driver, e.g. aws-s3 (required)")
	f.StringVarP(&o.S3ManagedLedgerOffloadRegion, "region", "r", "", "the offload region")
	f.StringVarP(&o.S3ManagedLedgerOffloadBucket, "bucket", "b", "", "the offload bucket")
	f.StringVarP(&o.S3ManagedLedgerOffloadServiceEndpoint, "endpoint", "e", "", "the offload service endpoint")
	f.StringVarP(&threshold, "offloadThresholdInBytes", "t", "-1", "offload once a topic holds this much: bytes, or a number with k, M, G or T (-1: never)")
	f.Int64Var(&o.ManagedLedgerOffloadDeletionLagInMillis, "offloadDeletionLagInMillis", 0, "how long offloaded data stays in the bookies, in ms")
	withShorthand(f, "offloadDeletionLagInMillis", "dl")
	return a.topicPolicyCommands(pol, set)
}

// topicCompactionCommands are pulsar-admin's compaction threshold verbs.
// Meridian stores the threshold and compacts nothing (the server says so in
// a Warning, which meridian admin prints).
func (a *adminCLI) topicCompactionCommands() []*cobra.Command {
	pol := topicPolicy{"compaction-threshold", "compactionThreshold", "compaction threshold, in bytes",
		func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			return c.RemoveCompactionThresholdWithContext(ctx, t)
		}}
	var threshold func() (int64, error)
	set := a.topicSetVerb(pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
		n, err := threshold()
		if err != nil {
			return err
		}
		return c.SetCompactionThresholdWithContext(ctx, t, n)
	})
	threshold = compactionThresholdFlag(set)
	return a.topicPolicyCommands(pol, set)
}

func (a *adminCLI) topicSwitchPolicyCommands() []*cobra.Command {
	var cmds []*cobra.Command
	for _, s := range []struct {
		pol topicPolicy
		set func(ctx context.Context, c padminTopics, t utils.TopicName, on bool) error
	}{
		{topicPolicy{"schema-validation-enforced", "schemaValidationEnforced", "schema validation switch",
			func(ctx context.Context, c padminTopics, t utils.TopicName) error {
				return c.RemoveSchemaValidationEnforcedWithContext(ctx, t)
			}},
			func(ctx context.Context, c padminTopics, t utils.TopicName, on bool) error {
				return c.SetSchemaValidationEnforcedWithContext(ctx, t, on)
			}},
		{topicPolicy{"auto-subscription-creation", "autoSubscriptionCreation", "auto subscription creation switch",
			func(ctx context.Context, c padminTopics, t utils.TopicName) error {
				return c.RemoveAutoSubscriptionCreationWithContext(ctx, t)
			}},
			func(ctx context.Context, c padminTopics, t utils.TopicName, on bool) error {
				return c.SetAutoSubscriptionCreationWithContext(ctx, t, utils.AutoSubscriptionCreationOverride{AllowAutoSubscriptionCreation: on})
			}},
	} {
		var f switchFlags
		set := a.topicSetVerb(s.pol, func(ctx context.Context, c padminTopics, t utils.TopicName) error {
			on, err := f.on()
			if err != nil {
				return err
			}
			return s.set(ctx, c, t, on)
		})
		f.register(set, s.pol.what)
		cmds = append(cmds, a.topicPolicyCommands(s.pol, set)...)
	}
	return cmds
}

// topicPolicyVerbs are all the verbs on topic policies.
func (a *adminCLI) topicPolicyVerbs() []*cobra.Command {
	var cmds []*cobra.Command
	for _, group := range [][]*cobra.Command{
		a.topicRetentionCommands(), a.topicTTLCommands(), a.topicDedupCommands(), a.topicBacklogQuotaCommands(),
		a.intTopicPolicyCommands(), a.topicDispatchRateCommands(), a.topicPublishRateCommands(),
		a.topicSubscribeRateCommands(), a.topicPersistenceCommands(), a.topicDelayedDeliveryCommands(),
		a.topicOffloadCommands(), a.topicCompactionCommands(), a.topicSwitchPolicyCommands(),
	} {
		cmds = append(cmds, group...)
	}
	return cmds
}

// padminTopics is pulsaradmin's client of topics and their policies.
type padminTopics = padmin.Topics
