package wire

import (
	"google.golang.org/protobuf/encoding/protowire"

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

// The field numbers TraceParentInMetadata reads (PulsarApi.proto).
const (
	fieldMetadataProperties = 4 // MessageMetadata.properties
	fieldKeyValueKey        = 1
	fieldKeyValueValue      = 2
)

// TraceParentInMetadata is TraceParentOf on a MessageMetadata's encoded
// bytes, without decoding them: it walks the top-level fields and the
// properties only, and returns the value as a slice of metadata (nil when
// there is none, or the bytes do not parse). It does not allocate, so the
// broker can look at every SEND for a traceparent for free.
func TraceParentInMetadata(metadata []byte) []byte {
	var own []byte
	for b := metadata; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num != fieldMetadataProperties || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		kv, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		key, value, ok := keyValue(kv)
		switch {
		case !ok:
			return nil
		case string(key) == PropReplicationTraceParent:
			return value
		case string(key) == telemetry.PropTraceParent:
			own = value
		}
	}
	return own
}

// keyValue reads an encoded KeyValue.
func keyValue(b []byte) (key, value []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != fieldKeyValueKey && num != fieldKeyValueValue) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, nil, false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		if num == fieldKeyValueKey {
			key = v
		} else {
			value = v
		}
	}
	return key, value, true
}
