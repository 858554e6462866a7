package mledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// InitialPosition says where a new cursor starts.
type InitialPosition int

const (
	// Latest: only entries appended after the cursor is created.
	Latest InitialPosition = iota
	// Earliest: every entry still stored.
	Earliest
)

// Cursor reads a managed ledger and tracks what its subscription has
// consumed: a mark-delete position (everything up to it is consumed) plus
// the individually acked positions after it (cursorState).
//
// Ownership: mu guards the state; every method takes it for the length of
// one state change and publishes the resulting positions to the managed
// ledger. A durable cursor's persistence goroutine (persistLoop) is the only
// writer of its key; it coalesces changes and writes at most once per
// CursorPersistInterval, by CAS. A failed CAS means another process wrote
// the cursor: the managed ledger turns terminal with ErrOwnershipLost.
type Cursor struct {
	ml      *ManagedLedger
	name    string
	durable bool
	key     string

	mu     sync.Mutex
	st     cursorState
	props  map[string]string
	dirty  bool
	closed bool

	// Owned by persistLoop (and by Close once persistLoop has stopped);
	// OpenCursor sets them first, before anything can wake the loop.
	// lastWrite is on the factory's clock.
	modRev    int64
	lastWrite time.Time
	persisted cursorValue

	wake  chan struct{} // cap 1: "there is something to write"
	quit  chan bool     // closed value: flush before exit?
	done  chan struct{}
	quitO sync.Once
}

// OpenCursor opens the durable cursor name, creating it at initial if it
// does not exist. Cursors whose name matches ForeignCursorPrefixes belong to
// another process and are refused (ErrCursorOwnedElsewhere).
func (ml *ManagedLedger) OpenCursor(ctx context.Context, name string, initial InitialPosition) (*Cursor, error) {
	if ml.cfg.foreign(name) {
		return nil, fmt.Errorf("%w: %s", ErrCursorOwnedElsewhere, name)
	}
	c, err := ml.newCursor(name, true)
	if err != nil {
		return nil, err
	}
	c.key = CursorKey(ml.cfg.Region, ml.topic, name)
	// The loop runs from the start so that a Close racing with this open
	// finds it; it writes nothing until the cursor changes.
	go c.persistLoop()
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	kv, err := ml.f.store.Get(mctx, c.key)
	v := ml.snapshot()
	switch {
	case errors.Is(err, meta.ErrNotFound):
		c.st = initialState(&v, initial)
		val := persistedValue(&c.st, ml.cfg.MaxPersistedAckRanges, nil)
		b, err := encodeCursor(val)
		if err != nil {
			c.stop(false)
			return nil, err
		}
		if c.modRev, err = ml.f.store.Create(mctx, c.key, b, meta.NoLease); err != nil {
			c.stop(false)
			if errors.Is(err, meta.ErrExists) {
				err = fmt.Errorf("%w: cursor %s created concurrently", ErrOwnershipLost, name)
			}
			return nil, fmt.Errorf("open cursor %s: %w", name, err)
		}
		// Creating the record is a write: the next one waits its
		// interval.
		c.persisted, c.lastWrite = val, ml.f.clock.Now()
	case err == nil:
		val, err := decodeCursor(kv.Value)
		if err != nil {
			c.stop(false)
			return nil, fmt.Errorf("open cursor %s: %w", name, err)
		}
		c.modRev, c.persisted = kv.ModRevision, val
		c.st = restoredState(val)
		c.props = val.Properties
		c.st.normalize(&v)
	default:
		c.stop(false)
		return nil, fmt.Errorf("open cursor %s: %w", name, err)
	}
	c.mu.Lock()
	c.publishLocked()
	c.mu.Unlock()
	ml.mu.Lock()
	delete(ml.dormant, name) // its live position counts from now on
	ml.mu.Unlock()
	return c, nil
}

