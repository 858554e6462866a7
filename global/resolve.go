package global

import (
	"fmt"
	"maps"
	"slices"

	"github.com/meridian-mq/meridian/topology"
)

// BrokerDefaults are the broker-level settings a topic falls back to when
// neither its topic record nor its namespace sets a policy. The defaults are
// Pulsar's broker.conf defaults, so that an unconfigured namespace behaves
// as on Pulsar.
type BrokerDefaults struct {
	// RetentionTimeInMinutes and RetentionSizeInMB are Pulsar's
	// defaultRetentionTimeInMinutes / defaultRetentionSizeInMB: 0 and 0,
	// keep nothing once acknowledged.
	RetentionTimeInMinutes int
	RetentionSizeInMB      int64
	// MessageTTLInSeconds is ttlDurationDefaultInSeconds: 0, no expiry.
	MessageTTLInSeconds int
	// SubscriptionExpirationTimeMinutes is subscriptionExpirationTimeMinutes:
	// 0, subscriptions without consumers are kept for ever.
	SubscriptionExpirationTimeMinutes int
	// DeduplicationEnabled is brokerDeduplicationEnabled: false. Replication
	// relies on deduplication of its own producer regardless (DESIGN §6).
	DeduplicationEnabled bool
	// AllowAutoTopicCreation (true), AutoTopicCreationType
	// (non-partitioned) and DefaultNumPartitions (1) are
	// allowAutoTopicCreation, allowAutoTopicCreationType and
	// defaultNumPartitions.
	AllowAutoTopicCreation bool
	AutoTopicCreationType  TopicType
	DefaultNumPartitions   int
	// MaxNumPartitions is maxNumPartitionsPerPartitionedTopic: the most
	// partitions a partitioned topic may have, at creation, at update, and
	// when auto-created (0: no bound). Pulsar's default is 0; Meridian's
	// is DefaultMaxNumPartitions, because a partitioned topic's clients
	// load every partition at once (pulsar-client-go's producers and
	// consumers attach to each), at about 325 KB and ten goroutines a
	// loaded topic: 1000 partitions cost about 325 MB on a region of one
	// broker, which a broker of a few GB holds, and are as many topics as
	// one bundle may hold before it is split
	// (loadBalancerNamespaceBundleMaxTopics). DefaultNumPartitions may not
	// exceed it.
	MaxNumPartitions int
	// MaxProducersPerTopic, MaxConsumersPerTopic and
	// MaxConsumersPerSubscription are maxProducersPerTopic,
	// maxConsumersPerTopic and maxConsumersPerSubscription: the limits of a
	// topic whose topic and namespace policies set none. 0, Pulsar's
	// default, is no limit; a connection's producers and consumers are
	// bounded whatever they say (broker.Config.MaxProducersPerConnection).
	MaxProducersPerTopic        int
	MaxConsumersPerTopic        int
	MaxConsumersPerSubscription int
	// AllowAutoSubscriptionCreation is allowAutoSubscriptionCreation
	// (true): a consumer may subscribe under a durable subscription that
	// does not exist yet, which creates it.
	AllowAutoSubscriptionCreation bool
	// BacklogQuotaLimitBytes and BacklogQuotaLimitSeconds are
	// backlogQuotaDefaultLimitBytes and backlogQuotaDefaultLimitSecond: -1,
	// no limit; BacklogQuotaPolicy is backlogQuotaDefaultRetentionPolicy,
	// producer_request_hold.
	BacklogQuotaLimitBytes   int64
	BacklogQuotaLimitSeconds int64
	BacklogQuotaPolicy       BacklogPolicy
	// SchemaCompatibilityStrategy is schemaCompatibilityStrategy: FULL.
	SchemaCompatibilityStrategy SchemaCompatibilityStrategy
	// SchemaValidationEnforced is isSchemaValidationEnforced (false): a
	// producer without a schema is refused on a topic that has one.
	SchemaValidationEnforced bool
	// SubscribeRate is subscribeThrottlingRatePerConsumer (0: none) per
	// subscribeRatePeriodPerConsumerInSecond (30): each consumer's
	// subscribe rate on a topic whose topic and namespace policies set
	// none.
	SubscribeRate SubscribeRate
	// MaxTopicsPerNamespace is maxTopicsPerNamespace: the most topics a
	// namespace whose policy sets none may hold, a partitioned topic
	// counting its partitions; 0, Pulsar's default, is no limit.
	MaxTopicsPerNamespace int
}

