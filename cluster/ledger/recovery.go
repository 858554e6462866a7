package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// OpenAndRecover opens a ledger whose writer may be gone and closes it,
// fencing the writer out first, as DESIGN §4 lays down:
//
//  1. CAS the ledger to IN_RECOVERY (if it is OPEN). From here on the old
//     writer's ensemble-change CAS fails.
//  2. Fence the last ensemble. Bookies persist the fence before answering.
//  3. Wait until (Qw-Qa)+1 members of every write quorum have answered. No
//     write quorum then has Qa unfenced members, so the old writer can
//     never confirm another entry; its next add fails.
//  4. Read forward from the highest LAC returned. An entry is absent only
//     when (Qw-Qa)+1 members of its write quorum answer NoSuchEntry: fewer
//     might all be bookies the writer never reached while Qa others acked.
//     A timeout or an error is retried, never read as "end of ledger".
//     Recovery reads fence too, so a bookie that answered NoSuchEntry can
//     never later take the old writer's add.
//  5. Write every entry found back to a full Qw (recovery adds, which fenced
//     bookies accept), then CAS to CLOSED with lastEntry.
//
// Two recoverers may run at once: both fence, read and write back the same
// entries, and the CLOSED CAS decides. The loser re-reads and returns the
// winner's result. Recovery blocks (retrying) while it cannot reach enough
// bookies; ctx bounds it.
func (c *Client) OpenAndRecover(ctx context.Context, id int64) (*Reader, error) {
	for {
		mctx, cancel := c.metaCtx(ctx)
		v, err := readMetadata(mctx, c.store, c.cfg.Region, id)
		if err == nil && v.md.State == StateOpen {
			md := v.md.clone()
			md.State = StateInRecovery
			v, err = casMetadata(mctx, c.store, c.cfg.Region, md, v.modRev)
			if errors.Is(err, meta.ErrConflict) {
				cancel()
				continue
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
		if v.md.State == StateClosed {
			return c.closedReader(v.md), nil
		}
		closed, err := c.recover(ctx, v)
		if errors.Is(err, meta.ErrConflict) {
			// Another recoverer closed the ledger (or changed it) first.
			c.m.recoveries.WithLabelValues("lost_race").Inc()
			continue
		}
		if err != nil {
			return nil, err
		}
		c.m.recoveries.WithLabelValues("closed").Inc()
		return c.closedReader(closed.md), nil
	}
}

func (c *Client) recover(ctx context.Context, v versioned) (versioned, error) {
	md := v.md
	log := c.log.With("ledger", md.ID)
	maxLAC, err := c.fence(ctx, md)
	if err != nil {
		return versioned{}, err
	}
	// Entries before the last fragment were confirmed when it was added.
	start := max(maxLAC, md.Fragments[len(md.Fragments)-1].FirstEntry-1)
	var found [][]byte
	for e := start + 1; ; e++ {
		data, present, err := c.recoveryRead(ctx, md, e)
		if err != nil {
			return versioned{}, err
		}
		if !present {
			break
		}
		found = append(found, data)
	}
	v, err = c.writeBack(ctx, v, start, found)
	if err != nil {
		return versioned{}, err
	}
	md = v.md
	closed := md.clone()
	closed.State = StateClosed
	closed.LastEntry = start + int64(len(found))
	closed.Length = -1
	if closed.LastEntry < 0 {
		closed.Length = 0
	}
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	nv, err := casMetadata(mctx, c.store, c.cfg.Region, closed, v.modRev)
	if err != nil {
		return versioned{}, err
	}
	log.Info("ledger recovered", "lac", maxLAC, "recovered", len(found), "lastEntry", closed.LastEntry)
	return nv, nil
}

// fence fences every member of the last ensemble, retrying the ones that do
// not answer, until (Qw-Qa)+1 members of every write quorum have; it returns
// the highest LAC they reported.
func (c *Client) fence(ctx context.Context, md *Metadata) (int64, error) {
	ens := md.LastEnsemble()
	q := md.Quorum()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		slot int
		lac  int64
	}
	answers := make(chan answer, len(ens))
	var wg sync.WaitGroup
	// Stop the stragglers (a dead bookie is retried forever) before waiting.
	defer func() {
		cancel()
		wg.Wait()
	}()
	for slot, id := range ens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lac, err := retry(fctx, c.cfg.Clock, c.cfg.RetryInterval, func() (int64, error) {
				rctx, rcancel := context.WithTimeout(fctx, c.cfg.ReadTimeout)
				defer rcancel()
				b, err := c.bookies.Bookie(rctx, id)
				if err != nil {
					return 0, err
				}
				return b.Fence(rctx, md.ID, md.MasterKey())
			})
			if err == nil {
				answers <- answer{slot, lac}
			}
		}()
	}
	answered := make([]bool, len(ens))
	maxLAC := int64(-1)
	for !q.FenceCovered(answered) {
		select {
		case a := <-answers:
			answered[a.slot] = true
			maxLAC = max(maxLAC, a.lac)
		case <-ctx.Done():
			return 0, fmt.Errorf("ledger %d: fencing: %w", md.ID, ctx.Err())
		}
	}
	return maxLAC, nil
}