// OpenNonDurableCursor opens an in-memory cursor for a reader, at the
// oldest stored entry or at the end. Nothing of it is persisted and it does
// not hold back retention; use Seek or Reset to move it.
func (ml *ManagedLedger) OpenNonDurableCursor(name string, initial InitialPosition) (*Cursor, error) {
	c, err := ml.newCursor(name, false)
	if err != nil {
		return nil, err
	}
	v := ml.snapshot()
	c.mu.Lock()
	c.st = initialState(&v, initial)
	c.publishLocked()
	c.mu.Unlock()
	close(c.done)
	return c, nil
}

func initialState(v *view, initial InitialPosition) cursorState {
	p := v.last()
	if initial == Earliest {
		p = v.origin()
	}
	return cursorState{markDelete: p, readAfter: p}
}

func (ml *ManagedLedger) newCursor(name string, durable bool) (*Cursor, error) {
	c := &Cursor{ml: ml, name: name, durable: durable, wake: make(chan struct{}, 1), quit: make(chan bool, 1), done: make(chan struct{})}
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if ml.err != nil || ml.closing {
		return nil, errOrClosed(ml.err)
	}
	if ml.cursors[name] != nil {
		return nil, fmt.Errorf("%w: %s", ErrCursorExists, name)
	}
	ml.cursors[name] = c
	return c, nil
}

func errOrClosed(err error) error {
	if err != nil {
		return err
	}
	return ErrClosed
}

// dropCursor forgets c once its persistence goroutine has stopped. With
// pin (a durable cursor closed, not deleted or crashed), its last written
// position goes on holding back retention (dormant) from the same step
// that drops its live one, so that no trim in between sees neither.
func (ml *ManagedLedger) dropCursor(c *Cursor, pin bool) {
	ml.mu.Lock()
	if ml.cursors[c.name] == c {
		delete(ml.cursors, c.name)
		if pin {
			ml.dormant[c.name] = c.persisted.MarkDelete
		}
	}
	delete(ml.marks, c)
	ml.evictLocked()
	ml.mu.Unlock()
}

// evictLocked drops cached entries every open cursor has read past. It
// scans the cursors, so it is called only when the slowest reader may have
// moved (see publishLocked), not on every ack.
func (ml *ManagedLedger) evictLocked() {
	ml.slowestValid = false
	if len(ml.marks) == 0 {
		return
	}
	first := true
	var slowest Position
	for _, m := range ml.marks {
		if first || m.readAfter.Less(slowest) {
			slowest, first = m.readAfter, false
		}
	}
	ml.slowestRead, ml.slowestValid = slowest, true
	ml.cache.evictThrough(slowest)
}

// publishLocked tells the managed ledger where the cursor stands.
func (c *Cursor) publishLocked() {
	ml := c.ml
	ml.mu.Lock()
	old, had := ml.marks[c]
	m := cursorMarks{readAfter: c.st.readAfter, markDelete: c.st.markDelete, durable: c.durable}
	ml.marks[c] = m
	// Only a move of the slowest reader (or of a new cursor) can change
	// what may be evicted.
	switch {
	case !had || !ml.slowestValid || (old.readAfter != m.readAfter && !ml.slowestRead.Less(old.readAfter)):
		ml.evictLocked()
	case m.readAfter.Less(ml.slowestRead):
		ml.slowestRead = m.readAfter // moved back (rewind, seek) below the slowest
	}
	ml.mu.Unlock()
}

