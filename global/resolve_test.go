package global

import (
	"reflect"
	"testing"

	"github.com/meridian-mq/meridian/topology"
)

func TestResolve(t *testing.T) {
	d := DefaultBrokerDefaults()
	tenant := TenantInfo{AllowedClusters: []string{"a", "b", "c"}}
	nsBase := func(f func(*Policies)) Policies {
		p := Policies{ReplicationClusters: []string{"a", "b"}}
		if f != nil {
			f(&p)
		}
		p.normalize()
		return p
	}
	defQuotas := map[BacklogQuotaType]BacklogQuota{
		DestinationStorage: {LimitSize: -1, LimitTime: -1, Policy: ProducerRequestHold},
		MessageAge:         {LimitSize: -1, LimitTime: -1, Policy: ProducerRequestHold},
	}
	base := Effective{
		BacklogQuotas:                 defQuotas,
		AutoTopicCreation:             AutoTopicCreation{Allow: true, Type: NonPartitioned},
		AllowAutoSubscriptionCreation: true,
		SchemaCompatibilityStrategy:   SchemaFull,
		ReplicationClusters:           []string{"a", "b"},
		BrokerSubscribeRate:           SubscribeRate{RatePeriodInSecond: 30},
	}
	with := func(f func(*Effective)) Effective {
		e := base
		e.BacklogQuotas = map[BacklogQuotaType]BacklogQuota{}
		for k, v := range defQuotas {
			e.BacklogQuotas[k] = v
		}
		f(&e)
		return e
	}
	for _, tc := range []struct {
		name   string
		tenant TenantInfo
		ns     Policies
		topic  *TopicPolicies
		want   Effective
	}{
		{"broker defaults", tenant, nsBase(nil), nil, base},
		{"namespace limits", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraMaxProducersPerTopic: []byte("2"), ExtraMaxConsumersPerTopic: []byte("3"), ExtraMaxConsumersPerSubscription: []byte("1")}
		}), nil, with(func(e *Effective) {
			e.MaxProducersPerTopic, e.MaxConsumersPerTopic, e.MaxConsumersPerSubscription = 2, 3, 1
		})},
		{"topic limits over namespace, 0 lifts one", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraMaxProducersPerTopic: []byte("2"), ExtraMaxConsumersPerTopic: []byte("3"), ExtraMaxConsumersPerSubscription: []byte("1")}
		}), &TopicPolicies{Extra: Extra{ExtraTopicMaxProducers: []byte("5"), ExtraTopicMaxConsumers: []byte("0")}},
			with(func(e *Effective) { e.MaxProducersPerTopic, e.MaxConsumersPerSubscription = 5, 1 })},
		{"topic-only limits", tenant, nsBase(nil),
			&TopicPolicies{Extra: Extra{ExtraTopicMaxSubscriptions: []byte("4"), ExtraTopicMaxUnackedOnConsumer: []byte("0")}},
			with(func(e *Effective) { e.MaxSubscriptionsPerTopic, e.MaxUnackedMessagesOnConsumer = 4, ptr(0) })},
		{"namespace unacked limits and schema validation", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraMaxUnackedPerConsumer: []byte("7"), ExtraMaxUnackedPerSubscription: []byte("70"),
				ExtraSchemaValidationEnforced: []byte("true")}
		}), nil, with(func(e *Effective) {
			e.MaxUnackedMessagesOnConsumer, e.MaxUnackedMessagesOnSubscription, e.SchemaValidationEnforced = ptr(7), ptr(70), true
		})},
		{"topic unacked limit and schema validation over namespace", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraMaxUnackedPerConsumer: []byte("7"), ExtraMaxUnackedPerSubscription: []byte("70"),
				ExtraSchemaValidationEnforced: []byte("true")}
		}), &TopicPolicies{Extra: Extra{ExtraTopicMaxUnackedOnConsumer: []byte("0"), ExtraTopicSchemaValidationEnforced: []byte("false")}},
			with(func(e *Effective) {
				e.MaxUnackedMessagesOnConsumer, e.MaxUnackedMessagesOnSubscription = ptr(0), ptr(70)
			})},
		{"a limit that is not a count is unset", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraMaxProducersPerTopic: []byte(`"2"`), ExtraMaxConsumersPerTopic: []byte("-1")}
		}), nil, base},
		{"namespace disallows auto subscription creation", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraAutoSubscriptionCreation: []byte(`{"allowAutoSubscriptionCreation":false}`)}
		}), nil, with(func(e *Effective) { e.AllowAutoSubscriptionCreation = false })},
		{"topic allows auto subscription creation over namespace", tenant, nsBase(func(p *Policies) {
			p.Extra = Extra{ExtraAutoSubscriptionCreation: []byte(`{"allowAutoSubscriptionCreation":false}`)}
		}), &TopicPolicies{Extra: Extra{ExtraTopicAutoSubscriptionCreation: []byte(`{"allowAutoSubscriptionCreation":true}`)}}, base},
		{"an override without the field disallows, as Pulsar reads it", tenant, nsBase(nil),
			&TopicPolicies{Extra: Extra{ExtraTopicAutoSubscriptionCreation: []byte(`{}`)}},
			with(func(e *Effective) { e.AllowAutoSubscriptionCreation = false })},
		{"namespace TTL", tenant, nsBase(func(p *Policies) { p.MessageTTLInSeconds = ptr(30) }), nil,
			with(func(e *Effective) { e.MessageTTLInSeconds = 30 })},
		{"topic TTL over namespace", tenant, nsBase(func(p *Policies) { p.MessageTTLInSeconds = ptr(30) }), &TopicPolicies{MessageTTLInSeconds: ptr(5)},
			with(func(e *Effective) { e.MessageTTLInSeconds = 5 })},
		{"topic TTL 0 is an override, not unset", tenant, nsBase(func(p *Policies) { p.MessageTTLInSeconds = ptr(30) }), &TopicPolicies{MessageTTLInSeconds: ptr(0)},
			base},
		{"topic dedup false over namespace true", tenant, nsBase(func(p *Policies) { p.DeduplicationEnabled = ptr(true) }), &TopicPolicies{DeduplicationEnabled: ptr(false)},
			base},
		{"namespace dedup", tenant, nsBase(func(p *Policies) { p.DeduplicationEnabled = ptr(true) }), &TopicPolicies{Partitions: 3},
			with(func(e *Effective) { e.DeduplicationEnabled = true; e.Partitions = 3 })},
		{"retention: topic, then namespace", tenant, nsBase(func(p *Policies) { p.RetentionPolicies = &RetentionPolicies{60, 10} }), &TopicPolicies{RetentionPolicies: &RetentionPolicies{-1, -1}},
			with(func(e *Effective) { e.Retention = RetentionPolicies{-1, -1} })},
		{"retention from namespace", tenant, nsBase(func(p *Policies) { p.RetentionPolicies = &RetentionPolicies{60, 10} }), nil,
			with(func(e *Effective) { e.Retention = RetentionPolicies{60, 10} })},
		{"backlog quotas merge per type", tenant,
			nsBase(func(p *Policies) {
				p.BacklogQuotaMap = map[BacklogQuotaType]BacklogQuota{
					DestinationStorage: {LimitSize: 100, LimitTime: -1, Policy: ProducerException},
					MessageAge:         {LimitSize: -1, LimitTime: 60, Policy: ProducerException},
				}
			}),
			&TopicPolicies{BacklogQuotaMap: map[BacklogQuotaType]BacklogQuota{MessageAge: {LimitSize: -1, LimitTime: 5, Policy: ConsumerBacklogEviction}}},
			with(func(e *Effective) {
				e.BacklogQuotas[DestinationStorage] = BacklogQuota{LimitSize: 100, LimitTime: -1, Policy: ProducerException}
				e.BacklogQuotas[MessageAge] = BacklogQuota{LimitSize: -1, LimitTime: 5, Policy: ConsumerBacklogEviction}
			})},
		{"schema: UNDEFINED falls through", tenant, nsBase(nil), &TopicPolicies{SchemaCompatibilityStrategy: SchemaUndefined}, base},
		{"schema: namespace, then topic", tenant, nsBase(func(p *Policies) { p.SchemaCompatibilityStrategy = SchemaBackward }), &TopicPolicies{SchemaCompatibilityStrategy: SchemaForward},
			with(func(e *Effective) { e.SchemaCompatibilityStrategy = SchemaForward })},
		{"schema from namespace", tenant, nsBase(func(p *Policies) { p.SchemaCompatibilityStrategy = SchemaBackward }), nil,
			with(func(e *Effective) { e.SchemaCompatibilityStrategy = SchemaBackward })},
		{"auto creation override", tenant, nsBase(func(p *Policies) {
			p.AutoTopicCreationOverride = &AutoTopicCreation{Allow: true, Type: Partitioned, Partitions: ptr(6)}
		}), nil,
			with(func(e *Effective) {
				e.AutoTopicCreation = AutoTopicCreation{Allow: true, Type: Partitioned, Partitions: ptr(6)}
			})},
		{"replication: topic override", tenant, nsBase(nil), &TopicPolicies{ReplicationClusters: []string{"c", "a"}},
			with(func(e *Effective) { e.ReplicationClusters = []string{"a", "c"} })},
		{"replication: empty topic override means none", tenant, nsBase(nil), &TopicPolicies{ReplicationClusters: []string{}},
			with(func(e *Effective) { e.ReplicationClusters = []string{} })},
		{"replication bounded by allowed clusters", TenantInfo{AllowedClusters: []string{"b"}}, nsBase(nil), nil,
			with(func(e *Effective) { e.ReplicationClusters = []string{"b"} })},
		{"active region kept inside the set", tenant, nsBase(func(p *Policies) { p.ActiveRegion = "b" }), nil,
			with(func(e *Effective) { e.ActiveRegion = "b" })},
		{"active region dropped outside the topic's set", tenant, nsBase(func(p *Policies) { p.ActiveRegion = "b" }), &TopicPolicies{ReplicationClusters: []string{"a"}},
			with(func(e *Effective) { e.ReplicationClusters = []string{"a"} })},
		{"bundles", tenant, nsBase(func(p *Policies) { b, _ := EvenBundlesData(2); p.Bundles = &b }), nil,
			with(func(e *Effective) { e.Bundles = mustBundles(2) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(d, tc.tenant, tc.ns, tc.topic)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Resolve =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}

	partitioned := d
	partitioned.AutoTopicCreationType, partitioned.DefaultNumPartitions = Partitioned, 4
	if got := Resolve(partitioned, tenant, nsBase(nil), nil).AutoTopicCreation; got.Type != Partitioned || got.Partitions == nil || *got.Partitions != 4 {
		t.Fatalf("partitioned broker default = %+v", got)
	}
	limited := d
	limited.MaxProducersPerTopic, limited.MaxConsumersPerTopic, limited.MaxConsumersPerSubscription = 7, 8, 9
	if got := Resolve(limited, tenant, nsBase(nil), nil); got.MaxProducersPerTopic != 7 || got.MaxConsumersPerTopic != 8 || got.MaxConsumersPerSubscription != 9 {
		t.Fatalf("broker limits: %+v, want 7, 8, 9", got)
	}
	over := nsBase(func(p *Policies) {
		p.Extra = Extra{ExtraMaxProducersPerTopic: []byte("0"), ExtraMaxConsumersPerTopic: []byte("3")}
	})
	if got := Resolve(limited, tenant, over, nil); got.MaxProducersPerTopic != 0 || got.MaxConsumersPerTopic != 3 || got.MaxConsumersPerSubscription != 9 {
		t.Fatalf("namespace limits over the broker's (0 lifts one): %+v, want 0, 3, 9", got)
	}
	custom := d
	custom.RetentionTimeInMinutes, custom.RetentionSizeInMB, custom.MessageTTLInSeconds, custom.DeduplicationEnabled = 10, 20, 30, true
	got := Resolve(custom, tenant, nsBase(nil), nil)
	if got.Retention != (RetentionPolicies{10, 20}) || got.MessageTTLInSeconds != 30 || !got.DeduplicationEnabled {
		t.Fatalf("custom broker defaults = %+v", got)
	}
}

func mustBundles(n int) []topology.Bundle {
	d, err := EvenBundlesData(n)
	if err != nil {
		panic(err)
	}
	b, err := d.Bundles()
	if err != nil {
		panic(err)
	}
	return b
}