// DefaultMaxNumPartitions is BrokerDefaults.MaxNumPartitions' default.
const DefaultMaxNumPartitions = 1000

// DefaultBrokerDefaults returns Pulsar's defaults, as documented on
// BrokerDefaults, but for MaxNumPartitions.
func DefaultBrokerDefaults() BrokerDefaults {
	return BrokerDefaults{
		AllowAutoTopicCreation:        true,
		AllowAutoSubscriptionCreation: true,
		AutoTopicCreationType:         NonPartitioned,
		DefaultNumPartitions:          1,
		MaxNumPartitions:              DefaultMaxNumPartitions,
		BacklogQuotaLimitBytes:        -1,
		BacklogQuotaLimitSeconds:      -1,
		BacklogQuotaPolicy:            ProducerRequestHold,
		SchemaCompatibilityStrategy:   SchemaFull,
		SubscribeRate:                 SubscribeRate{RatePeriodInSecond: 30},
	}
}

// Validate reports a default that a namespace could not have set either.
func (d BrokerDefaults) Validate() error {
	if err := (RetentionPolicies{d.RetentionTimeInMinutes, d.RetentionSizeInMB}).validate(); err != nil {
		return fmt.Errorf("global: BrokerDefaults: %w", err)
	}
	if d.SubscriptionExpirationTimeMinutes < 0 {
		return fmt.Errorf("global: BrokerDefaults.SubscriptionExpirationTimeMinutes must not be negative, got %d", d.SubscriptionExpirationTimeMinutes)
	}
	if d.MessageTTLInSeconds < 0 {
		return fmt.Errorf("global: BrokerDefaults.MessageTTLInSeconds must not be negative, got %d", d.MessageTTLInSeconds)
	}
	if d.DefaultNumPartitions < 1 {
		return fmt.Errorf("global: BrokerDefaults.DefaultNumPartitions must be at least 1, got %d", d.DefaultNumPartitions)
	}
	if d.MaxNumPartitions < 0 || (d.MaxNumPartitions > 0 && d.DefaultNumPartitions > d.MaxNumPartitions) {
		return fmt.Errorf("global: BrokerDefaults.MaxNumPartitions %d: want 0 (no bound) or at least DefaultNumPartitions (%d)",
			d.MaxNumPartitions, d.DefaultNumPartitions)
	}
	if d.MaxProducersPerTopic < 0 || d.MaxConsumersPerTopic < 0 || d.MaxConsumersPerSubscription < 0 {
		return fmt.Errorf("global: BrokerDefaults.MaxProducersPerTopic %d, MaxConsumersPerTopic %d, MaxConsumersPerSubscription %d: want 0 (no limit) or more",
			d.MaxProducersPerTopic, d.MaxConsumersPerTopic, d.MaxConsumersPerSubscription)
	}
	if d.AutoTopicCreationType != Partitioned && d.AutoTopicCreationType != NonPartitioned {
		return fmt.Errorf("global: BrokerDefaults.AutoTopicCreationType %q (want partitioned or non-partitioned)", d.AutoTopicCreationType)
	}
	if err := d.SubscribeRate.Validate(); err != nil {
		return fmt.Errorf("global: BrokerDefaults.SubscribeRate: %w", err)
	}
	if d.MaxTopicsPerNamespace < 0 {
		return fmt.Errorf("global: BrokerDefaults.MaxTopicsPerNamespace must be 0 (no limit) or more, got %d", d.MaxTopicsPerNamespace)
	}
	if err := validBacklogQuotas(d.backlogQuotas()); err != nil {
		return fmt.Errorf("global: BrokerDefaults: %w", err)
	}
	if d.SchemaCompatibilityStrategy == SchemaUndefined || !d.SchemaCompatibilityStrategy.valid() {
		return fmt.Errorf("global: BrokerDefaults.SchemaCompatibilityStrategy %q is not a strategy", d.SchemaCompatibilityStrategy)
	}
	return nil
}

