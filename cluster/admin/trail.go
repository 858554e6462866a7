package admin

import (
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/telemetry"
)

// The headers of a message lookup (get-message-by-id, peek) that carry the
// entry's BrokerEntryMetadata, as Pulsar's admin names them, and its hop
// trail (telemetry.Trail), Meridian's own.
const (
	headerBrokerTimestamp = "X-Pulsar-Broker-Entry-METADATA-timestamp"
	headerBrokerIndex     = "X-Pulsar-Broker-Entry-METADATA-index"
	// headerOriginTimestamp is the origin region's broker_timestamp of a
	// replicated entry, milliseconds since the epoch.
	headerOriginTimestamp = "X-Meridian-Origin-Broker-Timestamp"
	// headerTrail is the trail, place=milliseconds, in causal order.
	headerTrail = "X-Meridian-Hop-Trail"
)

// setTrailHeaders writes the BrokerEntryMetadata and hop-trail headers of
// an entry stored in region with BrokerEntryMetadata bem (nil: none) and
// metadata md. A malformed BrokerEntryMetadata leaves its headers out
// rather than fail the lookup: the message itself is intact.
func setTrailHeaders(hd http.Header, region string, bem []byte, md *pb.MessageMetadata) {
	var brokerTime time.Time
	if bem != nil {
		m := &pb.BrokerEntryMetadata{}
		if proto.Unmarshal(bem, m) == nil {
			if m.HasBrokerTimestamp() {
				hd.Set(headerBrokerTimestamp, strconv.FormatUint(m.GetBrokerTimestamp(), 10))
				brokerTime = time.UnixMilli(int64(m.GetBrokerTimestamp()))
			}
			if m.HasIndex() {
				hd.Set(headerBrokerIndex, strconv.FormatUint(m.GetIndex(), 10))
			}
		}
	}
	var originTime time.Time
	if md.HasReplicatedFrom() {
		for _, kv := range md.GetProperties() {
			if kv.GetKey() == wire.PropReplicationOriginTime {
				if at, ok := telemetry.ParseMillis(kv.GetValue()); ok {
					originTime = at
					hd.Set(headerOriginTimestamp, kv.GetValue())
				}
			}
		}
	}
	var publishTime time.Time
	if md.GetPublishTime() != 0 {
		publishTime = time.UnixMilli(int64(md.GetPublishTime()))
	}
	trail := telemetry.NewTrail(publishTime, md.GetReplicatedFrom(), originTime, region, brokerTime)
	if len(trail) > 0 {
		hd.Set(headerTrail, trail.Header())
	}
}
