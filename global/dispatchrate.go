package global

import (
	"fmt"
)

// ExtraReplicatorDispatchRate is the Extra key, Pulsar's JSON field name, of
// the replicator dispatch rate: in a namespace's record a map from source
// region to DispatchRate (Pulsar's Policies.replicatorDispatchRate, keyed by
// the cluster whose admin API set it), in a topic's record one DispatchRate
// that applies to the topic's replication out of every region (Pulsar's
// TopicPolicies.replicatorDispatchRate).
const ExtraReplicatorDispatchRate = "replicatorDispatchRate"

// DispatchRate is Pulsar's DispatchRate (pulsaradmin's utils.DispatchRate
// and DispatchRateData): at most DispatchThrottlingRateInMsg messages and
// DispatchThrottlingRateInByte bytes per RatePeriodInSecond seconds. A
// dimension of 0 or less is not limited, as in Pulsar (its default is -1).
type DispatchRate struct {
	DispatchThrottlingRateInMsg  int64 `json:"dispatchThrottlingRateInMsg"`
	DispatchThrottlingRateInByte int64 `json:"dispatchThrottlingRateInByte"`
	// RelativeToPublishRate (Pulsar's PIP-52) raises both rates by the
	// topic's publish rate: so many messages and bytes more than are
	// published (PerPeriod). The replicator measures that rate from the
	// entries it reads (replicator's dispatchLimiter says how), the broker
	// from the topic's stored counters (its publishRateMeter).
	RelativeToPublishRate bool `json:"relativeToPublishRate"`
	// RatePeriodInSecond is the period the two rates count over: 1 or more.
	RatePeriodInSecond int `json:"ratePeriodInSecond"`
}

// Limited reports whether r limits anything.
func (r DispatchRate) Limited() bool {
	return r.DispatchThrottlingRateInMsg > 0 || r.DispatchThrottlingRateInByte > 0
}

// PerPeriod returns the messages and bytes r allows per period, given the
// topic's publish rate (msgsPerSecond, bytesPerSecond): each dimension r
// limits, raised by a period's worth of that rate when r is relative to
// it; a dimension r does not limit, as r has it.
func (r DispatchRate) PerPeriod(msgsPerSecond, bytesPerSecond float64) (msgs, bytes float64) {
	msgs, bytes = float64(r.DispatchThrottlingRateInMsg), float64(r.DispatchThrottlingRateInByte)
	if !r.RelativeToPublishRate {
		return msgs, bytes
	}
	period := float64(max(r.RatePeriodInSecond, 1))
	if r.DispatchThrottlingRateInMsg > 0 {
		msgs += msgsPerSecond * period
	}
	if r.DispatchThrottlingRateInByte > 0 {
		bytes += bytesPerSecond * period
	}
	return msgs, bytes
}

// Validate reports a rate that cannot be applied.
func (r DispatchRate) Validate() error {
	if r.RatePeriodInSecond < 1 {
		return fmt.Errorf("%w: ratePeriodInSecond must be 1 or more, got %d", ErrInvalidPolicies, r.RatePeriodInSecond)
	}
	return nil
}

// ReplicatorDispatchRateFrom is the rate that limits the topic's
// replication out of region, and whether there is one: the topic's policy,
// else the namespace's for region, as Pulsar resolves it. A rate that limits
// nothing counts as none.
func (e Effective) ReplicatorDispatchRateFrom(region string) (DispatchRate, bool) {
	return topicElseRegion(e.ReplicatorDispatchRate, e.NamespaceReplicatorDispatchRates, region)
}

// DispatchRateIn is the dispatch rate of the topic in region (all its
// subscriptions together), and whether there is one: the topic's policy,
// else the namespace's for region, as Pulsar resolves it.
func (e Effective) DispatchRateIn(region string) (DispatchRate, bool) {
	return topicElseRegion(e.DispatchRate, e.NamespaceDispatchRates, region)
}

// SubscriptionDispatchRateIn is the dispatch rate of each of the topic's
// subscriptions in region, and whether there is one, resolved as
// DispatchRateIn.
func (e Effective) SubscriptionDispatchRateIn(region string) (DispatchRate, bool) {
	return topicElseRegion(e.SubscriptionDispatchRate, e.NamespaceSubscriptionDispatchRates, region)
}

// topicReplicatorDispatchRate reads a topic's rate from its Extra: nil when
// unset or not a valid rate (the admin API stores no other).
func topicReplicatorDispatchRate(e Extra) *DispatchRate {
	return decodeExtra(e, ExtraReplicatorDispatchRate, DispatchRate.Validate)
}

// NamespaceReplicatorDispatchRates reads a namespace's rates per source
// region from its Extra, leaving out any that is not valid: nil when unset.
func NamespaceReplicatorDispatchRates(e Extra) map[string]DispatchRate {
	return regionValues(e, ExtraReplicatorDispatchRate, DispatchRate.Validate)
}
