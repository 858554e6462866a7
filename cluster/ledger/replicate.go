package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// The primitives auto-recovery (cluster/autorecovery) re-replicates with,
// BookKeeper's LedgerFragmentReplicator and LedgerChecker: read a ledger's
// metadata with its revision, copy the entries one ensemble slot of a
// fragment holds onto a replacement bookie, swap the replacement in by CAS,
// and check which copies of sampled entries are missing.
//
// Why a copy can never leave the metadata pointing at a bookie without the
// data: the swap is published only after every entry of the slot has been
// acknowledged by the replacement (on its fsynced journal), and only by a
// CAS at the revision the copy was planned from, so the fragment it copied
// is the fragment it swaps. Only fragments that no one else writes are
// repaired: every fragment of a CLOSED ledger, and every fragment but the
// last of an OPEN one. Their entries are all confirmed and their ranges
// final (a writer appends fragments and amends only its last one), and the
// writer accepts the swap (onlyRepairs). A ledger IN_RECOVERY is left to its
// recoverer (ErrInRecovery), and one that goes into recovery during a copy
// fails the repair's CAS: the repair is tried again once it is closed.

// Snapshot is a ledger's metadata and the store revision it was read at:
// what a repair's CAS names.
type Snapshot struct {
	Metadata *Metadata
	Revision int64
}

// Snapshot reads ledger id's metadata and its revision.
func (c *Client) Snapshot(ctx context.Context, id int64) (Snapshot, error) {
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	v, err := readMetadata(mctx, c.store, c.cfg.Region, id)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Metadata: v.md, Revision: v.modRev}, nil
}

// Ledgers lists the metadata of every ledger of the region, in id order. A
// value that does not decode is skipped and counted in bad: it is a ledger
// no client can use, which the caller reports.
func (c *Client) Ledgers(ctx context.Context) (ledgers []Snapshot, bad int, err error) {
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	kvs, _, err := c.store.List(mctx, bkproto.LedgersPrefix(c.cfg.Region))
	if err != nil {
		return nil, 0, fmt.Errorf("list ledgers: %w", err)
	}
	for _, kv := range kvs {
		md, err := decodeMetadata(kv.Value)
		if err != nil {
			bad++
			continue
		}
		ledgers = append(ledgers, Snapshot{Metadata: md, Revision: kv.ModRevision})
	}
	slices.SortFunc(ledgers, func(a, b Snapshot) int { return cmp.Compare(a.Metadata.ID, b.Metadata.ID) })
	return ledgers, bad, nil
}

// FragmentEntries returns the entries fragment i holds, first..last
// inclusive (last < first: none), and whether that range is final, so that
// the fragment may be repaired: true for every fragment of a closed ledger
// and every fragment but the last of one that is not. The last fragment of
// an open ledger is its writer's, and of one in recovery its recoverer's.
func (m *Metadata) FragmentEntries(i int) (first, last int64, final bool) {
	first = m.Fragments[i].FirstEntry
	if i+1 < len(m.Fragments) {
		return first, m.Fragments[i+1].FirstEntry - 1, true
	}
	if m.State != StateClosed {
		return first, -1, false
	}
	return first, m.LastEntry, true
}

// Stores reports whether ensemble slot holds entry: whether slot is in the
// entry's write set.
func (q Quorum) Stores(entry int64, slot int) bool {
	e := int64(q.Ensemble)
	return (int64(slot)-entry%e+e)%e < int64(q.Write)
}

// CopyOptions tunes CopyFragment.
type CopyOptions struct {
	// Throttle, if set, is called with each entry's size before the entry
	// is written, and may block to hold a rate; its error ends the copy.
	Throttle func(ctx context.Context, bytes int) error
	// Copied, if set, is called with each entry's size once the
	// replacement has acknowledged it.
	Copied func(bytes int)
	// InFlight bounds the entries copied at once: 1..1024, 0 means 16.
	InFlight int
}

// CopyStats says what a copy wrote.
type CopyStats struct {
	Entries int64
	Bytes   int64
}

// copyAttempts is how many times a copy tries one add on the replacement
// before it gives the replacement up (ErrReplacementFailed).
const copyAttempts = 3

