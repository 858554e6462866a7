package mledger

import (
	"fmt"
)

// cursorState is a cursor's consumption state, a pure state machine over a
// view. Every method that changes it either succeeds completely or returns
// an error and leaves it unchanged.
//
// Invariants (checked by the model test against a flat boolean reference):
//   - markDelete is the last position of the longest fully consumed prefix:
//     every readable position <= markDelete is consumed, and next(markDelete)
//     is not in acked (or does not exist). A mark-delete never skips an
//     unacknowledged entry.
//   - acked holds only positions > markDelete, each individually acked.
//   - readAfter >= markDelete: reading resumes at next(readAfter), skipping
//     acked positions.
type cursorState struct {
	markDelete Position
	readAfter  Position
	acked      ackSet
}

// advanceLocked moves markDelete over every acked position that directly
// follows it, across ledger seams, and drops them from acked.
func (s *cursorState) advance(v *view) {
	for {
		n, ok := v.next(s.markDelete)
		if !ok {
			break
		}
		r, in := s.acked.rangeAt(n)
		if !in {
			break
		}
		s.markDelete = r.last()
	}
	s.acked.removeThrough(s.markDelete)
	s.readAfter = maxPos(s.readAfter, s.markDelete)
}

// consumedAlready reports whether p names an entry at or before the
// mark-delete position, which an ack leaves as it is (see ack).
func (s *cursorState) consumedAlready(p Position) bool {
	return p.Entry >= 0 && !s.markDelete.Less(p)
}

// ack acknowledges one position. Acking an entry at or before the
// mark-delete position is a no-op, whether or not its ledger is still held
// (consumed ledgers are trimmed), as IsAcked counts it consumed; acking a
// later position that holds no readable entry, or a negative entry id, is
// ErrInvalidPosition.
func (s *cursorState) ack(v *view, p Position) error {
	if s.consumedAlready(p) {
		return nil
	}
	if !v.valid(p) {
		return fmt.Errorf("%w: ack of %v, which holds no confirmed entry (last %v)", ErrInvalidPosition, p, v.last())
	}
	if s.acked.add(p) {
		s.advance(v)
	}
	return nil
}

// ackCumulative consumes every position up to and including p.
func (s *cursorState) ackCumulative(v *view, p Position) error {
	if s.consumedAlready(p) {
		return nil
	}
	if !v.valid(p) {
		return fmt.Errorf("%w: cumulative ack of %v, which holds no confirmed entry (last %v)", ErrInvalidPosition, p, v.last())
	}
	s.markDelete = p
	s.advance(v)
	return nil
}

// readNext returns up to n positions to deliver, after readAfter and not
// acked, and moves readAfter to the last position examined.
func (s *cursorState) readNext(v *view, n int) []Position {
	var out []Position
	p := s.readAfter
	for len(out) < n {
		q, ok := s.nextUnacked(v, p)
		p = q
		if !ok {
			break
		}
		out = append(out, q)
	}
	s.readAfter = p
	return out
}

// nextUnacked returns the first readable position after p that is not
// acked. When there is none, ok is false and q is the last position it
// stepped over: the end of the acked ranges that follow p, or p itself.
func (s *cursorState) nextUnacked(v *view, p Position) (q Position, ok bool) {
	for {
		next, more := v.next(p)
		if !more {
			return p, false
		}
		r, in := s.acked.rangeAt(next)
		if !in {
			return next, true
		}
		p = r.last()
	}
}

// hasMore reports whether readNext would return something.
func (s *cursorState) hasMore(v *view) bool {
	_, ok := s.nextUnacked(v, s.readAfter)
	return ok
}

// rewind makes every unacknowledged position deliverable again
// (redelivery of the unacked).
func (s *cursorState) rewind() { s.readAfter = s.markDelete }

// backlog is the number of readable, unconsumed entries.
func (s *cursorState) backlog(v *view) int64 {
	last := v.last()
	if !s.markDelete.Less(last) {
		return 0
	}
	return v.count(s.markDelete, last) - s.acked.countBetween(s.markDelete, last)
}

// skip consumes the next n unconsumed entries (acked ones do not count) and
// returns how many it skipped.
func (s *cursorState) skip(v *view, n int64) int64 {
	p := s.markDelete
	var k int64
	for k < n {
		q, ok := s.nextUnacked(v, p)
		p = q
		if !ok {
			break
		}
		k++
	}
	if s.markDelete.Less(p) {
		s.markDelete = p
		s.advance(v)
	}
	return k
}

// checkTarget validates a seek or reset target: a readable entry, or the
// position just after the last one (the end).
func checkTarget(v *view, p Position) error {
	if v.valid(p) {
		return nil
	}
	last := v.last()
	if end := (Position{last.Ledger, last.Entry + 1}); p == end {
		return nil
	}
	if last.Less(p) {
		return fmt.Errorf("%w: %v is after the last entry %v", ErrSeekPastEnd, p, last)
	}
	return fmt.Errorf("%w: %v holds no entry", ErrInvalidPosition, p)
}

// reset makes p the first position to deliver and forgets every ack after
// it, and before it counts everything as consumed (a subscription reset).
func (s *cursorState) reset(v *view, p Position) error {
	if err := checkTarget(v, p); err != nil {
		return err
	}
	s.markDelete = Position{p.Ledger, p.Entry - 1}
	s.acked.reset()
	s.readAfter = s.markDelete
	return nil
}

// resetAfter counts everything up to and including p as consumed and
// forgets every ack after it. p need not hold an entry: a position before
// the first entry or after the last is clamped to the topic's bounds, as a
// subscription started or seeked to a message id that is gone or not yet
// written is.
func (s *cursorState) resetAfter(v *view, p Position) {
	if o := v.origin(); p.Less(o) {
		p = o
	}
	if last := v.last(); last.Less(p) {
		p = last
	}
	s.markDelete = p
	s.acked.reset()
	s.readAfter = p
	s.advance(v)
}

// seek moves the read position to p without touching acks or the
// mark-delete position; p must not be consumed already.
func (s *cursorState) seek(v *view, p Position) error {
	if err := checkTarget(v, p); err != nil {
		return err
	}
	if !s.markDelete.Less(p) {
		return fmt.Errorf("%w: %v is at or before the mark-delete position %v", ErrInvalidPosition, p, s.markDelete)
	}
	s.readAfter = Position{p.Ledger, p.Entry - 1}
	return nil
}

// normalize moves the state past ledgers that no longer exist: a cursor
// restored (or lagging) before the first ledger of the list.
func (s *cursorState) normalize(v *view) {
	if o := v.origin(); s.markDelete.Less(o) {
		s.markDelete = o
	}
	s.advance(v)
}
