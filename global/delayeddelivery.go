package global

// DelayedDelivery is Pulsar's DelayedDeliveryPolicies, as a namespace's
// delayed_delivery_policies and a topic's delayedDelivery store it: whether
// messages with a delivery time wait for it (Active), the tracker's tick
// (TickTime, ms), and the longest delay a producer may ask for (0: no
// limit). Pulsar's REST API names the last maxDeliveryDelayInMillis,
// pulsaradmin maxDelayInMillis; both are read.
type DelayedDelivery struct {
	Active   bool    `json:"active"`
	TickTime float64 `json:"tickTime"`
	// MaxDelayInMillis and MaxDeliveryDelayInMillis: see MaxDelay.
	MaxDelayInMillis         int64 `json:"maxDelayInMillis,omitempty"`
	MaxDeliveryDelayInMillis int64 `json:"maxDeliveryDelayInMillis,omitempty"`
}

// MaxDelay is the longest delivery delay a producer may ask for, in
// milliseconds (0: no limit), under either of its names.
func (d DelayedDelivery) MaxDelay() int64 {
	return max(d.MaxDelayInMillis, d.MaxDeliveryDelayInMillis, 0)
}

// delayedDeliveryOf is the topic's delayed delivery policy, else its
// namespace's; nil when neither sets one, and Pulsar's defaults apply
// (delayed delivery on, no limit on the delay).
func delayedDeliveryOf(tp TopicPolicies, ns Policies) *DelayedDelivery {
	return first(decodeExtra[DelayedDelivery](tp.Extra, ExtraTopicDelayedDelivery, nil),
		decodeExtra[DelayedDelivery](ns.Extra, ExtraDelayedDelivery, nil))
}
