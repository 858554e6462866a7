package global

import "slices"

// Unbuilt is one policy Meridian accepts, stores and answers back, but does
// not act on yet. It is accepted, not refused, because Pulsar tools apply
// policy sets wholesale (pulsaradmin's own suite sets each of these and
// expects no error); it is never silent: the admin API answers a set of it
// with an HTTP Warning naming Feature, the broker logs the change, and a
// metric counts the namespaces and topics that hold it.
type Unbuilt struct {
	// Feature names what is missing, as an operator would search for it.
	Feature string
	// Reason says what Meridian does instead.
	Reason string
	// Paths are the admin API path segments (after the namespace or the
	// topic) whose set stores the policy.
	Paths []string
	// InNamespace and InTopic report whether a record holds the policy
	// with an effect it would have on Pulsar; nil when the level has none.
	InNamespace func(Policies) bool
	InTopic     func(TopicPolicies) bool
}

// UnbuiltPolicies is the one table of the policies that are stored and not
// enforced. A change that enforces one removes its row.
var UnbuiltPolicies = []Unbuilt{
	{Feature: "offload", Reason: "ledgers are never moved to tiered storage; they stay on the bookies until retention deletes them",
		Paths:       []string{"offloadPolicies", "offloadThreshold", "offloadThresholdInSeconds", "offloadDeletionLagMs"},
		InNamespace: extraHas("offload_policies", "offload_threshold", "offload_threshold_in_seconds", "offload_deletion_lag_ms"),
		InTopic:     topicExtraHas("offloadPolicies")},
	{Feature: "compaction", Reason: "topics are never compacted; a compacted read sees every message",
		Paths:       []string{"compactionThreshold"},
		InNamespace: extraHas(ExtraCompactionThreshold), InTopic: topicExtraHas(ExtraTopicCompactionThreshold)},
}

// The Extra keys of the dispatch-side rates, of delayed delivery and of
// the compaction threshold, by
// Pulsar's names. A namespace keeps each rate per region, as Pulsar keys
// them by cluster; a topic keeps one.
const (
	ExtraDispatchRate                  = "clusterDispatchRate"
	ExtraSubscriptionDispatchRate      = "subscriptionDispatchRate"
	ExtraDelayedDelivery               = "delayed_delivery_policies"
	ExtraTopicDispatchRate             = "dispatchRate"
	ExtraTopicSubscriptionDispatchRate = "subscriptionDispatchRate"
	ExtraTopicDelayedDelivery          = "delayedDelivery"
	ExtraCompactionThreshold           = "compaction_threshold"
	ExtraTopicCompactionThreshold      = "compactionThreshold"
)

// UnbuiltIn returns the rows that p holds.
func UnbuiltIn(p Policies) []Unbuilt {
	return unbuiltWhere(func(u Unbuilt) bool { return u.InNamespace != nil && u.InNamespace(p) })
}

// UnbuiltInTopic returns the rows that tp holds.
func UnbuiltInTopic(tp TopicPolicies) []Unbuilt {
	return unbuiltWhere(func(u Unbuilt) bool { return u.InTopic != nil && u.InTopic(tp) })
}

func unbuiltWhere(holds func(Unbuilt) bool) []Unbuilt {
	var out []Unbuilt
	for _, u := range UnbuiltPolicies {
		if holds(u) {
			out = append(out, u)
		}
	}
	return out
}

// SetBy reports whether a set at the admin path segment path stores u.
func (u Unbuilt) SetBy(path string) bool { return slices.Contains(u.Paths, path) }

func extraHas(keys ...string) func(Policies) bool {
	return func(p Policies) bool { return anyKey(p.Extra, keys) }
}

func topicExtraHas(keys ...string) func(TopicPolicies) bool {
	return func(tp TopicPolicies) bool { return anyKey(tp.Extra, keys) }
}

func anyKey(e Extra, keys []string) bool {
	for _, k := range keys {
		if _, set := e[k]; set {
			return true
		}
	}
	return false
}
