package autorecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// A replication worker. Its goroutine (workerLoop) owns its claim lease
// and the times it may look at each ledger again. It wakes when marks
// change or every RetryInterval, and repairs marked ledgers one at a time,
// each under a claim: bkproto.ClaimKey created under the worker's lease,
// so that one worker at a time copies a ledger's entries and a dead
// worker's ledger passes to another within ClaimTTL. Every metadata swap it
// makes is guarded by the claim's revision (meta.Store.UpdateGuarded): a
// worker that lost its claim (its lease lapsed while it was cut off or
// paused) can copy, but never publish.

// claimValue is what a claim says, for `meridian admin bookies
// under-replicated`.
type claimValue struct {
	Worker string `json:"worker"`
	Since  int64  `json:"since"`
}

// workerLoop repairs marked ledgers until the service closes, looking
// again whenever wake is poked.
func (s *Service) workerLoop(i int, wake <-chan struct{}) {
	w := &worker{s: s, id: fmt.Sprintf("%s/%d", s.cfg.WorkerID, i), retryAt: make(map[int64]time.Time)}
	defer w.dropLease()
	tick := s.cfg.Clock.NewTicker(s.cfg.RetryInterval)
	defer tick.Stop()
	for {
		w.pass()
		select {
		case <-wake:
		case <-tick.Chan():
		case <-s.ctx.Done():
			return
		}
	}
}

// worker is one worker goroutine's state.
type worker struct {
	s       *Service
	id      string
	lease   meta.Lease
	retryAt map[int64]time.Time // ledgers left for later, and until when
}

// pass repairs every marked ledger it can claim, until none is left that
// is neither claimed nor left for later.
func (w *worker) pass() {
	s := w.s
	for s.ctx.Err() == nil {
		if p, err := s.paused(s.ctx); err != nil || p {
			return
		}
		marks, err := listMarks(s.ctx, s.store, s.cfg.Region)
		if err != nil {
			s.log.Warn("listing under-replicated ledgers failed", "err", err)
			return
		}
		now := s.cfg.Clock.Now()
		var todo []storedMark
		for _, sm := range marks {
			if now.After(w.retryAt[sm.Ledger]) {
				todo = append(todo, sm)
			}
		}
		for id := range w.retryAt {
			if !slices.ContainsFunc(marks, func(sm storedMark) bool { return sm.Ledger == id }) {
				delete(w.retryAt, id)
			}
		}
		if len(todo) == 0 {
			return
		}
		// Workers start at different places, so that several do not
		// queue on the same claim.
		start := s.intn(len(todo))
		did := false
		for k := range todo {
			sm := todo[(start+k)%len(todo)]
			ok, err := w.claimAndRepair(sm.Ledger)
			if err != nil {
				s.log.Warn("repair attempt failed", "ledger", sm.Ledger, "err", err)
			}
			if ok {
				did = true
				break // list again: the auditor may have marked more
			}
		}
		if !did {
			return
		}
	}
}

// currentLease returns the worker's claim lease, granting a new one when
// it has none or the last ended.
func (w *worker) currentLease() (meta.Lease, error) {
	if w.lease != nil {
		select {
		case <-w.lease.Done():
			w.lease = nil
		default:
			return w.lease, nil
		}
	}
	l, err := w.s.store.Grant(w.s.ctx, w.s.cfg.ClaimTTL)
	if err != nil {
		return nil, err
	}
	w.lease = l
	return l, nil
}

func (w *worker) dropLease() {
	if w.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		w.lease.Revoke(ctx)
		cancel()
	}
}

// claimAndRepair claims ledger id and repairs it; it reports whether it
// got the claim.
func (w *worker) claimAndRepair(id int64) (bool, error) {
	s := w.s
	lease, err := w.currentLease()
	if err != nil {
		return false, err
	}
	v, err := meta.EncodeJSON(1, claimValue{Worker: w.id, Since: w.s.cfg.Clock.Now().UnixMilli()})
	if err != nil {
		return false, err
	}
	key := bkproto.ClaimKey(s.cfg.Region, id)
	rev, err := s.store.Create(s.ctx, key, v, lease.ID())
	if errors.Is(err, meta.ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(s.ctx)
	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-lease.Done():
			cancel() // the claim is lost with the lease
		case <-ctx.Done():
		}
	})
	start := time.Now()
	result, rerr := w.repair(ctx, id, key, rev)
	cancel()
	watch.Wait()
	s.m.repairs.WithLabelValues(result).Observe(time.Since(start).Seconds())
	if result != resultRepaired {
		w.retryAt[id] = s.cfg.Clock.Now().Add(s.cfg.RetryInterval)
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(s.ctx), 5*time.Second)
	if err := s.store.Delete(dctx, key, rev); err != nil && !errors.Is(err, meta.ErrConflict) {
		s.log.Warn("releasing a claim failed (it lapses with the lease)", "ledger", id, "err", err)
	}
	dcancel()
	return true, rerr
}