func (d BrokerDefaults) backlogQuotas() map[BacklogQuotaType]BacklogQuota {
	// Pulsar's default quota limits size with the byte limit and age with
	// the second limit; each type holds only its own dimension.
	return map[BacklogQuotaType]BacklogQuota{
		DestinationStorage: {LimitSize: d.BacklogQuotaLimitBytes, LimitTime: -1, Policy: d.BacklogQuotaPolicy},
		MessageAge:         {LimitSize: -1, LimitTime: d.BacklogQuotaLimitSeconds, Policy: d.BacklogQuotaPolicy},
	}
}

// ExtraSubscriptionExpirationTime is the Extra key of a namespace's
// subscriptionExpirationTime, in minutes (Pulsar's
// Policies.subscription_expiration_time_minutes).
const ExtraSubscriptionExpirationTime = "subscription_expiration_time_minutes"

// Effective are the policies a broker applies to one topic.
type Effective struct {
	Retention RetentionPolicies
	// BacklogQuotas holds both quota types, always.
	BacklogQuotas        map[BacklogQuotaType]BacklogQuota
	MessageTTLInSeconds  int
	DeduplicationEnabled bool
	// SubscriptionExpirationTimeMinutes is how long a durable subscription
	// may go without a consumer before the broker deletes it: the
	// namespace's subscriptionExpirationTime, else the broker's; 0, never.
	SubscriptionExpirationTimeMinutes int
	// AutoTopicCreation is the namespace's override or the broker's
	// setting; Partitions is set only for the partitioned type.
	AutoTopicCreation AutoTopicCreation
	// AllowAutoSubscriptionCreation is the topic's override, else the
	// namespace's, else the broker's setting.
	AllowAutoSubscriptionCreation bool
	SchemaCompatibilityStrategy   SchemaCompatibilityStrategy
	// SchemaValidationEnforced is the topic's schemaValidationEnforced,
	// else the namespace's, else the broker's.
	SchemaValidationEnforced bool
	// ReplicationClusters are the regions the topic replicates among: the
	// topic's override, else the namespace's, always bounded by the
	// tenant's allowed clusters (DESIGN §6), sorted. A message's
	// replicate_to narrows them further, per message, in the broker.
	ReplicationClusters []string
	// ActiveRegion is the topic's own active region (ExtraTopicActiveRegion),
	// else the namespace's, when it is one of ReplicationClusters; else
	// empty.
	ActiveRegion string
	// AutoFailover is the namespace's automatic failover (Policies.AutoFailover)
	// when ActiveRegion is the namespace's; nil when it is off, when there
	// is no ActiveRegion, and for a topic with an active region of its own,
	// which is switched by hand only.
	AutoFailover *AutoFailover
	// Partitions is the partitioned-topic metadata: 0 for a non-partitioned
	// topic (or one with no record).
	Partitions int
	// Bundles are the namespace's bundles.
	Bundles []topology.Bundle
	// MaxProducersPerTopic, MaxConsumersPerTopic and
	// MaxConsumersPerSubscription are Pulsar's limits: the topic's policy,
	// else the namespace's, else the broker's (BrokerDefaults); 0 is no
	// limit.
	MaxProducersPerTopic        int
	MaxConsumersPerTopic        int
	MaxConsumersPerSubscription int
	// MaxSubscriptionsPerTopic is the topic's limit; 0 is none.
	MaxSubscriptionsPerTopic int
	// MaxTopicsPerNamespace is the namespace's max_topics_per_namespace,
	// else the broker's; 0 is none.
	MaxTopicsPerNamespace int
	// MaxUnackedMessagesOnConsumer is the topic's limit on the messages a
	// Shared or Key_Shared consumer holds unacked, else the namespace's
	// maxUnackedMessagesPerConsumer (0: none), or nil when neither sets one
	// and the broker's setting applies.
	MaxUnackedMessagesOnConsumer *int
	// MaxUnackedMessagesOnSubscription is the topic's limit on the
	// messages a Shared or Key_Shared subscription holds unacked, else the
	// namespace's maxUnackedMessagesPerSubscription (0: none), or nil when
	// neither sets one and the broker's setting applies.
	MaxUnackedMessagesOnSubscription *int
	// DelayedDelivery is the topic's delayed delivery policy, else the
	// namespace's, or nil (delayed delivery on, with no limit).
	DelayedDelivery *DelayedDelivery
	// ReplicatorDispatchRate is the topic's replicatorDispatchRate, which
	// overrides the namespace's for every source region, or nil;
	// NamespaceReplicatorDispatchRates are the namespace's, by source
	// region, or nil. ReplicatorDispatchRateFrom resolves them.
	ReplicatorDispatchRate           *DispatchRate
	NamespaceReplicatorDispatchRates map[string]DispatchRate
	// PublishRate is the topic's publishRate, which overrides the
	// namespace's in every region, or nil; NamespacePublishRates are the
	// namespace's, by region, or nil. PublishRateIn resolves them.
	PublishRate           *PublishRate
	NamespacePublishRates map[string]PublishRate
	// DispatchRate and SubscriptionDispatchRate are the topic's
	// dispatchRate and subscriptionDispatchRate, which override the
	// namespace's in every region, or nil; the Namespace... maps are the
	// namespace's, by region, or nil. DispatchRateIn and
	// SubscriptionDispatchRateIn resolve them.
	DispatchRate                       *DispatchRate
	NamespaceDispatchRates             map[string]DispatchRate
	SubscriptionDispatchRate           *DispatchRate
	NamespaceSubscriptionDispatchRates map[string]DispatchRate
	// SubscribeRate is the topic's subscribeRate, which overrides the
	// namespace's in every region, or nil; NamespaceSubscribeRates are the
	// namespace's, by region, or nil; BrokerSubscribeRate is the broker's.
	// SubscribeRateIn resolves them.
	SubscribeRate           *SubscribeRate
	NamespaceSubscribeRates map[string]SubscribeRate
	BrokerSubscribeRate     SubscribeRate
	// MaxMessageSize is the topic's maxMessageSize in bytes; 0 is none
	// beyond the broker's.
	MaxMessageSize int
	// Persistence is the E/Qw/Qa of the topic's new ledgers: the topic's
	// policy, else the namespace's; nil when neither sets one and the
	// broker's managedLedgerDefault* apply.
	Persistence *PersistencePolicies
	// BookieGroups are the bookie groups the topic's new ledgers are
	// placed in: its namespace's bookie affinity group; zero (every
	// bookie) when it sets none.
	BookieGroups topology.Groups
	// DedupSnapshotIntervalSeconds is the topic's
	// deduplicationSnapshotInterval: the longest its deduplication state
	// waits for a snapshot once an entry is stored (0: snapshots by
	// entries only); nil when it sets none and the broker's applies.
	DedupSnapshotIntervalSeconds *int
}

