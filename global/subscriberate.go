package global

import "fmt"

// The Extra keys of the subscribe rate, by Pulsar's names: a namespace's
// (Policies.clusterSubscribeRate, a map from region to SubscribeRate) and
// a topic's (TopicPolicies.subscribeRate).
const (
	ExtraSubscribeRate      = "clusterSubscribeRate"
	ExtraTopicSubscribeRate = "subscribeRate"
)

// SubscribeRate is Pulsar's SubscribeRate (pulsaradmin's
// utils.SubscribeRate): at most SubscribeThrottlingRatePerConsumer
// SUBSCRIBEs per RatePeriodInSecond seconds from one consumer to one topic,
// a consumer being its client's address, its name and its id (Pulsar's
// ConsumerIdentifier). A rate of 0 or less is not limited, as in Pulsar
// (its default is -1). A namespace keeps one per region under
// ExtraSubscribeRate, as Pulsar keys clusterSubscribeRate by cluster; a
// topic keeps one under ExtraTopicSubscribeRate.
type SubscribeRate struct {
	SubscribeThrottlingRatePerConsumer int `json:"subscribeThrottlingRatePerConsumer"`
	// RatePeriodInSecond is the period the rate counts over: 1 or more
	// when the rate limits.
	RatePeriodInSecond int `json:"ratePeriodInSecond"`
}

// Limited reports whether r limits anything.
func (r SubscribeRate) Limited() bool { return r.SubscribeThrottlingRatePerConsumer > 0 }

// Validate reports a rate that cannot be applied.
func (r SubscribeRate) Validate() error {
	if r.Limited() && r.RatePeriodInSecond < 1 {
		return fmt.Errorf("%w: ratePeriodInSecond must be 1 or more, got %d", ErrInvalidPolicies, r.RatePeriodInSecond)
	}
	return nil
}

// SubscribeRateIn is the subscribe rate of each consumer of the topic in
// region, and whether there is one: the topic's policy, else the
// namespace's for region, as the other rates resolve (topicElseRegion),
// else, when neither sets one, the broker's
// subscribeThrottlingRatePerConsumer.
func (e Effective) SubscribeRateIn(region string) (SubscribeRate, bool) {
	if _, set := e.NamespaceSubscribeRates[region]; e.SubscribeRate == nil && !set {
		return topicElseRegion(&e.BrokerSubscribeRate, nil, region)
	}
	return topicElseRegion(e.SubscribeRate, e.NamespaceSubscribeRates, region)
}