// The outcomes of one repair, as meridian_autorecovery_repair_seconds
// labels them.
const (
	resultRepaired = "repaired"
	resultRetry    = "retry"
	resultFailed   = "failed"
)

// repair re-replicates ledger id under the claim at claimKey (revision
// claimRev) until its mark can be deleted, or it must be left for later.
// One slot at a time: choose a replacement, copy the slot's entries to
// it, swap it in by CAS, then plan again from the new metadata, so that a
// worker that dies loses at most one slot's copy.
func (w *worker) repair(ctx context.Context, id int64, claimKey string, claimRev int64) (string, error) {
	s := w.s
	log := s.log.With("ledger", id)
	start := time.Now()
	var copied ledger.CopyStats
	var failedTargets []string
	for {
		if p, err := s.paused(ctx); err != nil || p {
			return resultRetry, err
		}
		sm, ok, err := readMark(ctx, s.store, s.cfg.Region, id)
		if err != nil || !ok {
			return resultRetry, err
		}
		snap, err := s.lc.Snapshot(ctx, id)
		if errors.Is(err, ledger.ErrLedgerNotFound) {
			// Deleted: nothing is left to repair, and its copies are
			// garbage the bookies collect.
			return resultRepaired, w.unmark(ctx, sm)
		}
		if err != nil {
			return resultRetry, err
		}
		repairs, waiting := plan(snap.Metadata, sm.Mark.Bookies)
		if len(repairs) == 0 {
			if waiting {
				// The last fragment of an open ledger, or a ledger in
				// recovery: its writer or recoverer moves off the bookie
				// (an ensemble change, a close), then it is ours.
				log.Debug("ledger waits for its writer or recoverer", "state", snap.Metadata.State)
				return resultRetry, nil
			}
			if err := w.unmark(ctx, sm); err != nil {
				if errors.Is(err, meta.ErrConflict) {
					continue // the auditor added a bookie
				}
				return resultRetry, err
			}
			s.m.ledgersReplicated.Inc()
			log.Info("ledger repaired", "bytes", copied.Bytes, "entries", copied.Entries, "seconds", time.Since(start).Seconds(),
				"replaced", sm.Mark.Bookies)
			return resultRepaired, nil
		}
		r := repairs[0]
		to, err := s.replacement(snap.Metadata, r, append(slices.Clone(sm.Mark.Bookies), failedTargets...))
		if err != nil {
			return w.note(ctx, sm, err)
		}
		st, err := s.lc.CopyFragment(ctx, snap.Metadata, r.Fragment, r.Slot, to, ledger.CopyOptions{
			Throttle: s.throttle, Copied: s.copied, InFlight: s.cfg.CopyInFlight,
		})
		copied.Entries += st.Entries
		copied.Bytes += st.Bytes
		switch {
		case err == nil:
		case errors.Is(err, ledger.ErrReplacementFailed):
			s.m.replacementsFailed.Inc()
			log.Warn("replacement bookie failed the copy; choosing another", "bookie", to, "err", err)
			failedTargets = append(failedTargets, to)
			continue
		case errors.Is(err, ledger.ErrNoGoodCopy):
			s.m.unableToRead.Inc()
			log.Error("an entry has no good copy left: the ledger stays marked", "err", err)
			return w.note(ctx, sm, err)
		case errors.Is(err, ledger.ErrInRecovery), errors.Is(err, ledger.ErrLedgerOpen), ctx.Err() != nil:
			return resultRetry, nil
		default:
			return w.note(ctx, sm, err)
		}
		if err := w.swap(ctx, snap, r, to, claimKey, claimRev); err != nil {
			if errors.Is(err, ledger.ErrLedgerNotFound) {
				return resultRepaired, w.unmark(ctx, sm)
			}
			if errors.Is(err, errReplan) {
				continue
			}
			return resultRetry, err
		}
		log.Info("fragment re-replicated", "fragment", r.Fragment, "from", r.Bookie, "to", to,
			"entries", st.Entries, "bytes", st.Bytes)
	}
}