// changedLocked publishes and schedules a write.
func (c *Cursor) changedLocked() {
	c.publishLocked()
	if !c.durable {
		return
	}
	c.dirty = true
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Name returns the cursor's name.
func (c *Cursor) Name() string { return c.name }

// Durable reports whether the cursor's state is persisted.
func (c *Cursor) Durable() bool { return c.durable }

func (c *Cursor) checkLocked() error {
	if c.closed {
		return fmt.Errorf("cursor %s: %w", c.name, ErrClosed)
	}
	if err := c.ml.Err(); err != nil {
		return err
	}
	return nil
}

// update runs f on the state under the lock, with a fresh view, and
// publishes the change if f succeeded.
func (c *Cursor) update(f func(v *view) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkLocked(); err != nil {
		return err
	}
	v := c.ml.snapshot()
	before := c.st.clone()
	if err := f(&v); err != nil {
		c.st = before
		return err
	}
	c.changedLocked()
	return nil
}

func (s *cursorState) clone() cursorState {
	return cursorState{markDelete: s.markDelete, readAfter: s.readAfter, acked: s.acked.clone()}
}

// Ack acknowledges individual positions. Acking a position at or before
// the mark-delete position does nothing, even once its ledger is trimmed;
// every later one must hold a confirmed entry, or nothing is changed and
// ErrInvalidPosition is returned.
func (c *Cursor) Ack(ps ...Position) error {
	return c.update(func(v *view) error {
		for _, p := range ps {
			if err := c.st.ack(v, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// AckCumulative consumes everything up to and including p.
func (c *Cursor) AckCumulative(p Position) error {
	return c.update(func(v *view) error { return c.st.ackCumulative(v, p) })
}

// Skip consumes the next n unconsumed entries and returns how many it
// skipped (fewer at the end of the topic).
func (c *Cursor) Skip(n int64) (int64, error) {
	var k int64
	err := c.update(func(v *view) error { k = c.st.skip(v, n); return nil })
	return k, err
}

// Rewind makes every unacknowledged entry deliverable again, from the
// mark-delete position on (redelivery of the unacked).
func (c *Cursor) Rewind() error {
	return c.update(func(v *view) error { c.st.rewind(); return nil })
}

// Seek moves the read position to p (an entry, or just past the last one)
// without changing what is consumed. p must be after the mark-delete
// position.
func (c *Cursor) Seek(p Position) error {
	return c.update(func(v *view) error { return c.st.seek(v, p) })
}

// Reset makes p (an entry, or just past the last one) the next entry to
// deliver, counts everything before it as consumed and forgets every ack
// after it, as a subscription seek does.
func (c *Cursor) Reset(p Position) error {
	return c.update(func(v *view) error { return c.st.reset(v, p) })
}

// ResetAfter counts everything up to and including p as consumed, so that
// the entry after p is the next to deliver, and forgets every ack after it.
// Positions outside the topic are clamped to its first or last entry.
func (c *Cursor) ResetAfter(p Position) error {
	return c.update(func(v *view) error { c.st.resetAfter(v, p); return nil })
}

// ResetToTime resets the cursor to the first entry whose broker_timestamp
// is at or after t (Unix ms), or to the end when there is none.
func (c *Cursor) ResetToTime(ctx context.Context, t int64) (Position, error) {
	p, ok, err := c.ml.FindByTime(ctx, t)
	if err != nil {
		return Position{}, err
	}
	if !ok {
		last := c.ml.LastConfirmed()
		p = Position{last.Ledger, last.Entry + 1}
	}
	return p, c.Reset(p)
}

// MarkDeletePosition returns the last position of the consumed prefix.
func (c *Cursor) MarkDeletePosition() Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.markDelete
}

// ReadPosition returns the position reading resumes after.
func (c *Cursor) ReadPosition() Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.readAfter
}

// AckedRanges returns the number of individually acked ranges held.
func (c *Cursor) AckedRanges() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.st.acked.ranges)
}

// IsAcked reports whether p is consumed (at or before the mark-delete
// position, or individually acked).
func (c *Cursor) IsAcked(p Position) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.st.markDelete.Less(p) || c.st.acked.contains(p)
}

// Consumed reports whether p names an entry the managed ledger holds and
// the cursor has consumed. Unlike IsAcked, a position outside the managed
// ledger (a made-up one, or another topic's) is not consumed.
func (c *Cursor) Consumed(p Position) bool {
	v := c.ml.snapshot()
	return v.valid(p) && c.IsAcked(p)
}

// Backlog returns the number of confirmed entries not yet consumed.
func (c *Cursor) Backlog() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.ml.snapshot()
	return c.st.backlog(&v)
}

