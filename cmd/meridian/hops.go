package main

import (
	"io"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/telemetry"
)

// hopsRegion names, in `meridian consume --hops`, the region the consumer
// reads from: the client is not told its name.
const hopsRegion = "local"

// trailOf is the hop trail (telemetry.Trail) of msg received at received:
// the producer's publish time; for a replicated message, the origin
// region's broker time, from the reserved property the replicator adds;
// this region's broker time (BrokerEntryMetadata); and the receipt. The
// consumer of a batched entry does not see the batch-level properties, so
// a replicated message that came in a batch has no origin time: missing
// says so.
func trailOf(msg pulsar.Message, received time.Time) (trail telemetry.Trail, missing string) {
	origin := msg.GetReplicatedFrom()
	var originTime time.Time
	if origin != "" {
		var ok bool
		if originTime, ok = telemetry.ParseMillis(msg.Properties()[wire.PropReplicationOriginTime]); !ok {
			missing = " (the time " + origin + " stored it is not in a batched message's properties: " +
				"get-message-by-id shows it in X-Meridian-Hop-Trail)"
		}
	}
	var brokerTime time.Time
	if t := msg.BrokerPublishTime(); t != nil {
		brokerTime = *t
	}
	return telemetry.NewTrail(msg.PublishTime(), origin, originTime, hopsRegion, brokerTime).Received(received), missing
}

// writeHops prints msg's trail on one line after the message:
//
//	hops: producer 2026-01-02T15:04:05.100Z -> us-east 2026-01-02T15:04:05.102Z (+2ms) -> local ... (+29ms) -> consumer ... (+2ms)
func writeHops(w io.Writer, msg pulsar.Message, received time.Time) {
	trail, missing := trailOf(msg, received)
	_, _ = io.WriteString(w, "hops: "+trail.String()+missing+"\n")
}
