package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/sync/singleflight"
)

// Entry is one confirmed entry of a ledger.
type Entry struct {
	ID      int64
	Payload []byte
}

// Reader reads a ledger up to its last add confirmed: the LAC carried by
// the writer's adds while the ledger is open, its lastEntry once closed. It
// never returns an entry past that point. A Reader is safe for concurrent use;
// its state (metadata and the highest LAC seen) sits under mu and only moves
// forward.
type Reader struct {
	c  *Client
	id int64

	mu  sync.Mutex
	md  *Metadata
	lac int64
	// next is the entry that a long-poll's bookie sent with the LAC that
	// confirmed it (Bookie.WaitEntry); a Read of it is served from here
	// instead of asking a bookie again. nil until a poll brings one; each
	// poll that brings one replaces it.
	next *Entry
	// preferred is the slot of the last ensemble whose long-poll last
	// answered first: the next poll asks it alone, at first.
	preferred int

	// polls is the long-poll in flight for each entry awaited, shared by
	// the WaitLACs that await it at once (a Reader from OpenTail serves
	// several tailers).
	polls singleflight.Group
}

// OpenForRead opens a ledger for reading without recovering it. For an open
// ledger it asks the last ensemble for the LAC; a writer may still be adding.
func (c *Client) OpenForRead(ctx context.Context, id int64) (*Reader, error) {
	md, err := c.Metadata(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &Reader{c: c, id: id, md: md, lac: -1}
	if md.State == StateClosed {
		r.lac = md.LastEntry
		return r, nil
	}
	if _, _, err := r.pollLAC(ctx, -1, 0, false); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *Client) closedReader(md *Metadata) *Reader {
	return &Reader{c: c, id: md.ID, md: md, lac: md.LastEntry}
}

// OpenTail opens ledger id for tailing, as OpenForRead does, but shares
// one Reader among all of the client's callers that tail the ledger at the
// same time. The replication tasks of one topic (one per remote region)
// follow the same ledger in step: with one Reader, their long-polls for
// the next entry go to the bookies once (WaitLAC shares the poll in
// flight) and the entry it brings back serves each of them (Read), so a
// region's bookies serve each new entry once, not once per remote.
// release gives the caller's share back; the caller must not use the
// Reader after it. The Reader is dropped when its last user releases it.
func (c *Client) OpenTail(ctx context.Context, id int64) (r *Reader, release func(), err error) {
	c.tails.mu.Lock()
	sr, ok := c.tails.m[id]
	if ok {
		sr.users++
	}
	c.tails.mu.Unlock()
	if !ok {
		fresh, err := c.OpenForRead(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		c.tails.mu.Lock()
		// Another caller may have opened it meanwhile: share theirs.
		if sr, ok = c.tails.m[id]; ok {
			sr.users++
		} else {
			sr = &sharedReader{r: fresh, users: 1}
			if c.tails.m == nil {
				c.tails.m = make(map[int64]*sharedReader)
			}
			c.tails.m[id] = sr
		}
		c.tails.mu.Unlock()
	}
	var once sync.Once
	return sr.r, func() {
		once.Do(func() {
			c.tails.mu.Lock()
			defer c.tails.mu.Unlock()
			if sr.users--; sr.users == 0 && c.tails.m[id] == sr {
				delete(c.tails.m, id)
			}
		})
	}, nil
}

// sharedReaders are the Readers that OpenTail hands out, by ledger id.
type sharedReaders struct {
	mu sync.Mutex
	m  map[int64]*sharedReader
}

type sharedReader struct {
	r     *Reader
	users int
}

// ID returns the ledger id.
func (r *Reader) ID() int64 { return r.id }

// Metadata returns the metadata the reader last saw.
func (r *Reader) Metadata() *Metadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.clone()
}

// LastAddConfirmed returns the highest entry the reader may read (-1: none).
func (r *Reader) LastAddConfirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lac
}

// Closed reports whether the reader has seen the ledger closed; its LAC is
// then final.
func (r *Reader) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.State == StateClosed
}

// readsInFlight bounds the reads one Read has outstanding. BookKeeper's
// client sends a whole range's reads at once; a bound keeps one call for
// thousands of entries from flooding a bookie, and 64 already hides the
// round trip behind the bookies' own work.
const readsInFlight = 64

