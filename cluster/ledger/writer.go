package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// Writer is the only writer of one OPEN ledger.
//
// Ownership: one goroutine (run) owns all of the writer's state: the
// metadata it last wrote, the pending adds, the LAC, the failed bookies.
// Add, Close, Stop and Stats send it requests. RPCs to bookies run in their
// own goroutines, tracked by rpcs, and report back on results.
//
// Invariants:
//   - pending holds exactly the unconfirmed adds, in entry order, and
//     pending[0] is entry lac+1. An entry is confirmed when Qa members of its
//     write set (under the current metadata) have acked it and it is at the
//     head of pending: confirmation is in order.
//   - Acks count only from bookies in the entry's current write set. After an
//     ensemble change, an ack from a replaced bookie is ignored and the entry
//     is sent to its replacement.
//   - The writer never changes metadata unless it is OPEN at the revision it
//     last wrote or read. A failed CAS means recovery (or a closer) took the
//     ledger: the writer turns terminal with ErrFenced and never re-tries
//     over it. The one exception is a change that only swaps bookies in
//     fragments before the writer's last one (onlyRepairs): auto-recovery
//     re-replicating entries the writer confirmed long ago. Those fragments
//     are no longer the writer's (every entry in them is confirmed, and no
//     pending add lies in them: pending[0] is lac+1, at or after the last
//     fragment's first entry), so the writer adopts the new metadata and
//     goes on, and its own change is made again on top of it.
//   - Once terminal (fenced, closed, stopped), every add fails.
type Writer struct {
	c   *Client
	id  int64
	q   Quorum
	key []byte // the ledger's master key; the password never changes
	log *slog.Logger

	addCh   chan *addOp
	closeCh chan chan error
	statsCh chan chan WriterStats
	results chan addResult

	runCtx context.Context // cancelled when the writer stops; parent of every RPC
	stop   context.CancelFunc
	done   chan struct{}
	rpcs   sync.WaitGroup

	// Owned by run.
	v             versioned
	next          int64
	lac           int64
	lacSent       int64
	length        int64
	pending       []*pendingAdd
	pendingBytes  int64
	failed        map[string]bool
	terminal      error
	closers       []chan error
	missingCopies int64
	changes       int
	retryArmed    bool
	// dirSeen is the directory's Changed channel from before the writer
	// last read the bookie set to find spares: closed once the set has
	// changed since. Taking it afresh at each wait instead would miss a
	// change made while the writer was busy.
	dirSeen <-chan struct{}
	// The explicit LAC (see explicitLACDue): when the writer last sent an
	// add and an explicit LAC, when the last add arrived, whether it came
	// soon after the one before (so another is expected to carry the LAC),
	// and the deadline lacTimer is armed for (zero: disarmed).
	lastSend        time.Time
	lastExplicitLAC time.Time
	lastAdd         time.Time
	expectAdd       bool
	lacTimerDue     time.Time
}

// WriterStats is a snapshot of a writer's state.
type WriterStats struct {
	LedgerID         int64
	LastAddConfirmed int64
	NextEntry        int64
	PendingEntries   int
	PendingBytes     int64
	Ensemble         []string
	// FailedBookies are members of the current ensemble the writer saw fail
	// and could not yet replace (delayed ensemble change).
	FailedBookies []string
	// UnderReplicated is true when some confirmed entry is known to have
	// fewer than Qw copies, or the ensemble still holds a failed bookie.
	// Auto-recovery (cluster/autorecovery) re-replicates such entries once
	// they lie in a fragment before the last: at once if the bookie stays
	// unregistered past the recovery delay, or at the auditor's periodic
	// check if it came back without them.
	UnderReplicated bool
	// MissingCopies counts copies of confirmed entries the writer knows were
	// never stored (one per entry and missing bookie).
	MissingCopies   int64
	EnsembleChanges int
	// Err is the writer's terminal error, if any (ErrFenced, ErrWriterClosed).
	Err error
}

// addOp is one add and where its outcome goes: the future's complete (Add)
// or the caller's function (AddFunc).
type addOp struct {
	data     []byte
	complete func(entry int64, err error)
}