// SetProperty records a property persisted with the cursor.
func (c *Cursor) SetProperty(k, val string) error {
	return c.update(func(*view) error {
		c.props = maps.Clone(c.props)
		if c.props == nil {
			c.props = map[string]string{}
		}
		c.props[k] = val
		return nil
	})
}

// Properties returns the cursor's properties.
func (c *Cursor) Properties() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.props)
}

// Read returns up to n entries to deliver, after the read position and not
// acked, without waiting. It returns nothing when there is nothing new.
func (c *Cursor) Read(ctx context.Context, n int) ([]Entry, error) {
	c.mu.Lock()
	if err := c.checkLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	v := c.ml.snapshot()
	prev := c.st.readAfter
	ps := c.st.readNext(&v, n)
	after := c.st.readAfter
	c.publishLocked()
	c.mu.Unlock()
	if len(ps) == 0 {
		return nil, nil
	}
	es, err := c.ml.read(ctx, ps)
	if err != nil {
		// Give back what was not delivered, unless the cursor moved
		// meanwhile.
		c.mu.Lock()
		if c.st.readAfter == after {
			c.st.readAfter = maxPos(prev, c.st.markDelete)
			if len(es) > 0 {
				c.st.readAfter = maxPos(es[len(es)-1].Position, c.st.markDelete)
			}
			c.publishLocked()
		}
		c.mu.Unlock()
	}
	return es, err
}

