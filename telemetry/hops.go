package telemetry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The hop trail (DESIGN §6) tells where a message has been, and when,
// without its payload being rewritten. Its hops, in causal order:
//
//  1. the producer: the message's publish_time, stamped by the client;
//  2. the origin region: the broker_timestamp its broker stored the entry
//     with (BrokerEntryMetadata); a replicated entry carries it to the
//     destination in a reserved property (cluster/wire's
//     PropReplicationOriginTime);
//  3. for a replicated message, the destination region: the
//     broker_timestamp of the destination's own stored entry;
//  4. the consumer: when it received the message.
//
// Each hop's latency is its time less the previous hop's. The producer's
// and the consumer's clocks are not the brokers', so a hop across machines
// may show the clocks' skew, even a negative latency.

// Hop is one point of a message's trail: a place (HopProducer, a region's
// name, HopConsumer) and the time the message was there.
type Hop struct {
	Place string
	At    time.Time
}

// The places of the trail's ends.
const (
	HopProducer = "producer"
	HopConsumer = "consumer"
)

// Trail is a message's hops, in causal order.
type Trail []Hop

// NewTrail is the trail of a message as its stored entry tells it:
// published by the producer at publishTime, stored in region at
// brokerTime, and, when the message came by replication (origin is its
// replicated_from, not ""), stored in origin at originTime before. A zero
// time is a hop the entry does not tell (no BrokerEntryMetadata, or an
// origin time the consumer of a batch cannot see), left out.
func NewTrail(publishTime time.Time, origin string, originTime time.Time, region string, brokerTime time.Time) Trail {
	var t Trail
	add := func(place string, at time.Time) {
		if !at.IsZero() {
			t = append(t, Hop{Place: place, At: at})
		}
	}
	add(HopProducer, publishTime)
	if origin != "" {
		add(origin, originTime)
	}
	add(region, brokerTime)
	return t
}

// Received is the trail with the consumer's receipt at at as its last hop.
func (t Trail) Received(at time.Time) Trail {
	return append(t[:len(t):len(t)], Hop{Place: HopConsumer, At: at})
}

// hopTimeLayout prints a hop's time in UTC to the millisecond the protocol
// carries.
const hopTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// String is the trail as `meridian consume --hops` prints it: the path,
// each place with its time and the latency from the place before, e.g.
//
//	producer 2026-01-02T15:04:05.100Z -> us-east 2026-01-02T15:04:05.102Z (+2ms) -> eu-west 2026-01-02T15:04:05.131Z (+29ms) -> consumer 2026-01-02T15:04:05.133Z (+2ms)
func (t Trail) String() string {
	var b strings.Builder
	for i, h := range t {
		if i > 0 {
			b.WriteString(" -> ")
		}
		fmt.Fprintf(&b, "%s %s", h.Place, h.At.UTC().Format(hopTimeLayout))
		if i > 0 {
			d := h.At.Sub(t[i-1].At)
			sign := "+"
			if d < 0 {
				sign, d = "-", -d
			}
			fmt.Fprintf(&b, " (%s%s)", sign, d.Round(time.Millisecond/10))
		}
	}
	return b.String()
}

// Header is the trail as an HTTP header value, place=milliseconds since
// the epoch, in order: "producer=1700000000100, us-east=1700000000102".
func (t Trail) Header() string {
	parts := make([]string, len(t))
	for i, h := range t {
		parts[i] = h.Place + "=" + strconv.FormatInt(h.At.UnixMilli(), 10)
	}
	return strings.Join(parts, ", ")
}

// ParseMillis reads a time written as milliseconds since the epoch (a
// broker_timestamp, as the reserved property carries it); ok is false for
// anything else, and for 0.
func ParseMillis(v string) (at time.Time, ok bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