// errReplan: the ledger changed so that the copy just made no longer fits;
// plan again from its new metadata.
var errReplan = errors.New("autorecovery: ledger changed under the repair")

// swap publishes one slot's copy by CAS at snap's revision, guarded by the
// claim. A conflict that only the ledger's writer made (a new fragment, a
// close) leaves the copied fragment as it was: the swap is made again on
// the new metadata. Anything else (the slot changed, recovery began, the
// claim was lost) is errReplan or the claim's loss.
func (w *worker) swap(ctx context.Context, snap ledger.Snapshot, r slotRepair, to, claimKey string, claimRev int64) error {
	s := w.s
	sw := ledger.Swap{Fragment: r.Fragment, Slot: r.Slot, From: r.Bookie, To: to}
	for {
		_, err := s.lc.ApplyRepair(ctx, snap, []ledger.Swap{sw}, claimKey, claimRev)
		if err == nil {
			return nil
		}
		if errors.Is(err, ledger.ErrInRecovery) {
			return errReplan
		}
		if !errors.Is(err, meta.ErrConflict) {
			return err
		}
		if kv, gerr := s.store.Get(ctx, claimKey); gerr != nil || kv.ModRevision != claimRev {
			return fmt.Errorf("the claim on ledger %d was lost: %w", snap.Metadata.ID, ctx.Err())
		}
		fresh, err := s.lc.Snapshot(ctx, snap.Metadata.ID)
		if err != nil {
			return err
		}
		old, cur := snap.Metadata, fresh.Metadata
		first, last, final := old.FragmentEntries(r.Fragment)
		if r.Fragment >= len(cur.Fragments) {
			return errReplan
		}
		f2, l2, final2 := cur.FragmentEntries(r.Fragment)
		if !final || !final2 || first != f2 || last != l2 || cur.State == ledger.StateInRecovery ||
			!slices.Equal(old.Fragments[r.Fragment].Ensemble, cur.Fragments[r.Fragment].Ensemble) {
			return errReplan
		}
		snap = fresh
	}
}

// replacement chooses a bookie to take r's slot, by the placement rules
// of a new ensemble (racks and the ledger's bookie groups included),
// outside the fragment's ensemble and exclude.
func (s *Service) replacement(md *ledger.Metadata, r slotRepair, exclude []string) (string, error) {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	ensemble := md.Fragments[r.Fragment].Ensemble
	candidates := s.lc.Directory().Spares(md.BookieGroups, slices.Concat(exclude, ensemble))
	id, err := topology.ReplaceBookie(ensemble, r.Slot, candidates, exclude, s.rnd)
	if err != nil {
		return "", fmt.Errorf("%w: ledger %d fragment %d: %v", ErrNoSpareBookie, md.ID, r.Fragment, err)
	}
	return id, nil
}

// throttle holds the workers' copies to RateBytesPerSecond; it is called
// with each entry read, before it is written.
func (s *Service) throttle(ctx context.Context, n int) error {
	s.m.entriesRead.Inc()
	s.m.bytesRead.Observe(float64(n))
	for n > 0 {
		part := min(n, s.limiter.Burst())
		// ReserveN on the clock's time rather than WaitN, which would
		// wait on the wall clock.
		now := s.cfg.Clock.Now()
		r := s.limiter.ReserveN(now, part)
		if d := r.DelayFrom(now); d > 0 && !sleep(ctx, s.cfg.Clock, d) {
			r.CancelAt(s.cfg.Clock.Now())
			return ctx.Err()
		}
		n -= part
	}
	return nil
}

// copied counts an entry the replacement acknowledged.
func (s *Service) copied(n int) {
	s.m.entriesWritten.Inc()
	s.m.bytesWritten.Observe(float64(n))
}

// unmark deletes a repaired (or deleted) ledger's mark.
func (w *worker) unmark(ctx context.Context, sm storedMark) error {
	return w.s.store.Delete(ctx, bkproto.UnderReplicatedKey(w.s.cfg.Region, sm.Ledger), sm.Revision)
}

// note records why a repair stopped short on the ledger's mark, so that
// `meridian admin bookies under-replicated` shows it, and leaves the
// ledger for later.
func (w *worker) note(ctx context.Context, sm storedMark, cause error) (string, error) {
	if _, err := noteError(ctx, w.s.store, w.s.cfg.Region, sm, cause, w.s.cfg.Clock.Now()); err != nil && !errors.Is(err, meta.ErrConflict) {
		w.s.log.Warn("noting a repair's error on its mark failed", "ledger", sm.Ledger, "err", err)
	}
	return resultFailed, cause
}