// ReadOrWait is Read, but waits until there is at least one entry to
// deliver or ctx ends. On a terminated topic that has been read to its end
// it returns ErrEndOfTopic.
func (c *Cursor) ReadOrWait(ctx context.Context, n int) ([]Entry, error) {
	for {
		c.ml.mu.Lock()
		tail, v := c.ml.tailLocked(), c.ml.v
		c.ml.mu.Unlock()
		es, err := c.Read(ctx, n)
		if err != nil || len(es) > 0 {
			return es, err
		}
		if v.terminated && v.current == 0 {
			c.mu.Lock()
			more := c.st.hasMore(&v)
			c.mu.Unlock()
			if !more {
				return nil, fmt.Errorf("%w: %s at %v", ErrEndOfTopic, c.ml.topic, v.last())
			}
		}
		select {
		case <-tail:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// HasMore reports whether Read would return an entry now.
func (c *Cursor) HasMore() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.ml.snapshot()
	return c.st.hasMore(&v)
}

// persistLoop is a durable cursor's only writer. Its timer runs on the
// factory's clock, and so does lastWrite: a fake clock decides exactly
// when a coalesced write happens.
func (c *Cursor) persistLoop() {
	defer close(c.done)
	ml := c.ml
	clock := ml.f.clock
	for {
		select {
		case <-c.wake:
		case flush := <-c.quit:
			if flush {
				c.flush(ml.runCtx)
			}
			return
		}
		if wait := clock.Until(c.lastWrite.Add(time.Duration(ml.persistInterval.Load()))); wait > 0 {
			timer := clock.NewTimer(wait)
			select {
			case <-timer.Chan():
			case flush := <-c.quit:
				timer.Stop()
				if flush {
					c.flush(ml.runCtx)
				}
				return
			}
		}
		if err := c.flush(ml.runCtx); err != nil && !errors.Is(err, ErrOwnershipLost) && ml.Err() == nil {
			// A store hiccup: keep the change and try again after the
			// interval.
			c.lastWrite = clock.Now()
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}
}

// flush writes the state if it changed since the last write.
func (c *Cursor) flush(ctx context.Context) error {
	c.mu.Lock()
	if !c.dirty || c.ml.Err() != nil {
		c.mu.Unlock()
		return nil
	}
	val := persistedValue(&c.st, c.ml.cfg.MaxPersistedAckRanges, c.props)
	c.dirty = false
	c.mu.Unlock()
	b, err := encodeCursor(val)
	if err != nil {
		return err
	}
	mctx, cancel := c.ml.f.metaCtx(ctx)
	defer cancel()
	c.lastWrite = c.ml.f.clock.Now()
	rev, err := c.ml.f.store.Update(mctx, c.key, b, c.modRev)
	if errors.Is(err, meta.ErrConflict) {
		err = fmt.Errorf("%w: cursor %s of %s was written by another process", ErrOwnershipLost, c.name, c.ml.topic)
		c.ml.fail(err)
		return err
	}
	if err != nil {
		c.mu.Lock()
		c.dirty = true
		c.mu.Unlock()
		return fmt.Errorf("persist cursor %s: %w", c.name, err)
	}
	c.modRev, c.persisted = rev, val
	return nil
}

// stop ends the persistence goroutine, writing the last state first if
// flush, and removes the cursor from its managed ledger.
func (c *Cursor) stop(flush bool) {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if c.durable && !already {
		c.quitO.Do(func() { c.quit <- flush })
	}
	<-c.done
	c.ml.dropCursor(c, flush && c.durable)
}

// Close writes the cursor's state (durable cursors) and closes it. A
// closed durable cursor goes on pinning retention at its last written
// position until it is deleted.
func (c *Cursor) Close(ctx context.Context) error {
	c.stop(true)
	c.mu.Lock()
	dirty := c.dirty
	c.mu.Unlock()
	if c.durable && dirty && c.ml.Err() == nil {
		return fmt.Errorf("cursor %s: last state not persisted", c.name)
	}
	return nil
}

// DeleteCursor closes the named cursor if it is open here and deletes its
// record. Cursors owned elsewhere are refused.
func (ml *ManagedLedger) DeleteCursor(ctx context.Context, name string) error {
	if ml.cfg.foreign(name) {
		return fmt.Errorf("%w: %s", ErrCursorOwnedElsewhere, name)
	}
	ml.mu.Lock()
	c := ml.cursors[name]
	ml.mu.Unlock()
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	if c != nil {
		c.stop(false)
		if !c.durable {
			return nil
		}
		err := ml.f.store.Delete(mctx, c.key, c.modRev)
		if errors.Is(err, meta.ErrConflict) {
			err = fmt.Errorf("%w: %w", ErrOwnershipLost, err)
			ml.fail(err)
		}
		if err != nil {
			return err
		}
		ml.forgetDormant(name)
		return nil
	}
	key := CursorKey(ml.cfg.Region, ml.topic, name)
	kv, err := ml.f.store.Get(mctx, key)
	if err != nil {
		return fmt.Errorf("delete cursor %s: %w", name, err)
	}
	if err := ml.f.store.Delete(mctx, key, kv.ModRevision); err != nil {
		return fmt.Errorf("delete cursor %s: %w", name, err)
	}
	ml.forgetDormant(name)
	return nil
}

func (ml *ManagedLedger) forgetDormant(name string) {
	ml.mu.Lock()
	delete(ml.dormant, name)
	ml.mu.Unlock()
}

// DurableCursors returns the names of the topic's own durable cursors,
// open here or not (the subscriptions a topic has), sorted.
func (ml *ManagedLedger) DurableCursors() []string {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	var names []string
	for n, c := range ml.cursors {
		if c.durable {
			names = append(names, n)
		}
	}
	for n := range ml.dormant {
		if _, open := ml.cursors[n]; !open {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Cursors returns the names of the cursors open here.
func (ml *ManagedLedger) Cursors() []string {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	var names []string
	for n := range ml.cursors {
		names = append(names, n)
	}
	return names
}
