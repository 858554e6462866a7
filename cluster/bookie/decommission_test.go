package bookie

import (
	"testing"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

// TestDecommissionTurnsReadOnly: an operator's decommission makes the
// bookie refuse writers' adds and register as read-only, so that writers
// and placement move off it, while reads and recovery adds go on; clearing
// the state makes it writable again.
func TestDecommissionTurnsReadOnly(t *testing.T) {
	ctx := testCtx(t)
	store := metatest.Memory(t)
	cfg := testConfig(t, t.TempDir(), store)
	b := startBookie(t, cfg)
	key := bkproto.BookieKey(cfg.Region, cfg.ID)
	watch := store.Watch(ctx, key, 0)
	c := dial(t, b.Addr())
	mustAdd(t, ctx, c, 1, 0, 100)
	waitRegistration(t, ctx, store, key, watch, false)

	stateKey := bkproto.BookieStateKey(cfg.Region, cfg.ID)
	rev, err := store.Create(ctx, stateKey, bkproto.BookieState{State: bkproto.StateDecommissioning}.Marshal(), meta.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	waitRegistration(t, ctx, store, key, watch, true)
	err = c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: 1, LastAddConfirmed: 0, Payload: payloadOf(1, 1, 100)})
	wantErr(t, "a writer's add to a decommissioning bookie", err, bkproto.ErrReadOnly)
	if err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: 1, LastAddConfirmed: 0, Recovery: true,
		Payload: payloadOf(1, 1, 100)}); err != nil {
		t.Fatalf("a recovery add to a decommissioning bookie: %v", err)
	}
	mustRead(t, ctx, c, 1, 0, 100)
	mustRead(t, ctx, c, 1, 1, 100)
	if b.ReadOnly() {
		t.Fatal("ReadOnly says the disk is full; only the decommission refuses adds")
	}

	if err := store.Delete(ctx, stateKey, rev); err != nil {
		t.Fatal(err)
	}
	waitRegistration(t, ctx, store, key, watch, false)
	mustAdd(t, ctx, c, 1, 2, 100)
}
