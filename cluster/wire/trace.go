package wire

import (
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/telemetry"
)

// TraceParentOf returns the trace context a broker continues for an entry
// with metadata md: the replicate span's (PropReplicationTraceParent) for
// an entry that came by replication, else the producer's
// (telemetry.PropTraceParent); "" when md carries neither. It reads the
// batch-level properties only, so a batch is traced through its first
// message, and it does not allocate.
func TraceParentOf(md *pb.MessageMetadata) string {
	var own string
	for _, kv := range md.GetProperties() {
		switch kv.GetKey() {
		case PropReplicationTraceParent:
			return kv.GetValue()
		case telemetry.PropTraceParent:
			own = kv.GetValue()
		}
	}
	return own
}
