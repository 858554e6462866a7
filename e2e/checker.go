package e2e

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Message names one message of a workload: its producer's name and its
// number in that producer's stream. The workload writes both into the
// payload, so every copy of a message, in any region, says which it is.
type Message struct {
	Producer string
	N        int64
}

func (m Message) String() string { return fmt.Sprintf("%s:%d", m.Producer, m.N) }

// SubscriptionType is the Pulsar subscription type of a delivery, which
// decides the order the checker holds it to.
type SubscriptionType string

// The subscription types. Exclusive and Failover deliver each producer's
// messages in order; Key_Shared each key's (per producer); Shared
// promises no order. Messages with a key are only ever held to their
// key's order, because a producer batching by key (as Key_Shared needs)
// stores its batches of different keys in any order.
const (
	Exclusive SubscriptionType = "Exclusive"
	Failover  SubscriptionType = "Failover"
	Shared    SubscriptionType = "Shared"
	KeyShared SubscriptionType = "Key_Shared"
)

// Send is one message a producer sent, and what came of it.
type Send struct {
	Message
	Region     string // the region whose brokers the producer wrote to
	Topic      string
	Key        string // the message key; "" for none
	SequenceID int64
	MessageID  string    // from the send receipt
	SentAt     time.Time // when the producer handed it to the client
	ReceiptAt  time.Time // when the receipt came; zero for none
	Err        string    // why the send failed, if it did
}

// Acknowledged reports whether the broker acknowledged the send: from then
// on the message must not be lost.
func (s Send) Acknowledged() bool { return !s.ReceiptAt.IsZero() && s.Err == "" }

// Delivery is one message a consumer received, and the outcome of its ack.
type Delivery struct {
	Message
	Region       string // the region whose brokers the consumer read from
	Topic        string
	Subscription string
	Type         SubscriptionType
	Consumer     string
	Key          string
	MessageID    string
	At           time.Time
	Acked        bool // the broker confirmed the ack (with ConsumerConfig.GroupedAcks: the client took it)
	AckAt        time.Time
}

// Stored is one message read back from a topic.
type Stored struct {
	Message
	Key       string
	MessageID string
}

// ReadBack is a topic of one region read by a reader from the earliest
// position, after the workload: what the region stored, in order.
type ReadBack struct {
	Region   string
	Topic    string
	Messages []Stored
}

// History is everything a workload's clients saw. Sends and deliveries
// may be in any order (a consumer records a delivery once its ack is
// settled, which may take a reconnect); the checker orders each
// subscription's deliveries by the time they arrived.
type History struct {
	Sends      []Send
	Deliveries []Delivery
	ReadBacks  []ReadBack
}

// Disruption is a time when a region's clients lost their connections:
// a broker crash, from its SIGKILL to the restarted broker's ready line,
// or a cut link, from the cut to the restore. A client records an ack's
// confirmation a little after it arrives, so an ack recorded before End
// was confirmed by a broker (or over a connection) that then went away.
type Disruption struct {
	Region     string // the region whose connections broke; "" for any
	Start, End time.Time
}

// Rules are what the checker needs to know beyond the history.
type Rules struct {
	// Regions lists, per topic, the regions its messages belong in (its
	// namespace's replication clusters). A topic not listed belongs in
	// the regions it was produced in.
	Regions map[string][]string
	// Disruptions are the broker crashes and cut links of the run.
	Disruptions []Disruption
	// RedeliveryWindow is how long before a disruption an ack may be lost
	// with it: acks a broker confirmed but had not yet persisted (the
	// cursor persist interval plus a round trip). Such a message may be
	// delivered once more per disruption; that is a redelivery, not a
	// duplicate.
	RedeliveryWindow time.Duration
	// ReconnectWindow is how long after a disruption ends its clients may
	// take to reconnect and work off what they received before it. Acks
	// confirmed then may be of messages the broker had already dispatched
	// again, as unacked, on the new connection; such a message too may be
	// delivered once more. Zero excuses only acks recorded before End.
	ReconnectWindow time.Duration
}

// Kind is the kind of a violation.
type Kind string

// The violations the checker finds.
const (
	// Lost: an acknowledged message is missing from a region it belongs
	// in, or a subscription there never acked it.
	Lost Kind = "lost"
	// DuplicateStored: a region stored a message more than once.
	DuplicateStored Kind = "duplicate stored"
	// DuplicateDelivered: a subscription got a message again after the
	// broker confirmed its ack, beyond what a crash excuses.
	DuplicateDelivered Kind = "duplicate delivered"
	// Order: a producer's messages (a key's, under Key_Shared) were stored,
	// or first delivered, out of the order sent.
	Order Kind = "order"
	// WrongRegion: a message was stored or delivered in a region it does
	// not belong in.
	WrongRegion Kind = "wrong region"
	// NeverSent: a message was stored or delivered that no producer sent.
	NeverSent Kind = "never sent"
	// NotStored: a message was delivered in a region whose topic, read
	// back, does not hold it.
	NotStored Kind = "delivered, not stored"
)

