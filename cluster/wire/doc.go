// Package wire is the Apache Pulsar binary protocol: the frame codec, the
// CRC32C that guards every message, the batch payload codec and the table that
// maps Pulsar's ServerError codes to Go errors. The protocol messages
// themselves are generated from our own .proto in package pb, which keeps the
// official field numbers (they are the wire contract) under a renamed proto
// package so that it can live in one binary with pulsar-client-go.
//
// A frame on the wire is
//
//	[u32 totalSize][u32 commandSize][BaseCommand]
//
// and a payload frame (SEND, MESSAGE) continues with a message:
//
//	[u16 0x0e01][u32 crc32c][u32 metadataSize][MessageMetadata][payload]
//
// where the CRC32C covers everything after itself. A broker dispatching a
// stored entry may put a BrokerEntryMetadata in front of the message:
//
//	[u16 0x0e02][u32 size][BrokerEntryMetadata][u16 0x0e01]...
//
// A broker stores a SEND's message bytes from the 0x0e01 magic onward and sends
// them back unchanged on dispatch, so the client's checksum still holds.
//
// Nothing here does I/O beyond the io.Reader and io.Writer it is given, and
// nothing here keeps state across connections.
//
// frame.go holds the frame and message codec and the checksum, batch.go the
// batch payload codec, and servererror.go the ServerError table. Two files
// read what Meridian itself adds to a message's metadata: replication.go the
// reserved properties a replicator adds to a replicated entry (its source,
// its origin time, the replicate span's trace context), and trace.go the
// trace context a broker continues for an entry, from the decoded metadata
// or straight from its bytes.
package wire