// Resolve computes a topic's effective policies, field by field: the topic
// record's override when it sets the field (topic may be nil), else the
// namespace's, else the broker default d. Backlog quotas resolve per quota
// type. Resolve is pure; Cache.Resolve feeds it one consistent view.
func Resolve(d BrokerDefaults, tenant TenantInfo, ns Policies, topic *TopicPolicies) Effective {
	var tp TopicPolicies
	if topic != nil {
		tp = *topic
	}
	e := Effective{
		Retention:                     RetentionPolicies{d.RetentionTimeInMinutes, d.RetentionSizeInMB},
		MessageTTLInSeconds:           d.MessageTTLInSeconds,
		DeduplicationEnabled:          d.DeduplicationEnabled,
		AutoTopicCreation:             AutoTopicCreation{Allow: d.AllowAutoTopicCreation, Type: d.AutoTopicCreationType},
		AllowAutoSubscriptionCreation: autoSubscriptionCreation(tp.Extra, ns.Extra, d.AllowAutoSubscriptionCreation),
		SchemaCompatibilityStrategy:   d.SchemaCompatibilityStrategy,
		Partitions:                    tp.Partitions,
	}
	if d.AutoTopicCreationType == Partitioned {
		n := d.DefaultNumPartitions
		e.AutoTopicCreation.Partitions = &n
	}
	if r := first(tp.RetentionPolicies, ns.RetentionPolicies); r != nil {
		e.Retention = *r
	}
	if ttl := first(tp.MessageTTLInSeconds, ns.MessageTTLInSeconds); ttl != nil {
		e.MessageTTLInSeconds = *ttl
	}
	e.SubscriptionExpirationTimeMinutes = d.SubscriptionExpirationTimeMinutes
	if m, ok := ns.Extra.limit(ExtraSubscriptionExpirationTime); ok {
		e.SubscriptionExpirationTimeMinutes = m
	}
	if dd := first(tp.DeduplicationEnabled, ns.DeduplicationEnabled); dd != nil {
		e.DeduplicationEnabled = *dd
	}
	if a := ns.AutoTopicCreationOverride; a != nil {
		e.AutoTopicCreation = AutoTopicCreation{Allow: a.Allow, Type: a.Type, Partitions: clonePtr(a.Partitions)}
	}
	switch {
	case tp.SchemaCompatibilityStrategy != "" && tp.SchemaCompatibilityStrategy != SchemaUndefined:
		e.SchemaCompatibilityStrategy = tp.SchemaCompatibilityStrategy
	case ns.SchemaCompatibilityStrategy != "" && ns.SchemaCompatibilityStrategy != SchemaUndefined:
		e.SchemaCompatibilityStrategy = ns.SchemaCompatibilityStrategy
	}
	e.BacklogQuotas = d.backlogQuotas()
	maps.Copy(e.BacklogQuotas, ns.BacklogQuotaMap)
	maps.Copy(e.BacklogQuotas, tp.BacklogQuotaMap)

	repl := ns.ReplicationClusters
	if tp.ReplicationClusters != nil {
		repl = tp.ReplicationClusters
	}
	e.ReplicationClusters = []string{}
	for _, c := range setOf(repl) {
		if slices.Contains(tenant.AllowedClusters, c) {
			e.ReplicationClusters = append(e.ReplicationClusters, c)
		}
	}
	switch own := tp.ActiveRegion(); {
	case own != "":
		if slices.Contains(e.ReplicationClusters, own) {
			e.ActiveRegion = own
		}
	case slices.Contains(e.ReplicationClusters, ns.ActiveRegion):
		e.ActiveRegion = ns.ActiveRegion
		if a, ok := ns.AutoFailover(); ok {
			e.AutoFailover = &a
		}
	}
	e.MaxProducersPerTopic = limitOf(tp.Extra, ExtraTopicMaxProducers, ns.Extra, ExtraMaxProducersPerTopic, d.MaxProducersPerTopic)
	e.MaxConsumersPerTopic = limitOf(tp.Extra, ExtraTopicMaxConsumers, ns.Extra, ExtraMaxConsumersPerTopic, d.MaxConsumersPerTopic)
	e.MaxConsumersPerSubscription = limitOf(tp.Extra, ExtraTopicMaxConsumersPerSubscription, ns.Extra, ExtraMaxConsumersPerSubscription,
		d.MaxConsumersPerSubscription)
	e.MaxSubscriptionsPerTopic, _ = tp.Extra.limit(ExtraTopicMaxSubscriptions)
	e.MaxTopicsPerNamespace = limitOf(nil, "", ns.Extra, ExtraMaxTopicsPerNamespace, d.MaxTopicsPerNamespace)
	e.MaxUnackedMessagesOnConsumer = optionalLimit(tp.Extra, ExtraTopicMaxUnackedOnConsumer, ns.Extra, ExtraMaxUnackedPerConsumer)
	e.MaxUnackedMessagesOnSubscription = optionalLimit(tp.Extra, ExtraTopicMaxUnackedOnSubscription, ns.Extra, ExtraMaxUnackedPerSubscription)
	e.DelayedDelivery = delayedDeliveryOf(tp, ns)
	e.SchemaValidationEnforced = d.SchemaValidationEnforced
	if on := first(decodeExtra[bool](tp.Extra, ExtraTopicSchemaValidationEnforced, nil),
		decodeExtra[bool](ns.Extra, ExtraSchemaValidationEnforced, nil)); on != nil {
		e.SchemaValidationEnforced = *on
	}
	e.ReplicatorDispatchRate = topicReplicatorDispatchRate(tp.Extra)
	e.NamespaceReplicatorDispatchRates = NamespaceReplicatorDispatchRates(ns.Extra)
	e.PublishRate = decodeExtra[PublishRate](tp.Extra, ExtraTopicPublishRate, nil)
	e.NamespacePublishRates = regionValues[PublishRate](ns.Extra, ExtraPublishRate, nil)
	e.DispatchRate = decodeExtra(tp.Extra, ExtraTopicDispatchRate, DispatchRate.Validate)
	e.NamespaceDispatchRates = regionValues(ns.Extra, ExtraDispatchRate, DispatchRate.Validate)
	e.SubscriptionDispatchRate = decodeExtra(tp.Extra, ExtraTopicSubscriptionDispatchRate, DispatchRate.Validate)
	e.NamespaceSubscriptionDispatchRates = regionValues(ns.Extra, ExtraSubscriptionDispatchRate, DispatchRate.Validate)
	e.SubscribeRate = decodeExtra(tp.Extra, ExtraTopicSubscribeRate, SubscribeRate.Validate)
	e.NamespaceSubscribeRates = regionValues(ns.Extra, ExtraSubscribeRate, SubscribeRate.Validate)
	e.BrokerSubscribeRate = d.SubscribeRate
	e.MaxMessageSize, _ = tp.Extra.limit(ExtraMaxMessageSize)
	e.Persistence = first(decodeExtra(tp.Extra, ExtraPersistence, PersistencePolicies.Validate),
		decodeExtra(ns.Extra, ExtraPersistence, PersistencePolicies.Validate))
	e.BookieGroups = ns.BookieGroups()
	if n, ok := tp.Extra.limit(ExtraTopicDedupSnapshotInterval); ok {
		e.DedupSnapshotIntervalSeconds = &n
	}
	if ns.Bundles != nil {
		// Validated on every write; a record that does not parse yields
		// no bundles rather than invented ones.
		e.Bundles, _ = ns.Bundles.Bundles()
	}
	return e
}

