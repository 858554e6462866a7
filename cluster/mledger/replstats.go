package mledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// The replication state record. A replicator worker writes the state of
// every task it runs into one key of its own (ReplicationStateKey), at
// most once per publish interval and under its lease, so a dead worker's
// record vanishes with it. The broker that answers a topic's stats reads
// these records, wherever the workers run. The type lives here, next to
// the external cursor protocol it reports on, because both sides may
// import this package: the replicator may not import the broker, and the
// broker may not import the replicator.

// ReplicationCursorPrefix names the replication cursors of a topic:
// ReplicationCursorPrefix + remote region is the cursor of the topic's
// replication to that region.
const ReplicationCursorPrefix = "meridian.repl."

// replicationStateVersion is the version of the record's encoding.
const replicationStateVersion = 1

// ReplicationWorkerState is one worker's record: the state of the tasks it
// runs, as of At.
type ReplicationWorkerState struct {
	V      int                    `json:"v"`
	Worker string                 `json:"worker"`
	At     time.Time              `json:"at"`
	Tasks  []ReplicationTaskState `json:"tasks"`
}

// ReplicationTaskState is the state of the replication of one source topic
// (partition) to one remote region, as its worker sees it.
type ReplicationTaskState struct {
	Topic  string `json:"topic"`
	Remote string `json:"remote"`
	// Connected: the producer to the remote region is open.
	Connected bool `json:"connected"`
	// OutboundConnection is the remote broker the producer is connected
	// to, OutboundConnectedSince when it connected (zero when not).
	OutboundConnection     string    `json:"outboundConnection,omitempty"`
	OutboundConnectedSince time.Time `json:"outboundConnectedSince,omitzero"`
	// MsgOutCounter and BytesOutCounter count what the remote
	// acknowledged since the task started on this worker; MsgRateOut and
	// MsgThroughputOut are their rates per second over the last publish
	// interval.
	MsgOutCounter    int64   `json:"msgOutCounter"`
	BytesOutCounter  int64   `json:"bytesOutCounter"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	// MsgExpiredCounter counts the messages the task skipped because
	// their message TTL had passed when it read them, and MsgRateExpired
	// is its rate per second over the last publish interval.
	MsgExpiredCounter int64   `json:"msgExpiredCounter"`
	MsgRateExpired    float64 `json:"msgRateExpired"`
	// MarkDelete is the cursor's position as the task last wrote it.
	MarkDelete Position `json:"markDelete"`
	// LastError is the last failure of the task (empty when none since
	// it started), and LastErrorAt when it happened. It stays after a
	// recovery, as Pulsar's lastError does, so an operator sees why the
	// link dropped.
	LastError   string    `json:"lastError,omitempty"`
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
}

// ReplicationStateKey is the key of worker's record in region.
func ReplicationStateKey(region, worker string) string {
	return meta.RegionKey(region, "replicator-stats", worker)
}

// ReplicationStatePrefix is the prefix of every worker's record in region.
func ReplicationStatePrefix(region string) string {
	return meta.Prefix(meta.RegionKey(region, "replicator-stats"))
}

// EncodeReplicationState encodes a worker's record, setting its version.
func EncodeReplicationState(s ReplicationWorkerState) ([]byte, error) {
	s.V = replicationStateVersion
	return json.Marshal(s)
}

// DecodeReplicationState decodes a worker's record.
func DecodeReplicationState(b []byte) (ReplicationWorkerState, error) {
	var s ReplicationWorkerState
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%w: replication state: %v", ErrBadMetadata, err)
	}
	if s.V != replicationStateVersion {
		return s, fmt.Errorf("%w: replication state version %d, want %d", ErrBadMetadata, s.V, replicationStateVersion)
	}
	return s, nil
}

// ReplicationTasks reads every worker's record in region and returns the
// state of topic's tasks by remote region. When two workers report the
// same task (it just moved), the newer record wins. Unreadable records are
// skipped: they are one worker's, and must not hide the others'.
func ReplicationTasks(ctx context.Context, store meta.Store, region, topic string) (map[string]ReplicationTaskState, error) {
	all, err := AllReplicationTasks(ctx, store, region)
	if err != nil {
		return nil, fmt.Errorf("replication state of %s: %w", topic, err)
	}
	if out := all[topic]; out != nil {
		return out, nil
	}
	return map[string]ReplicationTaskState{}, nil
}

// AllReplicationTasks is ReplicationTasks for every topic of region at
// once, by topic and then remote region: one read of the workers' records,
// for the metrics of every loaded topic.
func AllReplicationTasks(ctx context.Context, store meta.Store, region string) (map[string]map[string]ReplicationTaskState, error) {
	kvs, _, err := store.List(ctx, ReplicationStatePrefix(region))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]ReplicationTaskState{}
	at := map[[2]string]time.Time{}
	for _, kv := range kvs {
		s, err := DecodeReplicationState(kv.Value)
		if err != nil {
			continue
		}
		for _, t := range s.Tasks {
			key := [2]string{t.Topic, t.Remote}
			if prev, seen := at[key]; seen && !s.At.After(prev) {
				continue
			}
			if out[t.Topic] == nil {
				out[t.Topic] = map[string]ReplicationTaskState{}
			}
			out[t.Topic][t.Remote], at[key] = t, s.At
		}
	}
	return out, nil
}

// ReplicationBacklog is what a replication cursor has yet to send.
type ReplicationBacklog struct {
	// Entries and Messages count the entries after the cursor, and the
	// messages in them (a batch counts its messages, as Pulsar's
	// replicationBacklog does).
	Entries, Messages int64
	// Oldest is the broker timestamp of the first entry after the cursor;
	// zero when there is none.
	Oldest time.Time
}

// EntriesAfter counts the stored entries after position p up to the last
// confirmed one, from the ledger list alone (no read): the backlog of a
// cursor at p, in entries.
func (ml *ManagedLedger) EntriesAfter(p Position) int64 {
	v := ml.snapshot()
	last := v.last()
	if !p.Less(last) {
		return 0
	}
	if p.Less(v.origin()) {
		p = v.origin()
	}
	return v.count(p, last)
}

// BacklogAfter returns the backlog of a cursor at markDelete: the entries
// after it up to the last confirmed one. It reads at most two entries (the
// first after the cursor and the last), usually from the cache: messages
// are counted from their BrokerEntryMetadata indexes, which number the
// topic's messages.
func (ml *ManagedLedger) BacklogAfter(ctx context.Context, markDelete Position) (ReplicationBacklog, error) {
	v := ml.snapshot()
	last := v.last()
	if !markDelete.Less(last) {
		return ReplicationBacklog{}, nil
	}
	from := markDelete
	if from.Less(v.origin()) {
		from = v.origin() // trimmed up to the cursor: what is left is all backlog
	}
	first, ok := v.next(from)
	if !ok {
		return ReplicationBacklog{}, nil
	}
	b := ReplicationBacklog{Entries: v.count(from, last)}
	es, err := ml.read(ctx, []Position{first, last})
	if err != nil {
		return b, fmt.Errorf("backlog after %v: %w", markDelete, err)
	}
	firstMeta, err := entryMetadata(es[0].Data)
	if err == nil && !firstMeta.HasIndex() {
		err = fmt.Errorf("%w: BrokerEntryMetadata has no index", ErrBadEntry)
	}
	if err != nil {
		return b, fmt.Errorf("backlog after %v: entry %v: %w", markDelete, first, err)
	}
	lastIndex, err := EntryIndex(es[1].Data)
	if err != nil {
		return b, fmt.Errorf("backlog after %v: entry %v: %w", markDelete, last, err)
	}
	b.Oldest = time.UnixMilli(int64(firstMeta.GetBrokerTimestamp()))
	// The first entry's index is that of its last message: the backlog
	// starts numMessages-1 before it.
	_, msg, err := es[0].Split()
	if err != nil {
		return b, fmt.Errorf("backlog after %v: entry %v: %w", markDelete, first, err)
	}
	md, err := wire.DecodeMessageMetadata(msg)
	if err != nil {
		return b, fmt.Errorf("backlog after %v: entry %v: %w", markDelete, first, err)
	}
	inFirst := int64(max(md.GetNumMessagesInBatch(), 1))
	b.Messages = lastIndex - int64(firstMeta.GetIndex()) + inFirst
	return b, nil
}