// Read returns entries first..last inclusive. last must not exceed
// LastAddConfirmed (ErrBeyondLAC). Each entry is read from one member of its
// write quorum; on a checksum mismatch or an error the next member is asked.
// The entries are read concurrently and returned in order; on an error, the
// entries before the first that failed come back with it.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	r.mu.Lock()
	md, lac := r.md, r.lac
	r.mu.Unlock()
	if first < 0 || last < first {
		return nil, fmt.Errorf("ledger %d: bad range %d..%d", r.id, first, last)
	}
	if last > lac {
		return nil, fmt.Errorf("%w: ledger %d entry %d, LAC %d", ErrBeyondLAC, r.id, last, lac)
	}
	var polled []Entry
	if r.mu.Lock(); r.next != nil && r.next.ID == first {
		polled, first = []Entry{*r.next}, first+1
	}
	r.mu.Unlock()
	if first > last {
		return polled, nil
	}
	ids := make([]int64, 0, last-first+1)
	for e := first; e <= last; e++ {
		ids = append(ids, e)
	}
	payloads, errs := r.c.readEntries(ctx, md, ids)
	if ctx.Err() == nil && slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		// The writer may have moved a failed entry's fragment to a new
		// ensemble since this reader last read the metadata, or a repair
		// (auto-recovery) may have moved its copies, even in a closed
		// ledger: read those entries again where they are now.
		if fresh, err := r.refreshMetadata(ctx); err == nil {
			var moved []int // indexes into ids
			for i, err := range errs {
				if err != nil && !slices.Equal(fresh.EnsembleFor(ids[i]), md.EnsembleFor(ids[i])) {
					moved = append(moved, i)
				}
			}
			again := make([]int64, len(moved))
			for j, i := range moved {
				again[j] = ids[i]
			}
			p, e := r.c.readEntries(ctx, fresh, again)
			for j, i := range moved {
				payloads[i], errs[i] = p[j], e[j]
			}
		}
	}
	out := append(make([]Entry, 0, len(polled)+len(ids)), polled...)
	for i, id := range ids {
		if errs[i] != nil {
			return out, errs[i]
		}
		out = append(out, Entry{ID: id, Payload: payloads[i]})
	}
	return out, nil
}

// readEntries reads the entries ids of md concurrently, readsInFlight at a
// time, and returns each one's payload or error, indexed like ids.
func (c *Client) readEntries(ctx context.Context, md *Metadata, ids []int64) ([][]byte, []error) {
	payloads, errs := make([][]byte, len(ids)), make([]error, len(ids))
	sem := make(chan struct{}, readsInFlight)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			payloads[i], errs[i] = c.readEntry(ctx, md, id)
		})
	}
	wg.Wait()
	return payloads, errs
}

// refreshMetadata re-reads the metadata and keeps it if it is newer: a
// ledger's metadata only moves forward (more fragments, then closed; and
// repairs, which only move copies).
func (r *Reader) refreshMetadata(ctx context.Context) (*Metadata, error) {
	md, err := r.c.Metadata(ctx, r.id)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.md.State != StateClosed:
		r.md = md
		if md.State == StateClosed {
			r.lac = md.LastEntry
		}
	case md.State == StateClosed && md.LastEntry == r.md.LastEntry:
		// A closed ledger changes only by repairs, which move copies.
		r.md = md
	}
	return r.md, nil
}