// recoveryRead decides whether entry e exists. It sends a fencing read to
// every member of e's write quorum and retries those that fail until one
// returns the entry (present) or (Qw-Qa)+1 answer NoSuchEntry (absent).
func (c *Client) recoveryRead(ctx context.Context, md *Metadata, e int64) ([]byte, bool, error) {
	ens := md.EnsembleFor(e)
	q := md.Quorum()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		data   []byte
		absent bool
	}
	slots := q.WriteSet(e)
	answers := make(chan answer, len(slots))
	var wg sync.WaitGroup
	// Stop the stragglers (a dead bookie is retried forever) before waiting.
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, slot := range slots {
		id := ens[slot]
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := retry(rctx, c.cfg.Clock, c.cfg.RetryInterval, func() ([]byte, error) {
				cctx, ccancel := context.WithTimeout(rctx, c.cfg.ReadTimeout)
				defer ccancel()
				b, err := c.bookies.Bookie(cctx, id)
				if err != nil {
					return nil, err
				}
				ent, err := b.FencingRead(cctx, md.ID, e, md.MasterKey())
				if errors.Is(err, ErrNoSuchEntry) || errors.Is(err, ErrNoSuchLedger) {
					return nil, errAbsent
				}
				if errors.Is(err, ErrChecksum) {
					c.count(func(s *ClientStats) { s.ChecksumErrors++ })
					c.m.checksumErrors.Inc()
				}
				return ent.Payload, err
			})
			switch {
			case err == nil:
				answers <- answer{data: data}
			case errors.Is(err, errAbsent):
				answers <- answer{absent: true}
			}
		}()
	}
	absent := 0
	for {
		select {
		case a := <-answers:
			if !a.absent {
				return a.data, true, nil
			}
			absent++
			if absent >= q.AbsentThreshold() {
				return nil, false, nil
			}
		case <-ctx.Done():
			return nil, false, fmt.Errorf("ledger %d: recovery read of entry %d: %w", md.ID, e, ctx.Err())
		}
	}
}

// errAbsent ends a recovery read's retries: the bookie answered NoSuchEntry.
var errAbsent = errors.New("entry absent on bookie")

// recoveryAttempts is how many times recovery tries one add on one bookie
// before it treats the bookie as failed and looks for a replacement.
const recoveryAttempts = 3

