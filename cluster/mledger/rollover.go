package mledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// nextLedger is the ledger created ahead of the next rollover, so that the
// appends waiting behind a rollover do not wait for a ledger create too.
//
// The owner goroutine creates it (precreate) once the current ledger is
// nearly full; the rollover takes it under the write lock (take); Close,
// Terminate and Delete discard it (discardNext); shutdown stops whatever is
// left. A ledger made ahead is in no list: until a rollover records it, it
// holds nothing and nobody reads it. mu guards the fields.
type nextLedger struct {
	mu sync.Mutex
	w  *ledger.Writer
	// creating is non-nil while the owner creates the ledger, and closed
	// once it is done; err is then that create's error.
	creating chan struct{}
	err      error
}

// create makes the ledger with mk unless one is made or being made.
func (n *nextLedger) create(ctx context.Context, mk func(context.Context) (*ledger.Writer, error)) error {
	n.mu.Lock()
	if n.w != nil || n.creating != nil {
		n.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	n.creating, n.err = done, nil
	n.mu.Unlock()
	w, err := mk(ctx)
	n.mu.Lock()
	n.w, n.err, n.creating = w, err, nil
	n.mu.Unlock()
	close(done)
	return err
}

// take returns the ledger made ahead; or waits for the one being made and
// returns it, or its create's error; or else makes one with mk, holding
// the create slot meanwhile.
//
// Creates never overlap, so ledger ids increase along the list: ids come
// from one counter, and a ledger made ahead while the rollover made its
// own could get the lower id and be appended after it (readers find
// ledgers by id, in order). take waits for one create at most: the owner
// starts one only on a request, and requests are made under the write
// lock, which the rollover holds, after it dropped the pending one.
func (n *nextLedger) take(ctx context.Context, mk func(context.Context) (*ledger.Writer, error)) (*ledger.Writer, error) {
	n.mu.Lock()
	waited := false
	for n.creating != nil {
		creating := n.creating
		n.mu.Unlock()
		select {
		case <-creating:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		waited = true
		n.mu.Lock()
	}
	if w := n.w; w != nil {
		n.w, n.err = nil, nil
		n.mu.Unlock()
		return w, nil
	}
	if err := n.err; waited && err != nil {
		n.err = nil
		n.mu.Unlock()
		return nil, err
	}
	done := make(chan struct{})
	n.creating, n.err = done, nil
	n.mu.Unlock()
	w, err := mk(ctx)
	n.mu.Lock()
	n.creating = nil
	n.mu.Unlock()
	close(done)
	return w, err
}

// release hands over the ledger made ahead, if any; the caller must know
// that no create is running (it is the owner, or the owner has stopped).
func (n *nextLedger) release() *ledger.Writer {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.w
	n.w = nil
	return w
}

// stop abandons the ledger made ahead, leaving it OPEN, as a crash would.
// Called once the owner has stopped.
func (n *nextLedger) stop() {
	if w := n.release(); w != nil {
		w.Stop()
	}
}

func (ml *ManagedLedger) createLedger(ctx context.Context) (*ledger.Writer, error) {
	q := ml.Quorums()
	w, err := ml.f.client.Create(ctx, q.Ensemble, q.Write, q.Ack, ml.BookieGroups(),
		map[string]string{"topic": ml.topic, "application": "meridian-mledger"})
	if err != nil {
		return nil, fmt.Errorf("create ledger: %w", err)
	}
	return w, nil
}

// precreate makes the next ledger ahead of the rollover. It runs on the
// owner goroutine, which nobody appending waits for.
func (ml *ManagedLedger) precreate() {
	if ml.Err() != nil || ml.Terminated() {
		return
	}
	if err := ml.next.create(ml.runCtx, ml.createLedger); err != nil && ml.runCtx.Err() == nil {
		ml.log.Warn("cannot create the next ledger ahead; the rollover will try again", "err", err)
	}
}

// discardNext closes and deletes the ledger made ahead, if any. It runs on
// the owner goroutine, so no create is running.
func (ml *ManagedLedger) discardNext() {
	if w := ml.next.release(); w != nil {
		ml.discardLedger(ml.runCtx, w)
	}
}

// discardLedger closes and deletes a ledger that no list names, so that no
// OPEN ledger is left behind.
func (ml *ManagedLedger) discardLedger(ctx context.Context, w *ledger.Writer) {
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	err := w.Close(mctx)
	if err == nil {
		err = ml.f.client.Delete(mctx, w.ID())
	} else {
		w.Stop()
	}
	if err != nil {
		ml.log.Warn("unused ledger not deleted", "ledger", w.ID(), "err", err)
	}
}

// listWithClosedLast is the list with closedLast's final counts recorded.
// Called with listMu and the write lock held.
func (ml *ManagedLedger) listWithClosedLast() listValue {
	next := ml.list
	next.Ledgers = slices.Clone(ml.list.Ledgers)
	if c := ml.closedLast; c != nil {
		// The closed ledger is the list's last: trim never drops that one.
		if n := len(next.Ledgers); n > 0 && next.Ledgers[n-1].ID == c.ID {
			next.Ledgers[n-1].Entries, next.Ledgers[n-1].Size = c.Entries, c.Size
		}
	}
	return next
}

// recordNext writes the list, by CAS, with closedLast's final counts and w
// as the new last ledger, and makes w the ledger being written: one write
// of the list per rollover. Called under the write lock. A failed CAS means
// another instance has the topic: ErrFenced.
func (ml *ManagedLedger) recordNext(ctx context.Context, w *ledger.Writer) error {
	now := ml.f.clock.Now()
	ml.listMu.Lock()
	defer ml.listMu.Unlock()
	next := ml.listWithClosedLast()
	next.Ledgers = append(next.Ledgers, ledgerInfo{ID: w.ID(), CTime: now.UnixMilli()})
	if err := ml.casList(ctx, next); err != nil {
		if errors.Is(err, ErrFenced) {
			// A definite conflict: the list does not name the new ledger.
			// It holds nothing; close and delete it.
			ml.discardLedger(context.WithoutCancel(ctx), w)
		} else {
			// The outcome is unknown (a timeout, a cancel): the list may
			// name the ledger now, so it must stay for the next owner's
			// recovery. Our next CAS will tell (it fails if the write
			// went through, since our revision is then stale).
			w.Stop()
		}
		return err
	}
	ml.closedLast = nil
	ml.writer, ml.curEntries, ml.curSize, ml.curCreated = w, 0, 0, now
	ml.mu.Lock()
	ml.v.ledgers = slices.Clone(ml.list.Ledgers)
	ml.v.current = w.ID()
	ml.v.lac = Position{w.ID(), -1}
	ml.curSizeSeen = 0
	ml.wakeLocked()
	ml.mu.Unlock()
	ml.log.Debug("ledger started", "ledger", w.ID())
	return nil
}

// recordClosed writes the list, by CAS, with closedLast's final counts
// (and terminated, if terminate), and shows readers that no ledger is being
// written. Called under the write lock.
func (ml *ManagedLedger) recordClosed(terminate bool) error {
	ml.listMu.Lock()
	defer ml.listMu.Unlock()
	next := ml.listWithClosedLast()
	next.Terminated = next.Terminated || terminate
	if err := ml.casList(ml.runCtx, next); err != nil {
		return err
	}
	ml.closedLast = nil
	ml.mu.Lock()
	ml.v.ledgers = slices.Clone(ml.list.Ledgers)
	ml.v.current = 0
	ml.v.terminated = ml.list.Terminated
	ml.curSizeSeen = 0
	ml.wakeLocked()
	ml.mu.Unlock()
	return nil
}
