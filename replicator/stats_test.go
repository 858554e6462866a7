package replicator

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/mledger"
)

// TestStateBoard: the board writes one record per worker under its lease,
// skips writes when nothing changed, and after its lease is lost writes the
// record again under the next one.
func TestStateBoard(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b := newStateBoard("east", "w1", mem, time.Second, clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	key := mledger.ReplicationStateKey("east", "w1")
	read := func() (mledger.ReplicationWorkerState, meta.KV) {
		t.Helper()
		kv, err := mem.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		s, err := mledger.DecodeReplicationState(kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		return s, kv
	}

	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Get(ctx, key); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("a board without a lease wrote its record: %v", err)
	}
	lease, err := mem.Grant(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.setLease(lease.ID())
	st := newTaskStats(taskID{Topic: "persistent://t/n/a", Remote: "west"})
	b.add(st)
	st.connected("pulsar://west:6650", time.Now())
	st.acknowledged(10, 1000)
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	s, kv := read()
	if kv.Lease != lease.ID() || s.Worker != "w1" || len(s.Tasks) != 1 || !s.Tasks[0].Connected || s.Tasks[0].MsgOutCounter != 10 {
		t.Fatalf("record %+v under lease %v", s, kv.Lease)
	}
	if !s.At.Equal(clock.Now()) {
		t.Fatalf("record stamped %v, want the board's clock's %v", s.At, clock.Now())
	}

	// Nothing changed (the rates are 0 again only once): one more write
	// for the rates, then none.
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	_, kv = read()
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, again := read(); again.ModRevision != kv.ModRevision {
		t.Errorf("an unchanged state was written again")
	}

	st.failed(errors.New("remote refused"), time.Now())
	st.disconnected()
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(); s.Tasks[0].Connected || s.Tasks[0].LastError != "remote refused" {
		t.Errorf("after a failure: %+v", s.Tasks[0])
	}

	// The lease ends (the worker lost etcd): the record goes with it, and
	// the next lease brings it back.
	if err := mem.Revoke(ctx, lease.ID()); err != nil {
		t.Fatal(err)
	}
	next, err := mem.Grant(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.setLease(next.ID())
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if _, kv := read(); kv.Lease != next.ID() {
		t.Errorf("record under lease %v, want %v", kv.Lease, next.ID())
	}
	b.remove(st)
	if err := b.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(); len(s.Tasks) != 0 {
		t.Errorf("a removed task is still published: %+v", s.Tasks)
	}
}
