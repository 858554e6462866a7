package mledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/ledger"
)

// read returns the entries at ps (ascending), from the cache where it has
// them and from the bookies otherwise, reading runs of consecutive entries
// of one ledger in one call. On an error it returns the entries read before
// it.
func (ml *ManagedLedger) read(ctx context.Context, ps []Position) ([]Entry, error) {
	out := make([]Entry, 0, len(ps))
	for i := 0; i < len(ps); {
		ml.mu.Lock()
		e, hit := ml.cache.get(ps[i])
		ml.mu.Unlock()
		if hit {
			out = append(out, e)
			i++
			continue
		}
		j := i + 1
		for j < len(ps) && ps[j].Ledger == ps[i].Ledger && ps[j].Entry == ps[j-1].Entry+1 {
			j++
		}
		es, err := ml.readRun(ctx, ps[i].Ledger, ps[i].Entry, ps[j-1].Entry)
		out = append(out, es...)
		if err != nil {
			return out, err
		}
		i = j
	}
	return out, nil
}

// readRun reads entries first..last of one ledger from the bookies. The
// caller knows they are confirmed; a reader of the ledger being written may
// not have seen a LAC that high yet, so it waits for it.
func (ml *ManagedLedger) readRun(ctx context.Context, id, first, last int64) ([]Entry, error) {
	r, err := ml.reader(ctx, id)
	if err != nil {
		return nil, err
	}
	for lac := r.LastAddConfirmed(); lac < last; {
		if lac, err = r.UpdateLAC(ctx); err != nil {
			return nil, fmt.Errorf("ledger %d: %w", id, err)
		}
		if lac >= last {
			break
		}
		if lac, err = r.WaitLAC(ctx, lac); err != nil && !errors.Is(err, ledger.ErrLedgerClosed) {
			return nil, fmt.Errorf("ledger %d: %w", id, err)
		} else if err != nil && lac < last {
			return nil, fmt.Errorf("%w: ledger %d closed at %d, before %d", ErrInvalidPosition, id, lac, last)
		}
	}
	start := ml.f.clock.Now()
	les, err := r.Read(ctx, first, last)
	if err == nil && ml.reads != nil {
		ml.reads.Record(ml.f.clock.Since(start).Microseconds())
	}
	out := make([]Entry, len(les))
	for i, e := range les {
		out[i] = Entry{Position: Position{id, e.ID}, Data: e.Payload}
	}
	if err != nil {
		return out, fmt.Errorf("read %d:%d..%d: %w", id, first, last, err)
	}
	return out, nil
}

// reader returns the (shared) reader of a ledger, opening it the first time.
// Readers of deleted ledgers are dropped by retention, so the map holds at
// most one per ledger of the list.
func (ml *ManagedLedger) reader(ctx context.Context, id int64) (*ledger.Reader, error) {
	ml.mu.Lock()
	r := ml.readers[id]
	ml.mu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := ml.f.client.OpenForRead(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("open ledger %d: %w", id, err)
	}
	ml.mu.Lock()
	if prev := ml.readers[id]; prev != nil {
		r = prev
	} else {
		ml.readers[id] = r
	}
	ml.mu.Unlock()
	return r, nil
}

// ReadAt reads up to n entries starting at from (which must hold an entry)
// without a cursor.
func (ml *ManagedLedger) ReadAt(ctx context.Context, from Position, n int) ([]Entry, error) {
	v := ml.snapshot()
	if !v.valid(from) {
		return nil, fmt.Errorf("%w: %v (last %v)", ErrInvalidPosition, from, v.last())
	}
	ps := []Position{from}
	for p := from; len(ps) < n; {
		q, ok := v.next(p)
		if !ok {
			break
		}
		ps, p = append(ps, q), q
	}
	return ml.read(ctx, ps)
}

// FindByTime returns the first position whose broker_timestamp is at or
// after t (Unix ms), by binary search over the topic's entries: broker
// timestamps never go backwards within a topic. ok is false when every
// entry is older.
func (ml *ManagedLedger) FindByTime(ctx context.Context, t int64) (Position, bool, error) {
	v := ml.snapshot()
	origin := v.origin()
	n := v.count(origin, v.last())
	lo, hi := int64(0), n // answer in [lo, hi]; hi == n means none
	for lo < hi {
		mid := lo + (hi-lo)/2
		p, _ := v.nth(origin, mid)
		es, err := ml.read(ctx, []Position{p})
		if err != nil {
			return Position{}, false, err
		}
		ts, err := EntryTimestamp(es[0].Data)
		if err != nil {
			return Position{}, false, fmt.Errorf("entry %v: %w", p, err)
		}
		if ts >= t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == n {
		return Position{}, false, nil
	}
	p, _ := v.nth(origin, lo)
	return p, true, nil
}