type pendingAdd struct {
	addOp
	entry int64
	// added is when the add arrived, on the wall clock rather than
	// Config.Clock: it only times the add latency metric.
	added time.Time
	// acked[k] and inflight[k] name the bookie that acked the add, or has
	// it in flight, at position k of the entry's write set. They count only
	// while that bookie still holds position k under the current metadata:
	// after an ensemble change the replacement starts from nothing.
	acked    []string
	inflight []string
}

type addResult struct {
	entry  int64
	bookie string
	err    error
}

// AddFuture is the outcome of one Add. It completes exactly once.
type AddFuture struct {
	done  chan struct{}
	entry int64
	err   error
}

// Done is closed when the add is confirmed or has failed.
func (f *AddFuture) Done() <-chan struct{} { return f.done }

// Result returns the entry id and error once Done is closed.
func (f *AddFuture) Result() (int64, error) {
	<-f.done
	return f.entry, f.err
}

// Wait blocks until the add completes or ctx ends. A ctx error says nothing
// about the add: it may still be confirmed.
func (f *AddFuture) Wait(ctx context.Context) (int64, error) {
	select {
	case <-f.done:
		return f.entry, f.err
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

func (f *AddFuture) complete(entry int64, err error) {
	f.entry, f.err = entry, err
	close(f.done)
}

func newWriter(c *Client, v versioned) *Writer {
	ctx, stop := context.WithCancel(context.Background())
	w := &Writer{
		c:       c,
		id:      v.md.ID,
		q:       v.md.Quorum(),
		key:     v.md.MasterKey(),
		log:     c.log.With("ledger", v.md.ID),
		addCh:   make(chan *addOp),
		closeCh: make(chan chan error),
		statsCh: make(chan chan WriterStats),
		// Every RPC sends exactly one result; this buffer only smooths
		// bursts, and senders also watch runCtx so none can block forever.
		results: make(chan addResult, 1024),
		runCtx:  ctx,
		stop:    stop,
		done:    make(chan struct{}),
		v:       v,
		lac:     -1,
		lacSent: -1,
		failed:  make(map[string]bool),
	}
	go w.run()
	return w
}

// ID returns the ledger id.
func (w *Writer) ID() int64 { return w.id }

// Add hands data to the writer and returns a future for its confirmation.
// Entries are confirmed in the order Add returns. Add blocks while the
// writer's in-flight budget (MaxInFlightEntries, MaxInFlightBytes) is spent,
// until ctx ends. data must not be changed afterwards. A writer that is
// fenced, closing or stopped fails the future (or returns the error at once
// once it has exited).
func (w *Writer) Add(ctx context.Context, data []byte) (*AddFuture, error) {
	fut := &AddFuture{done: make(chan struct{}), entry: -1}
	if err := w.AddFunc(ctx, data, fut.complete); err != nil {
		return nil, err
	}
	return fut, nil
}

// AddFunc adds data like Add, but reports the outcome by calling done
// rather than through a future: exactly once, on the writer's goroutine.
// Adds that were given an entry are reported in entry order, failed ones
// included; an add refused on arrival (the writer is closing or failed)
// is reported at once. done must not block or call the writer. It serves
// callers that publish confirmed entries in order anyway (the managed
// ledger), sparing them a goroutine that waits on each future; Add is
// AddFunc with a future's completion as done.
func (w *Writer) AddFunc(ctx context.Context, data []byte, done func(entry int64, err error)) error {
	if int64(len(data)) > w.c.cfg.MaxInFlightBytes {
		return fmt.Errorf("%w: %d bytes", ErrEntryTooLarge, len(data))
	}
	select {
	case w.addCh <- &addOp{data: data, complete: done}:
		return nil
	case <-w.done:
		return ErrWriterClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Append adds data and waits for its confirmation, returning its entry id.
func (w *Writer) Append(ctx context.Context, data []byte) (int64, error) {
	f, err := w.Add(ctx, data)
	if err != nil {
		return -1, err
	}
	return f.Wait(ctx)
}

// Close waits for every pending add to be confirmed, then records the ledger
// CLOSED with its last entry and length, and stops the writer. If recovery
// took the ledger first it returns ErrFenced. If ctx ends first the writer
// keeps running: call Close again or Stop.
func (w *Writer) Close(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case w.closeCh <- reply:
	case <-w.done:
		return ErrWriterClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop abandons the writer without touching the metadata: pending adds fail
// with ErrWriterClosed and the ledger stays OPEN for recovery to close. It is
// what an owner that lost its topic does. Stop waits for every goroutine.
func (w *Writer) Stop() {
	w.stop()
	<-w.done
}

// Stats returns a snapshot of the writer's state.
func (w *Writer) Stats(ctx context.Context) (WriterStats, error) {
	reply := make(chan WriterStats, 1)
	select {
	case w.statsCh <- reply:
	case <-w.done:
		return WriterStats{}, ErrWriterClosed
	case <-ctx.Done():
		return WriterStats{}, ctx.Err()
	}
	select {
	case s := <-reply:
		return s, nil
	case <-ctx.Done():
		return WriterStats{}, ctx.Err()
	}
}

func (w *Writer) run() {
	retry := w.c.cfg.Clock.NewTimer(time.Hour)
	retry.Stop()
	lacTimer := w.c.cfg.Clock.NewTimer(time.Hour)
	lacTimer.Stop()
	defer func() {
		retry.Stop()
		lacTimer.Stop()
		w.stop()
		w.failAll(ErrWriterClosed)
		w.rpcs.Wait()
		close(w.done)
	}()
	for {
		var addCh chan *addOp
		if w.terminal != nil || len(w.closers) > 0 ||
			(len(w.pending) < w.c.cfg.MaxInFlightEntries && w.pendingBytes < w.c.cfg.MaxInFlightBytes) {
			addCh = w.addCh
		}
		var dirCh <-chan struct{}
		if len(w.failedMembers()) > 0 {
			dirCh = w.dirSeen
		}
		if w.needRetry() && !w.retryArmed {
			retry.Reset(w.c.cfg.RetryInterval)
			w.retryArmed = true
		}
		if w.terminal == nil && w.lac > w.lacSent {
			now := w.c.cfg.Clock.Now()
			due := w.explicitLACDue()
			switch {
			case !due.After(now):
				w.sendExplicitLAC(now)
			case w.lacTimerDue.IsZero() || due.Before(w.lacTimerDue):
				lacTimer.Reset(due.Sub(now))
				w.lacTimerDue = due
			}
		}
		select {
		case op := <-addCh:
			w.handleAdd(op)
		case r := <-w.results:
			w.handleResult(r)
		case reply := <-w.closeCh:
			w.closers = append(w.closers, reply)
		case reply := <-w.statsCh:
			reply <- w.snapshot()
		case <-dirCh:
			w.dirSeen = w.c.dir.Changed()
			w.progress()
		case <-retry.Chan():
			w.retryArmed = false
			w.handleRetry()
		case <-lacTimer.Chan():
			// The loop's top sends the LAC if it is still due.
			w.lacTimerDue = time.Time{}
		case <-w.runCtx.Done():
			return
		}
		if len(w.closers) > 0 && (len(w.pending) == 0 || w.terminal != nil) {
			w.finishClose()
			return
		}
	}
}

func (w *Writer) handleAdd(op *addOp) {
	if w.terminal != nil {
		// Counted before completing, so that a caller the add wakes sees it.
		w.c.m.adds.WithLabelValues(failureLabel(w.terminal)).Inc()
		op.complete(-1, w.terminal)
		return
	}
	if len(w.closers) > 0 {
		op.complete(-1, ErrWriterClosed)
		return
	}
	now := w.c.cfg.Clock.Now()
	w.expectAdd = now.Sub(w.lastAdd) < w.c.cfg.ExplicitLACInterval
	w.lastAdd = now
	p := &pendingAdd{
		addOp:    *op,
		entry:    w.next,
		added:    time.Now(),
		acked:    make([]string, w.q.Write),
		inflight: make([]string, w.q.Write),
	}
	w.next++
	w.pending = append(w.pending, p)
	w.pendingBytes += int64(len(op.data))
	w.sendMissing(p)
}

// member returns the bookie at position k of entry's write set under the
// current metadata; ens is w.v.md.EnsembleFor(entry).
func (w *Writer) member(ens []string, entry int64, k int) string {
	return ens[int((entry+int64(k))%int64(w.q.Ensemble))]
}

// counts returns how many members of p's write set have acked it, and how
// many have acked it or have it in flight.
func (w *Writer) counts(p *pendingAdd) (acked, copies int) {
	ens := w.v.md.EnsembleFor(p.entry)
	for k := range w.q.Write {
		b := w.member(ens, p.entry, k)
		if p.acked[k] == b {
			acked++
			copies++
		} else if p.inflight[k] == b {
			copies++
		}
	}
	return acked, copies
}

// sendMissing sends p to every member of its write set that has neither
// acked it, nor has it in flight, nor is known failed.
func (w *Writer) sendMissing(p *pendingAdd) {
	ens := w.v.md.EnsembleFor(p.entry)
	for k := range w.q.Write {
		b := w.member(ens, p.entry, k)
		if p.acked[k] == b || p.inflight[k] == b || w.failed[b] {
			continue
		}
		p.inflight[k] = b
		w.send(p, b)
	}
}

func (w *Writer) send(p *pendingAdd, bookie string) {
	req := AddRequest{LedgerID: w.id, EntryID: p.entry, LAC: w.lac, Payload: p.data, MasterKey: w.key}
	w.lacSent = max(w.lacSent, w.lac)
	w.lastSend = w.c.cfg.Clock.Now()
	w.rpcs.Add(1)
	go func() {
		defer w.rpcs.Done()
		ctx, cancel := context.WithTimeout(w.runCtx, w.c.cfg.AddTimeout)
		b, err := w.c.bookies.Bookie(ctx, bookie)
		if err == nil {
			err = b.AddEntry(ctx, req)
		}
		cancel()
		select {
		case w.results <- addResult{entry: req.EntryID, bookie: bookie, err: err}:
		case <-w.runCtx.Done():
		}
	}()
}

func (w *Writer) pendingFor(entry int64) *pendingAdd {
	if len(w.pending) == 0 {
		return nil
	}
	i := entry - w.pending[0].entry
	if i < 0 || i >= int64(len(w.pending)) {
		return nil
	}
	return w.pending[i]
}

func (w *Writer) handleResult(r addResult) {
	if w.terminal != nil {
		return
	}
	p := w.pendingFor(r.entry)
	k := -1 // r.bookie's position in the entry's current write set
	if p != nil {
		ens := w.v.md.EnsembleFor(p.entry)
		for i := range w.q.Write {
			if w.member(ens, p.entry, i) == r.bookie {
				k = i
				break
			}
		}
		if k >= 0 && p.inflight[k] == r.bookie {
			p.inflight[k] = ""
		}
	}
	switch {
	case r.err == nil:
		if k >= 0 {
			p.acked[k] = r.bookie
			w.confirm()
		}
	case errors.Is(r.err, ErrBookieFenced):
		// Recovery has fenced the ledger on this bookie. No later add can
		// reach Qa, and none may succeed: stop now.
		w.log.Info("writer fenced", "bookie", r.bookie, "entry", r.entry)
		w.fail(fmt.Errorf("%w: bookie %s refused entry %d", ErrFenced, r.bookie, r.entry))
	default:
		if p == nil {
			// The entry was already confirmed without this copy.
			w.countMissing(1)
		}
		if !w.failed[r.bookie] {
			w.log.Warn("bookie failed an add", "bookie", r.bookie, "entry", r.entry, "err", r.err)
		}
		w.failed[r.bookie] = true
		w.progress()
	}
}

// confirm completes adds from the head of pending while each has Qa acks.
func (w *Writer) confirm() {
	for len(w.pending) > 0 {
		p := w.pending[0]
		n, copies := w.counts(p)
		if n < w.q.Ack {
			return
		}
		w.countMissing(int64(w.q.Write - copies))
		w.c.m.adds.WithLabelValues("ok").Inc()
		w.c.m.addLatency.Observe(time.Since(p.added).Seconds())
		w.pending[0] = nil
		w.pending = w.pending[1:]
		w.pendingBytes -= int64(len(p.data))
		w.length += int64(len(p.data))
		w.lac = p.entry
		p.complete(p.entry, nil)
	}
}

// progress reacts to failed bookies: it replaces the failed members of the
// ensemble it can (an ensemble change), then sends every pending entry to
// the members of its write set that still lack it.
func (w *Writer) progress() {
	if w.terminal != nil {
		return
	}
	if len(w.failedMembers()) > 0 {
		if err := w.changeEnsemble(); err != nil {
			w.fail(err)
			return
		}
	}
	for _, p := range w.pending {
		w.sendMissing(p)
	}
	w.confirm()
}

// failedMembers returns the slots of the current ensemble held by failed
// bookies.
func (w *Writer) failedMembers() []int {
	var out []int
	for i, b := range w.v.md.LastEnsemble() {
		if w.failed[b] {
			out = append(out, i)
		}
	}
	return out
}

// changeEnsemble replaces every failed member it finds a spare for, in a new
// fragment starting at the first unconfirmed entry, by CAS. With no spare at
// all it changes nothing: adds go on while Qa acks are possible (delayed
// ensemble change) and the next directory change tries again. It returns an
// error only when the writer must stop.
func (w *Writer) changeEnsemble() error {
	w.dirSeen = w.c.dir.Changed()
	cur := w.v.md.LastEnsemble()
	next := slices.Clone(cur)
	exclude := make([]string, 0, len(w.failed))
	for b := range w.failed {
		exclude = append(exclude, b)
	}
	replaced := 0
	for _, slot := range w.failedMembers() {
		if b, ok := w.c.replace(w.v.md.BookieGroups, next, slot, exclude); ok {
			next[slot] = b
			exclude = append(exclude, b)
			replaced++
		}
	}
	if replaced == 0 {
		return nil
	}
	first := w.lac + 1
	v, err := w.casDefinite(func(md *Metadata) {
		if last := &md.Fragments[len(md.Fragments)-1]; last.FirstEntry == first {
			// Nothing in the last fragment is confirmed: amend it rather
			// than leave an empty fragment behind.
			last.Ensemble = next
		} else {
			md.Fragments = append(md.Fragments, Fragment{FirstEntry: first, Ensemble: next})
		}
	})
	if err != nil {
		return err
	}
	w.log.Info("ensemble changed", "from", cur, "to", v.md.LastEnsemble(), "firstEntry", v.md.Fragments[len(v.md.Fragments)-1].FirstEntry)
	w.v = v
	w.changes++
	w.c.m.ensembleChanges.WithLabelValues("writer").Inc()
	return nil
}

// casDefinite writes the writer's metadata with change applied by CAS, and
// insists on a definite answer. A write that got no answer may have landed,
// and the writer must not go on as if it had not: had an ensemble change
// landed, entries confirmed afterwards under the old ensemble could lack
// copies on the new one. So it repeats the same CAS (same expected
// revision: at most one of the tries can apply) until the store answers.
//
// A conflict is settled by reading what is stored. If it is the writer's
// change, alone or with repairs of earlier fragments made after it, an
// earlier try landed. If it is the writer's metadata with repairs only
// (onlyRepairs), auto-recovery got there first: the writer adopts it and
// applies change again on top, at the new revision (the old tries can no
// longer apply). Any other conflict means the ledger is no longer ours
// (ErrFenced). The owner blocks meanwhile, so nothing is confirmed until
// the answer is known.
func (w *Writer) casDefinite(change func(*Metadata)) (versioned, error) {
	for {
		md := w.v.md.clone()
		change(md)
		want, err := encodeMetadata(md)
		if err != nil {
			return versioned{}, err
		}
		ctx, cancel := w.c.metaCtx(w.runCtx)
		v, err := casMetadata(ctx, w.c.store, w.c.cfg.Region, md, w.v.modRev)
		if errors.Is(err, meta.ErrConflict) {
			var cur versioned
			cur, err = readMetadata(ctx, w.c.store, w.c.cfg.Region, w.id)
			cancel()
			switch {
			case err == nil:
				if got, _ := encodeMetadata(cur.md); string(got) == string(want) || onlyRepairs(md, cur.md) {
					return cur, nil
				}
				if onlyRepairs(w.v.md, cur.md) {
					w.adoptRepair(cur)
					continue
				}
				return versioned{}, fmt.Errorf("%w: ledger is %s", ErrFenced, cur.md.State)
			case errors.Is(err, ErrLedgerNotFound):
				return versioned{}, fmt.Errorf("%w: ledger deleted", ErrFenced)
			}
		} else {
			cancel()
			if err == nil {
				return v, nil
			}
		}
		if w.runCtx.Err() != nil {
			return versioned{}, ErrWriterClosed
		}
		w.log.Warn("ledger metadata write got no answer; retrying for a definite one", "err", err)
		if !sleepCtx(w.runCtx, w.c.cfg.Clock, w.c.cfg.RetryInterval) {
			return versioned{}, ErrWriterClosed
		}
	}
}

// adoptRepair takes v, the writer's metadata with earlier fragments
// re-replicated by auto-recovery (onlyRepairs), as the writer's own: its
// next CAS names v's revision.
func (w *Writer) adoptRepair(v versioned) {
	w.log.Info("ledger metadata changed by a repair of earlier fragments; going on", "revision", v.modRev)
	w.v = v
	w.c.m.repairsAdopted.Inc()
}

func (w *Writer) needRetry() bool {
	// Without a failed bookie every pending add is acked or in flight on
	// its whole write set, so nothing can be stuck: skip the scan.
	return w.terminal == nil && len(w.failed) > 0 && (len(w.failedMembers()) > 0 || w.stuck())
}

// stuck reports whether some pending entry cannot reach Qa acks with the
// bookies it is on or going to.
func (w *Writer) stuck() bool {
	for _, p := range w.pending {
		if _, n := w.counts(p); n < w.q.Ack {
			return true
		}
	}
	return false
}

// handleRetry runs RetryInterval after bookies failed. It first checks the
// metadata: a writer cut off from bookies learns here that recovery has
// taken its ledger. Then it forgives the failed bookies (a partition may have
// healed), tries an ensemble change and resends.
func (w *Writer) handleRetry() {
	if w.terminal != nil {
		return
	}
	ctx, cancel := w.c.metaCtx(w.runCtx)
	v, err := readMetadata(ctx, w.c.store, w.c.cfg.Region, w.id)
	cancel()
	switch {
	case err == nil && v.modRev != w.v.modRev && onlyRepairs(w.v.md, v.md):
		w.adoptRepair(v)
	case err == nil && v.modRev != w.v.modRev:
		w.fail(fmt.Errorf("%w: ledger is %s", ErrFenced, v.md.State))
		return
	case err != nil && errors.Is(err, ErrLedgerNotFound):
		w.fail(fmt.Errorf("%w: ledger deleted", ErrFenced))
		return
	}
	if err == nil && len(w.failedMembers()) > 0 {
		// Try spares first, with the failed bookies still excluded.
		if err := w.changeEnsemble(); err != nil {
			w.fail(err)
			return
		}
	}
	clear(w.failed)
	w.progress()
}

// explicitLACDue returns when the writer must send its LAC explicitly,
// given that no add has carried it yet (lac > lacSent).
//
// Every add carries the LAC, so under load the next add brings a tailing
// reader each newly confirmed entry at no cost; but when no add follows,
// nothing else will, and a reader waits on its long-poll until the LAC comes
// another way. The writer cannot know whether an add is coming, so it
// judges by the last one. If it came later than ExplicitLACInterval after
// the one before, and its confirmation leaves nothing pending, the writer is
// idle between adds (one add a second, say): no add is expected, and the LAC
// goes out at once rather than an interval later. That costs at most one
// explicit LAC per such add, and such adds are at least an interval apart.
// Otherwise the adds are dense and the next is likely to come as soon: the
// LAC waits until ExplicitLACInterval after the last send (at 10k adds/s an
// add carries it within 100µs, and no explicit LAC is sent), and after the
// last explicit LAC, so that confirmations trickling in after the adds
// stopped (the tail of a burst on slow bookies) send one per interval, not
// one each.
//
// Neither path can advertise more than is confirmed: lac only moves in
// confirm.
func (w *Writer) explicitLACDue() time.Time {
	if len(w.pending) == 0 && !w.expectAdd {
		return time.Time{} // now
	}
	last := w.lastSend
	if w.lastExplicitLAC.After(last) {
		last = w.lastExplicitLAC
	}
	return last.Add(w.c.cfg.ExplicitLACInterval)
}

// sendExplicitLAC sends the LAC to every member of the last ensemble not
// known failed: readers long-poll those. A fenced bookie's refusal is
// reported like an add's, so that an idle writer learns of recovery.
func (w *Writer) sendExplicitLAC(now time.Time) {
	lac := w.lac
	w.lacSent = lac
	w.lastExplicitLAC = now
	w.c.m.explicitLACs.Inc()
	for _, b := range w.v.md.LastEnsemble() {
		if w.failed[b] {
			continue
		}
		w.rpcs.Add(1)
		go func() {
			defer w.rpcs.Done()
			ctx, cancel := context.WithTimeout(w.runCtx, w.c.cfg.AddTimeout)
			defer cancel()
			bk, err := w.c.bookies.Bookie(ctx, b)
			if err == nil {
				err = bk.WriteLAC(ctx, w.id, lac, w.key)
			}
			switch {
			case errors.Is(err, ErrBookieFenced):
				// An idle writer learns here that recovery took its ledger.
				select {
				case w.results <- addResult{entry: -1, bookie: b, err: err}:
				case <-w.runCtx.Done():
				}
			case err != nil && w.runCtx.Err() == nil:
				w.log.Debug("explicit LAC failed", "bookie", b, "err", err)
			}
		}()
	}
}

// fail makes the writer terminal: every pending and later add fails with err.
func (w *Writer) fail(err error) {
	if w.terminal == nil {
		w.terminal = err
	}
	w.failAll(w.terminal)
}

func (w *Writer) countMissing(n int64) {
	if n > 0 {
		w.missingCopies += n
		w.c.m.missingCopies.Add(float64(n))
	}
}

// failureLabel is the adds_total result of an add that failed with err.
func failureLabel(err error) string {
	if errors.Is(err, ErrFenced) {
		return "fenced"
	}
	return "failed"
}

func (w *Writer) failAll(err error) {
	result := failureLabel(err)
	for _, p := range w.pending {
		w.c.m.adds.WithLabelValues(result).Inc() // before the caller wakes
		p.complete(-1, err)
	}
	w.pending = nil
	w.pendingBytes = 0
}

// finishClose runs once no add is pending (or the writer is terminal).
func (w *Writer) finishClose() {
	err := w.terminal
	if err == nil {
		if w.lac > w.lacSent {
			// The last entries' LAC would otherwise reach a tailing
			// reader only with the closed metadata, which it reads after
			// its long-poll (LACPollWait) ends.
			w.sendExplicitLAC(w.c.cfg.Clock.Now())
		}
		var v versioned
		if v, err = w.casDefinite(func(md *Metadata) {
			md.State = StateClosed
			md.LastEntry = w.lac
			md.Length = w.length
		}); err == nil {
			w.v = v
			w.log.Debug("ledger closed", "lastEntry", w.lac)
		}
	}
	if err == nil {
		w.terminal = ErrWriterClosed
	} else {
		w.fail(err)
	}
	for _, c := range w.closers {
		c <- err
	}
	w.closers = nil
}

func (w *Writer) snapshot() WriterStats {
	s := WriterStats{
		LedgerID:         w.id,
		LastAddConfirmed: w.lac,
		NextEntry:        w.next,
		PendingEntries:   len(w.pending),
		PendingBytes:     w.pendingBytes,
		Ensemble:         slices.Clone(w.v.md.LastEnsemble()),
		MissingCopies:    w.missingCopies,
		EnsembleChanges:  w.changes,
		Err:              w.terminal,
	}
	for _, slot := range w.failedMembers() {
		s.FailedBookies = append(s.FailedBookies, w.v.md.LastEnsemble()[slot])
	}
	s.UnderReplicated = w.missingCopies > 0 || len(s.FailedBookies) > 0
	return s
}