// Violation is one broken property.
type Violation struct {
	Kind    Kind
	Region  string
	Topic   string
	Message Message
	Detail  string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s in %s of %s: %s", v.Kind, v.Message, v.Topic, v.Region, v.Detail)
}

// Report is what Check found.
type Report struct {
	Violations []Violation
	// Counts over the history, for the test's log.
	Sends, Acknowledged, Stored, Deliveries int
	// Distinct is the number of distinct (subscription, message) pairs
	// delivered.
	Distinct int
	// UnackedRedeliveries are deliveries again of what was not yet acked:
	// allowed.
	UnackedRedeliveries int
	// WindowRedeliveries are deliveries again of what was acked around a
	// disruption (see Rules): allowed.
	WindowRedeliveries int
}

// OK reports whether the history broke no property.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Summary is one line of the report's counts.
func (r Report) Summary() string {
	return fmt.Sprintf("%d sends (%d acknowledged), %d stored, %d deliveries (%d distinct), %d redelivered before an ack, %d redelivered around a disruption, %d violations",
		r.Sends, r.Acknowledged, r.Stored, r.Deliveries, r.Distinct, r.UnackedRedeliveries, r.WindowRedeliveries, len(r.Violations))
}

// topicMessage is a message of one topic.
type topicMessage struct {
	topic string
	Message
}

// Check proves over h, under rules:
//
//   - no acknowledged message lost: each is stored in every region it
//     belongs in that was read back, and acked by every subscription there
//     (subscriptions are taken to start from the earliest position);
//   - no duplicate stored: a region stores each message at most once;
//   - no duplicate delivered: once the broker confirmed a subscription's
//     ack of a message, the subscription does not get it again, except
//     once per disruption for acks around it (see Rules);
//   - order: each producer's messages are stored, and first delivered, in
//     the order sent (per key for messages with keys; Shared promises
//     none);
//   - no message in a region it does not belong in;
//   - nothing stored or delivered that was never sent.
func Check(h History, rules Rules) Report {
	c := checker{rules: rules, sent: map[topicMessage]bool{}, acked: map[string][]Message{}, regions: map[string][]string{}}
	c.report.Sends, c.report.Deliveries = len(h.Sends), len(h.Deliveries)
	for _, s := range h.Sends {
		c.sent[topicMessage{s.Topic, s.Message}] = true
		if s.Acknowledged() {
			c.acked[s.Topic] = append(c.acked[s.Topic], s.Message)
			c.report.Acknowledged++
		}
		if _, listed := rules.Regions[s.Topic]; !listed && !slices.Contains(c.regions[s.Topic], s.Region) {
			c.regions[s.Topic] = append(c.regions[s.Topic], s.Region)
		}
	}
	maps.Copy(c.regions, rules.Regions)

	readBack := map[[2]string]map[Message]int{}
	for _, rb := range h.ReadBacks {
		readBack[[2]string{rb.Region, rb.Topic}] = c.checkReadBack(rb)
	}
	for _, sub := range subscriptions(h.Deliveries) {
		c.checkSubscription(sub, readBack)
	}
	return c.report
}

type checker struct {
	rules   Rules
	sent    map[topicMessage]bool
	acked   map[string][]Message // acknowledged messages per topic, in send order
	regions map[string][]string  // the regions each topic belongs in
	report  Report
}

