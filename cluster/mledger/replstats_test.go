package mledger

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

// TestBacklogAfter counts the entries and the messages of batches after a
// cursor, across ledgers, with the oldest entry's broker timestamp.
func TestBacklogAfter(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 2
	ml := e.open(e.factory("owner", cfg), "backlog")
	if b, err := ml.BacklogAfter(t.Context(), Position{}); err != nil || b != (ReplicationBacklog{}) {
		t.Fatalf("empty topic: %+v, %v", b, err)
	}
	start := e.clock.Now()
	var ps []Position
	for i := range 5 {
		md := pb.MessageMetadata_builder{ProducerName: proto.String("p"), SequenceId: proto.Uint64(uint64(i)),
			PublishTime: proto.Uint64(1), NumMessagesInBatch: proto.Int32(3)}.Build()
		msg, err := wire.AppendMessage(nil, md, []byte("batch"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ml.Append(t.Context(), msg, 3)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		e.clock.Advance(time.Second)
	}
	if ps[0].Ledger == ps[4].Ledger {
		t.Fatalf("no rollover: %v", ps)
	}
	for _, c := range []struct {
		after             Position
		entries, messages int64
		oldest            time.Time
	}{
		{Position{}, 5, 15, start},                // a new cursor, before every entry
		{ps[1], 3, 9, start.Add(2 * time.Second)}, // mid-topic, at a ledger's end
		{ps[2], 2, 6, start.Add(3 * time.Second)}, // mid-ledger
		{ps[4], 0, 0, time.Time{}},                // caught up
	} {
		b, err := ml.BacklogAfter(t.Context(), c.after)
		if err != nil {
			t.Fatal(err)
		}
		if b.Entries != c.entries || b.Messages != c.messages || !b.Oldest.Equal(c.oldest.Truncate(time.Millisecond)) {
			t.Errorf("after %v: %+v, want %d entries, %d messages, oldest %v", c.after, b, c.entries, c.messages, c.oldest)
		}
	}
}

// TestReplicationTasks reads the workers' records: the newer record of a
// task that moved wins, other topics and unreadable records are left out.
func TestReplicationTasks(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	now := time.Now()
	put := func(worker string, at time.Time, tasks ...ReplicationTaskState) {
		b, err := EncodeReplicationState(ReplicationWorkerState{Worker: worker, At: at, Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Create(t.Context(), ReplicationStateKey(region, worker), b, meta.NoLease); err != nil {
			t.Fatal(err)
		}
	}
	put("old", now.Add(-time.Second), ReplicationTaskState{Topic: "t", Remote: "west", LastError: "stale"})
	put("new", now, ReplicationTaskState{Topic: "t", Remote: "west", Connected: true},
		ReplicationTaskState{Topic: "other", Remote: "west"})
	put("east-only", now, ReplicationTaskState{Topic: "t", Remote: "east", MsgOutCounter: 7})
	if _, err := mem.Create(t.Context(), ReplicationStateKey(region, "garbled"), []byte("{"), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	got, err := ReplicationTasks(t.Context(), mem, region, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["west"].Connected || got["west"].LastError != "" || got["east"].MsgOutCounter != 7 {
		t.Errorf("got %+v", got)
	}
	if _, err := DecodeReplicationState([]byte(`{"v":2}`)); err == nil {
		t.Error("a record of an unknown version decoded")
	}
}
