// Package remote is the replicator's producer: a Pulsar-protocol client on
// cluster/wire that publishes a topic's stored entries, whole, to the same
// topic in another region.
//
// pulsar-client-go cannot do this job: it re-batches messages and stamps
// its own publish_time. A Producer instead takes each entry as the managed
// ledger stored it,
//
//	[0x0e02][size][BrokerEntryMetadata][0x0e01][crc32c][metaSize][MessageMetadata][payload]
//
// and sends the message unchanged (batch, compression, keys, properties,
// event time, publish_time and original producer name) except for these:
// replicated_from becomes the source region; the reserved properties
// wire.PropReplicationSource and wire.PropReplicationOriginTime are added to
// the batch-level metadata, and wire.PropReplicationTraceParent too for an
// entry sent under a replicate span; with the source's schemas given,
// schema_version becomes the remote topic's version of the same schema; and
// the checksum is recomputed. The SEND's sequence_id and highest_sequence_id
// are the entry's first and last message index in the source topic (from its
// BrokerEntryMetadata index), which is what the destination deduplicates on
// (DESIGN §6).
//
// A Producer is one connection and one PRODUCER named
// meridian.repl.<source-region>, opened by Open after a LOOKUP on the
// remote region's broker service URL (redirects followed) and, with the
// source's schemas given, after registering each of them on the remote
// topic. The LOOKUP carries wire.LookupPropertyReplication, so that the
// remote region answers with its own owner of the topic even when the
// namespace's active region is another: otherwise the entries meant for
// the remote would land in the active region, and the remote would never
// get them. Entries are pipelined within a window bounded by count and bytes;
// each Send returns a Receipt that completes when the remote broker's
// SEND_RECEIPT arrives, and only then may the caller move its replication
// cursor. The Producer never
// reconnects by itself: a SEND_ERROR, a CLOSE_PRODUCER from the broker, a
// lost connection or Close fails every entry still in flight, Done is
// closed and Err says why. The caller (the replication task) then opens a
// new Producer, with backoff, and resends from its cursor; the destination
// drops what it already stored, so nothing is lost and nothing doubles.
//
// producer.go holds the Producer, Open and its lookup; session.go is one
// handshaken connection, authenticated as auth.go reads the remote's
// cluster record. entry.go rewrites an entry for the remote, schema.go
// registers the source's schemas there, and trace.go reads the replicate
// span's context for the entry.
//
// Its locks are ordered with the rest of the process's in docs/lock-order.md.
package remote