// writeBack writes the recovered entries start+1... to a full write quorum
// each, as recovery adds (which fenced bookies accept). They all lie in the
// last fragment, since start is at least its first entry minus one.
//
// A bookie that keeps failing (a dead bookie must not block recovery, or its
// topic could never move) is replaced by a spare: the entries are first
// written in full to the new ensemble, and only then is the new fragment,
// starting at start+1, published by CAS. Publishing first would let a
// recoverer that takes over after a crash read an entry from a new ensemble
// that holds too few copies of it, and call a confirmed entry absent. With no
// spare it waits and tries again: the bookie may come back.
func (c *Client) writeBack(ctx context.Context, v versioned, start int64, found [][]byte) (versioned, error) {
	if len(found) == 0 {
		return v, nil
	}
	md := v.md
	ens := slices.Clone(md.LastEnsemble())
	var dead []string
	for {
		failed := c.writeRound(ctx, md, ens, start, found)
		if err := ctx.Err(); err != nil {
			return versioned{}, fmt.Errorf("ledger %d: writing back recovered entries: %w", md.ID, err)
		}
		if len(failed) == 0 {
			break
		}
		dead = append(dead, failed...)
		replaced := false
		for slot, b := range ens {
			if slices.Contains(failed, b) {
				if r, ok := c.replace(md.BookieGroups, ens, slot, dead); ok {
					ens[slot] = r
					replaced = true
				}
			}
		}
		if !replaced {
			c.log.Warn("recovery cannot write back to full quorum and has no spare; retrying", "ledger", md.ID, "failed", failed)
			if !sleepCtx(ctx, c.cfg.Clock, c.cfg.RetryInterval) {
				return versioned{}, ctx.Err()
			}
			dead = nil
		}
	}
	if slices.Equal(ens, md.LastEnsemble()) {
		return v, nil
	}
	nmd := md.clone()
	if last := &nmd.Fragments[len(nmd.Fragments)-1]; last.FirstEntry == start+1 {
		last.Ensemble = ens
	} else {
		nmd.Fragments = append(nmd.Fragments, Fragment{FirstEntry: start + 1, Ensemble: ens})
	}
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	nv, err := casMetadata(mctx, c.store, c.cfg.Region, nmd, v.modRev)
	if err != nil {
		return versioned{}, err
	}
	c.m.ensembleChanges.WithLabelValues("recovery").Inc()
	c.log.Info("recovery changed ensemble", "ledger", md.ID, "from", md.LastEnsemble(), "to", ens, "firstEntry", start+1)
	return nv, nil
}

// writeRound writes every recovered entry to its write set in ens, one
// goroutine per bookie, and returns the bookies that failed an entry
// recoveryAttempts times in a row. Recovery adds carry LAC=start, an entry
// every recoverer keeps, so a tailing reader is never shown an entry past
// the final lastEntry, whoever wins.
func (c *Client) writeRound(ctx context.Context, md *Metadata, ens []string, start int64, found [][]byte) []string {
	id, q, key := md.ID, md.Quorum(), md.MasterKey()
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for slot, bid := range ens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, data := range found {
				e := start + 1 + int64(i)
				if !slices.Contains(q.WriteSet(e), slot) {
					continue
				}
				var err error
				for attempt := 0; attempt < recoveryAttempts; attempt++ {
					if attempt > 0 && !sleepCtx(ctx, c.cfg.Clock, c.cfg.RetryInterval) {
						return
					}
					actx, cancel := context.WithTimeout(ctx, c.cfg.AddTimeout)
					var b Bookie
					if b, err = c.bookies.Bookie(actx, bid); err == nil {
						err = b.AddEntry(actx, AddRequest{LedgerID: id, EntryID: e, LAC: start, Payload: data, Recovery: true, MasterKey: key})
					}
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						c.log.Warn("recovery write-back failed", "ledger", id, "entry", e, "bookie", bid, "err", err)
						mu.Lock()
						failed = append(failed, bid)
						mu.Unlock()
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

// retry calls f until it succeeds, returns errAbsent, or ctx ends, pausing
// interval on clock between attempts.
func retry[T any](ctx context.Context, clock clockwork.Clock, interval time.Duration, f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err == nil || errors.Is(err, errAbsent) {
			return v, err
		}
		if !sleepCtx(ctx, clock, interval) {
			var zero T
			return zero, ctx.Err()
		}
	}
}