// readEntry reads e from a member of its write quorum. It asks the members
// in read order (slowBookies.order), the next one when the one before
// failed or has not answered within SpeculativeReadTimeout, keeping the
// earlier asks outstanding, and returns the first good answer. Only when
// every member has failed does the read fail.
func (c *Client) readEntry(ctx context.Context, md *Metadata, e int64) ([]byte, error) {
	ens := md.EnsembleFor(e)
	order := c.slow.order(ens, md.Quorum().WriteSet(e))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		id      string
		payload []byte
		err     error
	}
	answers := make(chan answer, len(order)) // never blocks a late ask
	asked := 0
	askNext := func() {
		id := order[asked]
		if asked > 0 {
			c.count(func(s *ClientStats) { s.ReadRetries++ })
			c.m.readRetries.Inc()
		}
		asked++
		go func() {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
			defer cancel()
			b, err := c.bookies.Bookie(rctx, id)
			var ent BookieEntry
			if err == nil {
				ent, err = b.ReadEntry(rctx, md.ID, e)
			}
			answers <- answer{id, ent.Payload, err}
		}()
	}
	speculate := c.cfg.Clock.NewTimer(c.cfg.SpeculativeReadTimeout)
	defer speculate.Stop()
	askNext()
	var errs []error
	for len(errs) < len(order) {
		select {
		case a := <-answers:
			if a.err == nil {
				// Whoever was asked before a failed or is still silent.
				for _, id := range order[:slices.Index(order, a.id)] {
					c.slow.mark(id)
				}
				return a.payload, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(a.err, ErrChecksum) {
				c.count(func(s *ClientStats) { s.ChecksumErrors++ })
				c.m.checksumErrors.Inc()
				c.log.Warn("checksum mismatch, reading another replica", "ledger", md.ID, "entry", e, "bookie", a.id)
			}
			errs = append(errs, fmt.Errorf("bookie %s: %w", a.id, a.err))
		case <-speculate.Chan():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if asked < len(order) {
			askNext()
			speculate.Reset(c.cfg.SpeculativeReadTimeout)
		}
	}
	return nil, fmt.Errorf("ledger %d entry %d: %w", md.ID, e, errors.Join(errs...))
}

// UpdateLAC refreshes the LAC without waiting: it re-reads the metadata,
// and takes the LAC from it if the ledger has been closed, else from the
// bookies.
func (r *Reader) UpdateLAC(ctx context.Context) (int64, error) {
	lac, _, err := r.pollLAC(ctx, r.LastAddConfirmed(), 0, true)
	return lac, err
}

// WaitLAC blocks until the LAC moves past previous and returns it. It
// long-polls the last ensemble's bookies for entry previous+1
// (Bookie.WaitEntry), so that the entry comes back with the LAC that
// confirms it and the Read that follows needs no round trip for it. It
// asks the bookie that answered first last time, and the rest of the
// ensemble too after SpeculativeLACWait or that bookie's failure. Once the
// ledger is closed at or before previous it returns the final LAC with
// ErrLedgerClosed: nothing more will come. A poll that every bookie failed
// (none reachable) is followed by a pause of RetryInterval, so that
// bookies that fail fast are not asked again in a loop.
//
// It re-reads the metadata only after a poll that did not move the LAC:
// that is when the ledger may have been closed, or its ensemble changed.
// While entries come, a tailing reader's polls cost the bookies alone, not
// a metadata read each (one etcd read per entry, for every tailing
// reader). A caller that learns by other means that the ledger was closed
// (its managed ledger's record lists a later ledger) calls UpdateLAC.
func (r *Reader) WaitLAC(ctx context.Context, previous int64) (int64, error) {
	refresh := false
	for {
		lac, allFailed, err := r.sharedPoll(ctx, previous, refresh)
		if err != nil {
			return lac, err
		}
		if lac > previous {
			return lac, nil
		}
		if r.Closed() {
			return lac, ErrLedgerClosed
		}
		refresh = true
		if allFailed && !sleepCtx(ctx, r.c.cfg.Clock, r.c.cfg.RetryInterval) {
			return lac, ctx.Err()
		}
	}
}

// sharedPoll is WaitLAC's long-poll past previous, shared by the
// concurrent WaitLACs of r that await the same entry: the first runs it,
// on its own context, and each takes its answer. A caller whose context
// lives on when the poll ended on the runner's (a tailer that stopped
// waiting) polls again, leading the next one.
func (r *Reader) sharedPoll(ctx context.Context, previous int64, refresh bool) (lac int64, allFailed bool, err error) {
	type polled struct {
		lac       int64
		allFailed bool
	}
	key := strconv.FormatInt(previous, 10)
	if refresh {
		key += "+refresh"
	}
	for {
		ch := r.polls.DoChan(key, func() (any, error) {
			lac, allFailed, err := r.pollLAC(ctx, previous, r.c.cfg.LACPollWait, refresh)
			return polled{lac, allFailed}, err
		})
		select {
		case res := <-ch:
			if res.Err != nil && ctx.Err() == nil && (errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded)) {
				continue
			}
			p := res.Val.(polled)
			return p.lac, p.allFailed, res.Err
		case <-ctx.Done():
			return r.LastAddConfirmed(), false, ctx.Err()
		}
	}
}

// pollAnswer is one bookie's answer to a poll.
type pollAnswer struct {
	slot   int
	lac    int64
	entry  *Entry // entry previous+1, confirmed by lac; nil if not sent
	failed bool
}