// CopyFragment copies every entry that ensemble slot of fragment frag
// holds onto bookie to, as recovery adds: byte for byte (the payload read
// and verified against its checksum, which the add carries again), with
// the LAC the source answered with, which is a confirmed one. Each entry is
// read from a member of its write set that has a good copy: the others
// first, the bookie at slot itself last (it is often the one gone). It
// returns once the replacement has acknowledged every entry, that is, has
// it on its fsynced journal.
//
// Errors: ErrNoGoodCopy when every member of an entry's write set answered
// that it lacks the entry or holds it damaged, or (the bookie at slot) did
// not answer: the ledger has lost it; ErrBookieUnavailable when no good
// copy was found but some other member did not answer (try again later); ErrReplacementFailed when to refused or failed
// the adds (choose another replacement); ErrLedgerOpen when the fragment is
// not final (FragmentEntries); ErrInRecovery when md is IN_RECOVERY.
func (c *Client) CopyFragment(ctx context.Context, md *Metadata, frag, slot int, to string, opts CopyOptions) (CopyStats, error) {
	first, last, final := md.FragmentEntries(frag)
	if md.State == StateInRecovery {
		return CopyStats{}, fmt.Errorf("%w: ledger %d", ErrInRecovery, md.ID)
	}
	if !final {
		return CopyStats{}, fmt.Errorf("%w: ledger %d fragment %d is its writer's or recoverer's", ErrLedgerOpen, md.ID, frag)
	}
	q := md.Quorum()
	inFlight := opts.InFlight
	if inFlight <= 0 {
		inFlight = 16
	}
	inFlight = min(inFlight, 1024)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		stats    CopyStats
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		mu.Unlock()
	}
	sem := make(chan struct{}, inFlight)
entries:
	for e := first; e <= last; e++ {
		if !q.Stores(e, slot) {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break entries
		}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := c.copyEntry(ctx, md, frag, slot, e, to, opts.Throttle)
			if err != nil {
				fail(err)
				return
			}
			if opts.Copied != nil {
				opts.Copied(n)
			}
			mu.Lock()
			stats.Entries++
			stats.Bytes += int64(n)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return stats, firstErr
}

// copyEntry reads entry e from a good copy and adds it to to.
func (c *Client) copyEntry(ctx context.Context, md *Metadata, frag, slot int, e int64, to string, throttle func(context.Context, int) error) (int, error) {
	ent, err := c.readForCopy(ctx, md, frag, slot, e)
	if err != nil {
		return 0, err
	}
	if throttle != nil {
		if err := throttle(ctx, len(ent.Payload)); err != nil {
			return 0, err
		}
	}
	req := AddRequest{LedgerID: md.ID, EntryID: e, LAC: ent.LAC, Payload: ent.Payload, Recovery: true, MasterKey: md.MasterKey()}
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.cfg.AddTimeout)
		b, err := c.bookies.Bookie(actx, to)
		if err == nil {
			err = b.AddEntry(actx, req)
		}
		cancel()
		switch {
		case err == nil:
			return len(ent.Payload), nil
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case errors.Is(err, ErrBookieReadOnly) || attempt+1 >= copyAttempts:
			return 0, fmt.Errorf("%w: bookie %s, ledger %d entry %d: %w", ErrReplacementFailed, to, md.ID, e, err)
		}
		if !sleepCtx(ctx, c.cfg.Clock, c.cfg.RetryInterval) {
			return 0, ctx.Err()
		}
	}
}

// readForCopy reads entry e from the members of its write set, one after
// the other, until one returns it with a good checksum.
func (c *Client) readForCopy(ctx context.Context, md *Metadata, frag, slot int, e int64) (BookieEntry, error) {
	ens := md.Fragments[frag].Ensemble
	order := c.slow.order(ens, md.Quorum().WriteSet(e))
	lost := ens[slot]
	if i := slices.Index(order, lost); i >= 0 {
		order = append(slices.Delete(order, i, i+1), lost)
	}
	var errs []error
	unavailable := false
	for _, id := range order {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
		b, err := c.bookies.Bookie(rctx, id)
		var ent BookieEntry
		if err == nil {
			ent, err = b.ReadEntry(rctx, md.ID, e)
		}
		cancel()
		if err == nil {
			return ent, nil
		}
		if ctx.Err() != nil {
			return BookieEntry{}, ctx.Err()
		}
		if errors.Is(err, ErrChecksum) {
			c.count(func(s *ClientStats) { s.ChecksumErrors++ })
			c.m.checksumErrors.Inc()
			c.log.Warn("checksum mismatch, copying from another replica", "ledger", md.ID, "entry", e, "bookie", id)
		}
		if id != lost && !errors.Is(err, ErrNoSuchEntry) && !errors.Is(err, ErrNoSuchLedger) && !errors.Is(err, ErrChecksum) {
			// The bookie being replaced is usually gone: its silence
			// says nothing, and must not turn a lost entry into a
			// retry for ever.
			unavailable = true
		}
		errs = append(errs, fmt.Errorf("bookie %s: %w", id, err))
	}
	if unavailable {
		return BookieEntry{}, fmt.Errorf("%w: ledger %d entry %d: no good copy reached: %w", ErrBookieUnavailable, md.ID, e, errors.Join(errs...))
	}
	return BookieEntry{}, fmt.Errorf("%w: ledger %d entry %d: %w", ErrNoGoodCopy, md.ID, e, errors.Join(errs...))
}

