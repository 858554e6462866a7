package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// The reserved message properties a replicator adds to the MessageMetadata
// of each entry it publishes to another region (DESIGN §6), next to
// replicated_from, as Pulsar's replicator adds __MSG_PROP_REPL_SOURCE_POSITION.
// Nothing else of the entry changes.
const (
	// PropReplicationSource is the entry's place in its source topic, a
	// ReplicationSource: what the destination deduplicates on, stored with
	// the entry so that a reload of the destination topic rebuilds it.
	PropReplicationSource = "__MERIDIAN_REPL_SOURCE"
	// PropReplicationOriginTime is the origin broker's broker_timestamp
	// (milliseconds since the epoch) of the entry: when it was stored in
	// the region it was published in, the first hop of its trail.
	PropReplicationOriginTime = "__MERIDIAN_REPL_ORIGIN_BROKER_TIMESTAMP"
	// PropReplicationTraceParent is the W3C traceparent of the replicate
	// span that sent the entry, set only when the entry carries a
	// traceparent of its own (telemetry.PropTraceParent): the destination
	// continues the trace from it, so that its publish is a child of the
	// replicate, while the original traceparent stays as the producer
	// wrote it.
	PropReplicationTraceParent = "__MERIDIAN_REPL_TRACEPARENT"
)

// LookupPropertyReplication is the LOOKUP property (CommandLookupTopic's
// properties, Pulsar's lookupProperties) by which a replicator marks its
// lookups; its value is the source region. A broker answers such a lookup
// with its own region's owner of the topic, whatever the namespace's
// active region: replication must reach every region of the set, and the
// redirect to the active region exists for clients (DESIGN §6). It grants
// nothing a client could not have by connecting to the region's brokers
// itself: it only chooses which answer the lookup gets.
const LookupPropertyReplication = "__MERIDIAN_REPL_LOOKUP"

// ReplicationSource is where a replicated entry came from in its origin
// region: the source topic's incarnation (its managed-ledger record's
// creation revision, so that a topic deleted and created again, whose
// offsets start again at 0, is told apart) and the topic-wide offsets of the
// entry's first and last message (its BrokerEntryMetadata index, minus the
// batch size plus one, and that index). The origin region is the entry's
// replicated_from; the topic is the destination's own name.
type ReplicationSource struct {
	Incarnation int64
	First, Last int64
}

// String is the property's value: "incarnation:first:last".
func (s ReplicationSource) String() string {
	return fmt.Sprintf("%d:%d:%d", s.Incarnation, s.First, s.Last)
}

// ParseReplicationSource reads a PropReplicationSource value.
func ParseReplicationSource(v string) (ReplicationSource, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return ReplicationSource{}, fmt.Errorf("wire: replication source %q is not incarnation:first:last", v)
	}
	var n [3]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil || x < 0 {
			return ReplicationSource{}, fmt.Errorf("wire: replication source %q: %q is not a non-negative integer", v, p)
		}
		n[i] = x
	}
	if n[1] > n[2] {
		return ReplicationSource{}, fmt.Errorf("wire: replication source %q: first offset above last", v)
	}
	return ReplicationSource{Incarnation: n[0], First: n[1], Last: n[2]}, nil
}

// ReplicationSourceOf reads the replication source of md; ok is false when
// md carries none (an entry that was not replicated).
func ReplicationSourceOf(md *pb.MessageMetadata) (src ReplicationSource, ok bool, err error) {
	for _, kv := range md.GetProperties() {
		if kv.GetKey() == PropReplicationSource {
			src, err = ParseReplicationSource(kv.GetValue())
			return src, err == nil, err
		}
	}
	return ReplicationSource{}, false, nil
}
