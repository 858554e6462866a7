package mledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// TestExternalCursorGuardedFrozenWorker: a worker frozen past its lease,
// whose task the next worker took (the task key expired and was created
// again), has its late write refused even though the cursor has not moved
// since; the new holder keeps writing, and the owner's watch follows it.
func TestExternalCursorGuardedFrozenWorker(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	e := newEnvOn(t, mem, 3)
	ml := e.open(e.factory("owner", testConfig()), "repl")
	ps := appendSeqs(t, ml, 0, 5)
	ctx := t.Context()
	const name = "meridian.repl.eu-west"
	taskKey := meta.RegionKey(region, "replicators", "repl-eu-west")

	lease1, err := mem.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	task1, err := mem.Create(ctx, taskKey, []byte("worker-1"), lease1.ID())
	if err != nil {
		t.Fatal(err)
	}
	old, err := OpenExternalCursor(ctx, mem, region, "repl", name, Position{ps[0].Ledger, -1}, WithGuard(taskKey, task1))
	if err != nil {
		t.Fatal(err)
	}
	if err := old.MarkDelete(ctx, ps[1]); err != nil {
		t.Fatal(err)
	}

	// worker-1 freezes; its lease expires and worker-2 takes the task.
	if !mem.Expire(lease1.ID()) {
		t.Fatal("lease of worker-1 already gone")
	}
	lease2, err := mem.Grant(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	task2, err := mem.Create(ctx, taskKey, []byte("worker-2"), lease2.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExternalCursor(ctx, mem, region, "repl", name, Position{}, WithGuard(taskKey, task1)); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("open with a task key that was re-created: %v, want ErrOwnershipLost", err)
	}
	cur, err := OpenExternalCursor(ctx, mem, region, "repl", name, Position{}, WithGuard(taskKey, task2))
	if err != nil {
		t.Fatal(err)
	}
	if got := cur.MarkDeletePosition(); got != ps[1] {
		t.Fatalf("new holder opened at %v, want %v", got, ps[1])
	}

	// worker-1 resumes before worker-2 has written: the cursor key is where
	// worker-1 left it, only the guard tells.
	if err := old.MarkDelete(ctx, ps[3]); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("frozen worker's late write: %v, want ErrOwnershipLost", err)
	}
	if got := storedMarkDelete(t, mem, "repl", name); got != ps[1] {
		t.Fatalf("the refused write moved the cursor to %v", got)
	}
	for _, p := range ps[2:] {
		if err := cur.MarkDelete(ctx, p); err != nil {
			t.Fatalf("new holder's write of %v: %v", p, err)
		}
	}
	if err := old.MarkDelete(ctx, ps[4]); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("frozen worker's second write: %v, want ErrOwnershipLost", err)
	}
	if got := storedMarkDelete(t, mem, "repl", name); got != ps[4] {
		t.Fatalf("stored %v, want the new holder's %v", got, ps[4])
	}
	testkit.WaitFor(t, "the owner's watch to see the new holder's write", func() bool {
		return ml.ForeignCursors()[name] == ps[4]
	})
}

func storedMarkDelete(t testing.TB, store meta.Store, topic, name string) Position {
	t.Helper()
	kv, err := store.Get(t.Context(), CursorKey(region, topic, name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeCursor(kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return v.MarkDelete
}

// TestDeleteExternalCursorFreesRetention: deleting a foreign cursor (a
// region removed from replication) releases the ledgers it pinned.
func TestDeleteExternalCursorFreesRetention(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 10
	cfg.RetentionTime, cfg.RetentionSize = 0, 0
	ml := e.open(e.factory("owner", cfg), "unrepl")
	const name = "meridian.repl.ap-south"
	taskKey := meta.RegionKey(region, "replicators", "unrepl-ap-south")
	taskRev, err := e.store.Create(t.Context(), taskKey, []byte("worker"), meta.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	repl, err := OpenExternalCursor(t.Context(), e.store, region, "unrepl", name, Position{ml.Ledgers()[0], -1}, WithGuard(taskKey, taskRev))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the watch to see the foreign cursor", func() bool { _, ok := ml.ForeignCursors()[name]; return ok })
	appendSeqs(t, ml, 0, 35)
	settle(t, ml)
	ledgers := ml.Ledgers()
	if len(ledgers) < 4 {
		t.Fatalf("%d ledgers, want 4 or more", len(ledgers))
	}
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); !slices.Equal(got, ledgers) {
		t.Fatalf("the foreign cursor did not pin its ledgers: %v -> %v", ledgers, got)
	}

	if err := DeleteExternalCursor(t.Context(), e.store, region, "unrepl", name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(t.Context(), CursorKey(region, "unrepl", name)); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("cursor still stored: %v", err)
	}
	testkit.WaitFor(t, "the watch to see the deletion", func() bool { _, ok := ml.ForeignCursors()[name]; return !ok })
	if err := ml.Trim(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ml.Ledgers(); len(got) != 1 || got[0] != ledgers[len(ledgers)-1] {
		t.Fatalf("after the foreign cursor was deleted: %v, want only %d", got, ledgers[len(ledgers)-1])
	}
	// Deleting it again is not an error; its old writer cannot bring it
	// back.
	if err := DeleteExternalCursor(t.Context(), e.store, region, "unrepl", name); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := repl.MarkDelete(context.Background(), Position{ledgers[1], 0}); !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("write to a deleted cursor: %v, want ErrOwnershipLost", err)
	}
}

// racingDeleter deletes the key itself just before the caller's Delete, as
// a second process deleting the same cursor does.
type racingDeleter struct{ meta.Store }

func (s racingDeleter) Delete(ctx context.Context, key string, modRev int64) error {
	if err := s.Store.Delete(ctx, key, modRev); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key, modRev) // the caller's, now a conflict
}

// TestDeleteExternalCursorRacingDelete: when the topic's owner and a worker
// delete a removed region's cursor at once, the one that loses the race
// succeeds too: the cursor is gone, as asked. (The owner took the loss for
// a failure and then never created the cursor again when the region came
// back.)
func TestDeleteExternalCursorRacingDelete(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := OpenExternalCursor(t.Context(), mem, region, "raced", "meridian.repl.west", Position{}); err != nil {
		t.Fatal(err)
	}
	if err := DeleteExternalCursor(t.Context(), racingDeleter{mem}, region, "raced", "meridian.repl.west"); err != nil {
		t.Fatalf("a delete that lost the race to another delete: %v", err)
	}
	if _, err := mem.Get(t.Context(), CursorKey(region, "raced", "meridian.repl.west")); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the cursor is still there: %v", err)
	}
}