// Swap replaces bookie From with To at ensemble slot Slot of fragment
// Fragment.
type Swap struct {
	Fragment int
	Slot     int
	From, To string
}

// ApplyRepair writes s's metadata with swaps applied, by CAS at s.Revision,
// and only while guardKey is still at revision guardRev (the repairer's
// claim on the ledger; guardKey "" guards nothing). Every swap must name a
// final fragment (FragmentEntries) and the bookie s has at its slot, and a
// ledger IN_RECOVERY is refused (ErrInRecovery): it is its recoverer's
// until closed, and a repair landing between the recoverer's CASes would
// send it back to its start, so repairs wait and never livelock it. A
// conflict (someone changed the ledger, or the claim was lost) is
// meta.ErrConflict, wrapped: read a new snapshot and plan again; the
// copies already made may still serve if the fragment is unchanged. A
// ledger deleted meanwhile is ErrLedgerNotFound.
func (c *Client) ApplyRepair(ctx context.Context, s Snapshot, swaps []Swap, guardKey string, guardRev int64) (Snapshot, error) {
	md := s.Metadata.clone()
	if md.State == StateInRecovery {
		return Snapshot{}, fmt.Errorf("%w: ledger %d", ErrInRecovery, md.ID)
	}
	for _, sw := range swaps {
		if sw.Fragment < 0 || sw.Fragment >= len(md.Fragments) || sw.Slot < 0 || sw.Slot >= md.EnsembleSize {
			return Snapshot{}, fmt.Errorf("%w: ledger %d: no fragment %d slot %d", ErrBadMetadata, md.ID, sw.Fragment, sw.Slot)
		}
		if _, _, final := md.FragmentEntries(sw.Fragment); !final {
			return Snapshot{}, fmt.Errorf("%w: ledger %d fragment %d is its writer's or recoverer's", ErrLedgerOpen, md.ID, sw.Fragment)
		}
		ens := md.Fragments[sw.Fragment].Ensemble
		if ens[sw.Slot] != sw.From || slices.Contains(ens, sw.To) {
			return Snapshot{}, fmt.Errorf("%w: ledger %d fragment %d: slot %d holds %s, not %s, or %s is already a member",
				meta.ErrConflict, md.ID, sw.Fragment, sw.Slot, ens[sw.Slot], sw.From, sw.To)
		}
		ens[sw.Slot] = sw.To
	}
	b, err := encodeMetadata(md)
	if err != nil {
		return Snapshot{}, err
	}
	mctx, cancel := c.metaCtx(ctx)
	defer cancel()
	key := LedgerKey(c.cfg.Region, md.ID)
	var rev int64
	if guardKey == "" {
		rev, err = c.store.Update(mctx, key, b, s.Revision)
	} else {
		rev, err = c.store.UpdateGuarded(mctx, key, b, s.Revision, guardKey, guardRev)
	}
	if errors.Is(err, meta.ErrConflict) {
		if _, gerr := c.store.Get(mctx, key); errors.Is(gerr, meta.ErrNotFound) {
			return Snapshot{}, fmt.Errorf("%w: %d, deleted during its repair", ErrLedgerNotFound, md.ID)
		}
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("repair ledger %d: %w", md.ID, err)
	}
	c.m.ensembleChanges.WithLabelValues("repair").Add(float64(len(swaps)))
	return Snapshot{Metadata: md, Revision: rev}, nil
}

// MissingCopy is a copy of an entry that a member of its write set lacks
// or holds damaged.
type MissingCopy struct {
	Entry  int64
	Bookie string
	Err    error
}

// CheckCopies asks every member of each entry's write set for it (entries
// must not exceed the ledger's confirmed range) and returns the copies
// found missing or damaged. A member that does not answer is not counted:
// whether a bookie is gone is the auditor's other check.
func (c *Client) CheckCopies(ctx context.Context, md *Metadata, entries []int64) ([]MissingCopy, error) {
	var (
		mu      sync.Mutex
		missing []MissingCopy
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, readsInFlight)
	q := md.Quorum()
	for _, e := range entries {
		ens := md.EnsembleFor(e)
		for _, slot := range q.WriteSet(e) {
			id := ens[slot]
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return nil, ctx.Err()
			}
			wg.Go(func() {
				defer func() { <-sem }()
				rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
				defer cancel()
				b, err := c.bookies.Bookie(rctx, id)
				if err == nil {
					_, err = b.ReadEntry(rctx, md.ID, e)
				}
				if errors.Is(err, ErrNoSuchEntry) || errors.Is(err, ErrNoSuchLedger) || errors.Is(err, ErrChecksum) {
					mu.Lock()
					missing = append(missing, MissingCopy{Entry: e, Bookie: id, Err: err})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(missing, func(a, b MissingCopy) int {
		return cmp.Or(cmp.Compare(a.Entry, b.Entry), cmp.Compare(a.Bookie, b.Bookie))
	})
	return missing, nil
}