// pollLAC asks the last ensemble's bookies for their LAC and returns as
// soon as one answer moves past previous (or all have answered). With wait
// it long-polls (WaitLAC's way: one bookie first, then the rest) for entry
// previous+1 and keeps that entry for Read; without, it asks every member
// at once for its LAC. With refresh it first re-reads the metadata, else
// it uses the metadata it holds. A ledger found closed in the metadata
// ends the poll with its lastEntry. allFailed says that every member
// failed the call. A bookie that holds nothing of the ledger
// (ErrNoSuchLedger: no entry of it reached that bookie yet) answers the
// LAC of an empty ledger; that is no failure, and neither is an entry it
// lacks or holds damaged (the LAC still counts; Read then deals with the
// entry).
func (r *Reader) pollLAC(ctx context.Context, previous int64, wait time.Duration, refresh bool) (lac int64, allFailed bool, err error) {
	if r.Closed() {
		return r.LastAddConfirmed(), false, nil
	}
	r.mu.Lock()
	md, preferred := r.md, r.preferred
	r.mu.Unlock()
	if refresh {
		if md, err = r.c.Metadata(ctx, r.id); err != nil {
			return r.LastAddConfirmed(), false, err
		}
	}
	if md.State == StateClosed {
		r.mu.Lock()
		r.md, r.lac = md, md.LastEntry
		r.mu.Unlock()
		return md.LastEntry, false, nil
	}
	ens := md.LastEnsemble()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan pollAnswer, len(ens))
	var wg sync.WaitGroup
	asked := make([]bool, len(ens))
	ask := func(slot int) {
		asked[slot] = true
		wg.Go(func() { answers <- r.pollOne(pctx, ens[slot], slot, previous, wait) })
	}
	askRest := func() {
		for slot := range ens {
			if !asked[slot] {
				ask(slot)
			}
		}
	}
	speculate := make(<-chan time.Time)
	if wait > 0 && len(ens) > 1 {
		ask(min(preferred, len(ens)-1))
		t := r.c.cfg.Clock.NewTimer(r.c.cfg.SpeculativeLACWait)
		defer t.Stop()
		speculate = t.Chan()
	} else {
		askRest()
	}
	best, failed, first := int64(-1), 0, -1
	var polled *Entry
collect:
	for range ens {
		var a pollAnswer
		for {
			select {
			case a = <-answers:
			case <-speculate:
				askRest()
				continue
			case <-ctx.Done():
				break collect
			}
			break
		}
		best = max(best, a.lac)
		if a.entry != nil {
			polled = a.entry
		}
		if a.failed {
			failed++
			askRest()
		}
		if best > previous {
			first = a.slot
			break
		}
	}
	cancel()
	wg.Wait()
	r.mu.Lock()
	if r.md.State != StateClosed {
		if refresh {
			// Only metadata read here replaces what the reader holds: a
			// poll on the held metadata must not put back an older copy
			// than a concurrent refresh took.
			r.md = md
		}
		r.lac = max(r.lac, best)
	}
	if polled != nil && (r.next == nil || r.next.ID < polled.ID) {
		r.next = polled
	}
	if first >= 0 {
		r.preferred = first
	}
	lac = r.lac
	r.mu.Unlock()
	return lac, failed == len(ens), ctx.Err()
}

// pollOne is one bookie's part of a poll: a long-poll read of entry
// previous+1 when wait > 0, else a LAC read.
func (r *Reader) pollOne(ctx context.Context, id string, slot int, previous int64, wait time.Duration) pollAnswer {
	ctx, cancel := context.WithTimeout(ctx, wait+r.c.cfg.ReadTimeout)
	defer cancel()
	a := pollAnswer{slot: slot, lac: -1}
	b, err := r.c.bookies.Bookie(ctx, id)
	if err == nil && wait <= 0 {
		a.lac, err = b.ReadLAC(ctx, r.id)
	} else if err == nil {
		var e BookieEntry
		e, err = b.WaitEntry(ctx, r.id, previous+1, wait)
		switch {
		case err == nil:
			a.lac = e.LAC
			if e.LAC > previous {
				a.entry = &Entry{ID: previous + 1, Payload: e.Payload}
			}
		case errors.Is(err, ErrNoSuchEntry) || errors.Is(err, ErrChecksum):
			a.lac, err = e.LAC, nil
		}
	}
	if err != nil {
		a.lac = -1
		a.failed = !errors.Is(err, ErrNoSuchLedger)
	}
	return a
}

// slowBookies remembers, for SlowBookieMemory, the bookies that failed an
// entry read or were overtaken by a speculative one, and puts them at the
// back of the read order, as BookKeeper's client does with its bookie
// failure history. It is safe for concurrent use.
type slowBookies struct {
	memory time.Duration
	clock  clockwork.Clock
	mu     sync.Mutex
	until  map[string]time.Time // bookie id -> when it may go first again
}

// mark puts id at the back of the read order for the memory from now.
func (s *slowBookies) mark(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = make(map[string]time.Time)
	}
	s.until[id] = s.clock.Now().Add(s.memory)
}

// order is the read order of an entry stored on the slots writeSet of
// ens: the write set's order, with the bookies remembered as slow moved to
// the back (in the same relative order).
func (s *slowBookies) order(ens []string, writeSet []int) []string {
	ids := make([]string, 0, len(writeSet))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var back []string
	for _, slot := range writeSet {
		id := ens[slot]
		if until, ok := s.until[id]; ok && now.Before(until) {
			back = append(back, id)
			continue
		}
		delete(s.until, id)
		ids = append(ids, id)
	}
	return append(ids, back...)
}