// PartitionsAllowed refuses a partition count above MaxNumPartitions
// with an ErrTooManyPartitions that reads as Pulsar's reason.
func (d BrokerDefaults) PartitionsAllowed(n int) error {
	if d.MaxNumPartitions > 0 && n > d.MaxNumPartitions {
		return tooManyPartitions(d.MaxNumPartitions)
	}
	return nil
}

// tooManyPartitions is ErrTooManyPartitions in Pulsar's words, which
// pulsaradmin's users see as the reason.
type tooManyPartitions int

func (max tooManyPartitions) Error() string {
	return fmt.Sprintf("Number of partitions should be less than or equal to %d", int(max))
}

func (tooManyPartitions) Is(target error) bool { return target == ErrTooManyPartitions }

// limitOf resolves a count limit kept in Extra: the topic's, else the
// namespace's, else the broker's def (0: none). A topic's 0 lifts the
// namespace's limit, as in Pulsar.
func limitOf(topic Extra, topicKey string, ns Extra, nsKey string, def int) int {
	if n := optionalLimit(topic, topicKey, ns, nsKey); n != nil {
		return *n
	}
	return def
}

// optionalLimit is limitOf without a broker default: nil when neither the
// topic nor the namespace sets the limit, for a default the broker applies
// itself.
func optionalLimit(topic Extra, topicKey string, ns Extra, nsKey string) *int {
	if n, ok := topic.limit(topicKey); ok {
		return &n
	}
	if n, ok := ns.limit(nsKey); ok {
		return &n
	}
	return nil
}

// autoSubscriptionCreation resolves allowAutoSubscriptionCreation: the
// topic's override, else the namespace's, else the broker's setting def.
func autoSubscriptionCreation(topic, ns Extra, def bool) bool {
	if allow, ok := topic.allowAutoSubscriptionCreation(ExtraTopicAutoSubscriptionCreation); ok {
		return allow
	}
	if allow, ok := ns.allowAutoSubscriptionCreation(ExtraAutoSubscriptionCreation); ok {
		return allow
	}
	return def
}

// first returns the first non-nil pointer.
func first[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}