func (c *checker) fail(kind Kind, region, topic string, m Message, format string, args ...any) {
	c.report.Violations = append(c.report.Violations,
		Violation{Kind: kind, Region: region, Topic: topic, Message: m, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) belongs(region, topic string) bool {
	return slices.Contains(c.regions[topic], region)
}

// checkReadBack checks one region's stored copy of a topic and returns
// how often it holds each message.
func (c *checker) checkReadBack(rb ReadBack) map[Message]int {
	count := map[Message]int{}
	highest := map[string]int64{} // per stream (see stream)
	belongs := c.belongs(rb.Region, rb.Topic)
	c.report.Stored += len(rb.Messages)
	for _, s := range rb.Messages {
		m := s.Message
		count[m]++
		if !belongs {
			c.fail(WrongRegion, rb.Region, rb.Topic, m, "stored, but the topic belongs in %v", c.regions[rb.Topic])
		}
		if count[m] == 2 {
			c.fail(DuplicateStored, rb.Region, rb.Topic, m, "stored more than once")
		}
		k := stream(m.Producer, s.Key)
		if h, ok := highest[k]; ok && m.N <= h && count[m] == 1 {
			c.fail(Order, rb.Region, rb.Topic, m, "stored after %s:%d", m.Producer, h)
		}
		if h, ok := highest[k]; !ok || m.N > h {
			highest[k] = m.N
		}
		if !c.sent[topicMessage{rb.Topic, m}] {
			c.fail(NeverSent, rb.Region, rb.Topic, m, "stored, but no producer sent it")
		}
	}
	if belongs {
		for _, m := range c.acked[rb.Topic] {
			if count[m] == 0 {
				c.fail(Lost, rb.Region, rb.Topic, m, "acknowledged, but not stored")
			}
		}
	}
	return count
}

// subscription is the deliveries of one subscription in one region.
type subscription struct {
	region, topic, name string
	typ                 SubscriptionType
	deliveries          []Delivery
}

// subscriptions groups deliveries by subscription, each in the order they
// arrived (At; the history's order among equal times), the subscriptions
// sorted so that reports come out the same every run.
func subscriptions(ds []Delivery) []*subscription {
	byKey := map[[3]string]*subscription{}
	var out []*subscription
	for _, d := range ds {
		k := [3]string{d.Region, d.Topic, d.Subscription}
		s := byKey[k]
		if s == nil {
			s = &subscription{region: d.Region, topic: d.Topic, name: d.Subscription, typ: d.Type}
			byKey[k] = s
			out = append(out, s)
		}
		s.deliveries = append(s.deliveries, d)
	}
	for _, s := range out {
		slices.SortStableFunc(s.deliveries, func(a, b Delivery) int { return a.At.Compare(b.At) })
	}
	slices.SortFunc(out, func(a, b *subscription) int {
		return cmp.Or(strings.Compare(a.region, b.region), strings.Compare(a.topic, b.topic), strings.Compare(a.name, b.name))
	})
	return out
}

// stream is the sequence a message is held in order in: its producer's
// messages with its key, or without a key, all of its producer's
// messages without one.
func stream(producer, key string) string {
	if key == "" {
		return producer
	}
	return producer + "\x00" + key
}

// orderKey is the stream a subscription keeps d in order in; ok is false
// for Shared, which keeps none.
func orderKey(typ SubscriptionType, d Delivery) (key string, ok bool) {
	if typ == Shared {
		return "", false
	}
	return stream(d.Producer, d.Key), true
}

// checkSubscription checks one subscription's deliveries against the
// region's stored topic (stored, if it was read back).
func (c *checker) checkSubscription(sub *subscription, readBack map[[2]string]map[Message]int) {
	stored, wasRead := readBack[[2]string{sub.region, sub.topic}]
	belongs := c.belongs(sub.region, sub.topic)
	firstAck := map[Message]time.Time{}
	delivered := map[Message]bool{}
	lastFirst := map[string]int64{}
	excusedBy := map[Message]int{}
	for _, d := range sub.deliveries {
		m := d.Message
		switch ackAt, acked := firstAck[m]; {
		case !delivered[m]:
			delivered[m] = true
			if k, ordered := orderKey(sub.typ, d); ordered {
				if last, ok := lastFirst[k]; ok && m.N <= last {
					c.fail(Order, sub.region, sub.topic, m, "first delivered to %s after %s:%d", sub.name, m.Producer, last)
				}
				lastFirst[k] = m.N
			}
			if !belongs {
				c.fail(WrongRegion, sub.region, sub.topic, m, "delivered to %s, but the topic belongs in %v", sub.name, c.regions[sub.topic])
			}
		case acked:
			if c.excused(sub.region, ackAt, d.At, excusedBy[m]) {
				excusedBy[m]++
				c.report.WindowRedeliveries++
			} else {
				c.fail(DuplicateDelivered, sub.region, sub.topic, m, "delivered to %s at %s after its ack was confirmed at %s",
					sub.name, d.At.Format("15:04:05.000"), ackAt.Format("15:04:05.000"))
			}
		default:
			c.report.UnackedRedeliveries++
		}
		if !c.sent[topicMessage{sub.topic, m}] {
			c.fail(NeverSent, sub.region, sub.topic, m, "delivered to %s, but no producer sent it", sub.name)
		} else if wasRead && stored[m] == 0 {
			c.fail(NotStored, sub.region, sub.topic, m, "delivered to %s, but not in the region's topic", sub.name)
		}
		if _, ok := firstAck[m]; d.Acked && !ok {
			firstAck[m] = d.AckAt
		}
	}
	c.report.Distinct += len(delivered)
	if belongs {
		for _, m := range c.acked[sub.topic] {
			if _, ok := firstAck[m]; !ok {
				c.fail(Lost, sub.region, sub.topic, m, "acknowledged, but %s never acked it", sub.name)
			}
		}
	}
}

// excused reports whether a delivery at `at` of a message whose ack was
// confirmed at ackAt is the redelivery a disruption in region allows,
// given that used disruptions already excused one each.
func (c *checker) excused(region string, ackAt, at time.Time, used int) bool {
	if used >= len(c.rules.Disruptions) {
		return false
	}
	for _, d := range c.rules.Disruptions {
		if d.Region != "" && d.Region != region {
			continue
		}
		if ackAt.Before(d.End.Add(c.rules.ReconnectWindow)) && d.Start.Sub(ackAt) <= c.rules.RedeliveryWindow && at.After(d.Start) {
			return true
		}
	}
	return false
}
