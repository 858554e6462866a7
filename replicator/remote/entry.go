package remote

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/mledger"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// The reserved properties the replicator adds to the batch-level
// MessageMetadata of every entry it sends are wire.PropReplicationSource
// (the entry's source incarnation and offsets, what the destination
// deduplicates on) and wire.PropReplicationOriginTime (the source's
// broker_timestamp, the first hop of the message's trail), and, for an
// entry sent by a traced replicate span, wire.PropReplicationTraceParent
// (that span's context, which the destination continues). They are stored
// with the destination entry, so that a destination rebuilding its
// deduplication state from its stored entries knows each one's source. Any
// property of these names the original producer wrote is replaced.
// Consumers of a batched entry do not see them (they read each message's
// own properties); a consumer of an unbatched one does.

// outgoing is a stored entry made ready to SEND.
type outgoing struct {
	// message is the rewritten message, from its 0x0e01 magic on, with a
	// fresh checksum.
	message []byte
	// firstIndex and lastIndex are the source indexes of the entry's first
	// and last message: the SEND's sequence_id and highest_sequence_id.
	firstIndex, lastIndex int64
	numMessages           int32
	chunk                 bool
}

// prepare rewrites a stored entry of the source topic's incarnation for the
// destination: replicated_from set to sourceRegion, the reserved properties
// set, everything else kept, the checksum recomputed. The source message's own checksum is verified first:
// a corrupt entry is an error, never forwarded.
//
// With schemas (not nil), schema_version becomes the remote's version of
// the same schema.
func prepare(entry []byte, sourceRegion string, incarnation int64, schemas schemaMap) (outgoing, error) {
	return prepareTraced(entry, sourceRegion, incarnation, schemas, "")
}

// prepareTraced is prepare that, with a traceParent (the replicate span's,
// not ""), also sets wire.PropReplicationTraceParent to it, so that the
// destination's publish continues the trace as a child of the replicate.
func prepareTraced(entry []byte, sourceRegion string, incarnation int64, schemas schemaMap, traceParent string) (outgoing, error) {
	bemBytes, msg, err := mledger.SplitEntry(entry)
	if err != nil {
		return outgoing{}, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	bem := &pb.BrokerEntryMetadata{}
	if err := proto.Unmarshal(bemBytes, bem); err != nil {
		return outgoing{}, fmt.Errorf("%w: BrokerEntryMetadata: %v", ErrBadEntry, err)
	}
	if !bem.HasIndex() {
		return outgoing{}, fmt.Errorf("%w: BrokerEntryMetadata has no index, so the entry has no source position", ErrBadEntry)
	}
	mdBytes, payload, err := wire.SplitMessage(msg)
	if err != nil {
		return outgoing{}, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	md := &pb.MessageMetadata{}
	if err := proto.Unmarshal(mdBytes, md); err != nil {
		return outgoing{}, fmt.Errorf("%w: message metadata: %v", ErrBadEntry, err)
	}
	if from := md.GetReplicatedFrom(); from != "" {
		return outgoing{}, fmt.Errorf("%w: entry %d came from %s", ErrAlreadyReplicated, bem.GetIndex(), from)
	}
	n := int32(1)
	if md.HasNumMessagesInBatch() {
		n = max(md.GetNumMessagesInBatch(), 1)
	}
	last := int64(bem.GetIndex())
	first := last - int64(n) + 1
	if first < 0 {
		return outgoing{}, fmt.Errorf("%w: index %d cannot end a batch of %d messages", ErrBadEntry, last, n)
	}

	if schemas != nil && md.HasSchemaVersion() {
		v, err := schemas.remoteVersion(md.GetSchemaVersion())
		if err != nil {
			return outgoing{}, err
		}
		md.SetSchemaVersion(v)
	}
	md.SetReplicatedFrom(sourceRegion)
	props := make([]*pb.KeyValue, 0, len(md.GetProperties())+3)
	for _, kv := range md.GetProperties() {
		if k := kv.GetKey(); k != wire.PropReplicationSource && k != wire.PropReplicationOriginTime && k != wire.PropReplicationTraceParent {
			props = append(props, kv)
		}
	}
	if traceParent != "" {
		props = append(props, keyValue(wire.PropReplicationTraceParent, traceParent))
	}
	src := wire.ReplicationSource{Incarnation: incarnation, First: first, Last: last}
	props = append(props, keyValue(wire.PropReplicationSource, src.String()))
	if bem.HasBrokerTimestamp() {
		props = append(props, keyValue(wire.PropReplicationOriginTime, strconv.FormatUint(bem.GetBrokerTimestamp(), 10)))
	}
	md.SetProperties(props)
	out, err := wire.AppendMessage(make([]byte, 0, len(msg)+64), md, payload)
	if err != nil {
		return outgoing{}, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	return outgoing{message: out, firstIndex: first, lastIndex: last, numMessages: n, chunk: md.HasChunkId()}, nil
}

func keyValue(k, v string) *pb.KeyValue {
	return pb.KeyValue_builder{Key: proto.String(k), Value: proto.String(v)}.Build()
}
