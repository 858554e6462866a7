package bookie

import (
	"context"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// gcLoop runs collectGarbage every GCInterval.
func (b *Bookie) gcLoop(ctx context.Context) {
	t := b.clock.NewTicker(b.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if n, err := b.CollectGarbage(ctx); err != nil {
				b.log.Warn("ledger garbage collection failed", "err", err)
			} else if n > 0 {
				b.log.Info("garbage-collected ledgers", "deleted", n)
			}
		}
	}
}

// CollectGarbage deletes the local ledgers whose metadata key
// (bkproto.LedgerKey) no longer exists, and returns how many it deleted.
// Deleting a ledger means deleting its metadata (DESIGN §4); bookies reclaim
// the space lazily, here: the ledger's index entries go at once, and each
// checkpointed journal file left without a live entry is deleted. Files still
// partly live wait for the compactor.
//
// Why it cannot delete a live ledger: the local ledger set is snapshotted
// before the metadata is listed, and a writer creates a ledger's metadata
// before its first add. So every ledger in the snapshot had its key created
// before the listing began, and a linearizable listing that lacks the key
// proves it was deleted.
func (b *Bookie) CollectGarbage(ctx context.Context) (int, error) {
	if b.cfg.Meta == nil {
		return 0, nil
	}
	local := b.store.ledgerIDs()
	if len(local) == 0 {
		return 0, nil
	}
	prefix := bkproto.LedgersPrefix(b.cfg.Region)
	kvs, _, err := b.cfg.Meta.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", prefix, err)
	}
	live := make(map[int64]bool, len(kvs))
	for _, kv := range kvs {
		if id, ok := bkproto.ParseLedgerKey(b.cfg.Region, kv.Key); ok {
			live[id] = true
		}
	}
	deleted := 0
	b.store.maint.Lock()
	defer b.store.maint.Unlock()
	for _, id := range local {
		if live[id] {
			continue
		}
		if err := b.store.deleteLedgerInMaint(id); err != nil {
			b.fatal(err)
			return deleted, err
		}
		b.m.ledgerDeleted()
		b.log.Info("deleted ledger whose metadata is gone", "ledger", id)
		deleted++
	}
	if deleted > 0 {
		// The index deletions must be durable before the files go, or
		// a crash would bring back ledgers whose entries are gone. The
		// flush (of a memtable of small index entries, once per pass)
		// also keeps the deleted ledgers from coming back after a
		// crash, except for their records the journal still replays.
		if err := b.store.flush(); err != nil {
			b.fatal(err)
			return deleted, err
		}
		b.store.reclaimInMaint()
	}
	return deleted, nil
}
