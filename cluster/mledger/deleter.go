package mledger

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// maxPendingDeletes bounds the ledgers retention has dropped from the list
// and not yet deleted. Past it, trim drops nothing more until the deleter
// catches up: the ledgers stay in the list, which costs bookie space for a
// while and loses nothing. A slow or stuck store thus holds back
// retention, never appends.
const maxPendingDeletes = 1000

// ledgerDeleter is the queue of the deleter goroutine (deleteLoop): the
// ledgers a trim dropped from the list, in batches, each with a done
// channel closed once its ledgers are deleted or given up on. mu guards
// the queue.
type ledgerDeleter struct {
	mu      sync.Mutex
	batches []deletion
	ids     int           // ledgers in batches
	wake    chan struct{} // cap 1: batches is no longer empty
}

type deletion struct {
	ids  []int64
	done chan struct{}
}

func (d *ledgerDeleter) add(ids []int64) <-chan struct{} {
	done := make(chan struct{})
	d.mu.Lock()
	d.batches = append(d.batches, deletion{ids: ids, done: done})
	d.ids += len(ids)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return done
}

// pending returns how many ledgers wait to be deleted.
func (d *ledgerDeleter) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids
}

func (d *ledgerDeleter) front() (deletion, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.batches) == 0 {
		return deletion{}, false
	}
	return d.batches[0], true
}

// pop removes the front batch, done.
func (d *ledgerDeleter) pop() {
	d.mu.Lock()
	b := d.batches[0]
	d.batches = d.batches[1:]
	d.ids -= len(b.ids)
	d.mu.Unlock()
	close(b.done)
}

// wait waits until every batch queued so far is done, or ctx ends.
func (d *ledgerDeleter) wait(ctx context.Context) error {
	d.mu.Lock()
	if len(d.batches) == 0 {
		d.mu.Unlock()
		return nil
	}
	last := d.batches[len(d.batches)-1].done
	d.mu.Unlock()
	select {
	case <-last:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abandon gives up on every batch left, when the instance stops.
func (d *ledgerDeleter) abandon(log *slog.Logger) {
	d.mu.Lock()
	left, n := d.batches, d.ids
	d.batches, d.ids = nil, 0
	d.mu.Unlock()
	for _, b := range left {
		close(b.done)
	}
	if n > 0 {
		log.Warn("retention: ledgers left out of the list but not deleted at close", "count", n)
	}
}

// deleteLoop is the deleter goroutine: it deletes the metadata of the
// ledgers trim dropped, one at a time, off the owner goroutine and the
// write lock, so that a slow store delays only the deletions.
func (ml *ManagedLedger) deleteLoop() {
	defer ml.wg.Done()
	for {
		d, ok := ml.deleter.front()
		if !ok {
			select {
			case <-ml.deleter.wake:
				continue
			case <-ml.runCtx.Done():
				ml.deleter.abandon(ml.log)
				return
			}
		}
		for _, id := range d.ids {
			if ml.runCtx.Err() != nil {
				ml.deleter.abandon(ml.log)
				return
			}
			ml.deleteLedger(id)
		}
		ml.deleter.pop()
	}
}

func (ml *ManagedLedger) deleteLedger(id int64) {
	mctx, cancel := ml.f.metaCtx(ml.runCtx)
	defer cancel()
	if err := ml.f.client.Delete(mctx, id); err != nil && !errors.Is(err, ledger.ErrLedgerNotFound) {
		// The list no longer names it: only its bookie space leaks
		// until an operator or auto-recovery removes it.
		ml.log.Warn("retention: ledger left out of the list but not deleted", "ledger", id, "err", err)
	}
}
