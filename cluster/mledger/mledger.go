package mledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/telemetry"
)

// ManagedLedger is one topic: an ordered list of ledgers, written through
// the last one, with cursors reading it.
//
// Ownership:
//   - The write lock (writeSem) guards the write side: the ledger writer,
//     the running index and the current ledger's counters. An append takes
//     it on the caller's goroutine, and so does the rollover an append
//     triggers; the owner goroutine (run) takes it for time-based
//     rollover, terminate and close. So appends happen one at a time.
//   - listMu guards the ledger list and its ModRevision, and is held
//     across each CAS of it, so that changes to the list happen one at a
//     time. A rollover takes it under the write lock; retention (trim)
//     takes it alone, so an append never waits for retention.
//   - The owner goroutine also runs housekeeping that appends must not
//     wait for: retention's list writes, and creating the next ledger
//     ahead of a rollover (next). The deleter goroutine deletes the
//     metadata of the ledgers retention dropped (deleter).
//   - The ledger writer's goroutine reports each append's outcome, in
//     entry order (confirmed): it moves view.lac, fills the cache, wakes
//     tailing readers and completes the caller's future (whose then
//     callback runs under mu; see AppendAsync).
//   - mu guards what readers share: the view, the cache, the readers of
//     ledgers, the cursors' published positions, the terminal error.
//   - Each durable cursor has its own persistence goroutine.
//
// Lock order: docs/lock-order.md. The view's ledger ids equal the list's
// whenever listMu is free: whoever writes the list publishes it under
// listMu.
//
// Invariants:
//   - An entry is visible to readers only once the bookies confirmed it, and
//     entries become visible in append order, so the index seen by readers
//     only grows, by each entry's message count.
//   - Every change to the list is a CAS at the revision this instance last
//     wrote. A failed CAS, a fenced writer, or a failed CAS on an owned
//     cursor makes the instance terminal (ErrFenced / ErrOwnershipLost): it
//     never re-reads and writes over the winner.
type ManagedLedger struct {
	f     *Factory
	topic string
	cfg   *Config
	log   *slog.Logger
	key   string
	// writes records add latency and entry sizes; nil when metrics are
	// disabled.
	writes *writeStats
	// reads records the latency of storage reads (read.go); nil when
	// metrics are disabled.
	reads *telemetry.StatsBuckets

	// writeSem is the write lock: a one-slot semaphore rather than a
	// mutex, so that an appender waiting for it can give up on its context
	// or on the instance stopping. Appends run on their callers'
	// goroutines under it, which spares each entry a hand-off (and a
	// wake-up) to another goroutine.
	writeSem chan struct{}
	// stopping is closed, and writeStopped set under the write lock, when
	// the owner exits: from then on nothing uses the write side.
	stopping     chan struct{}
	writeStopped bool
	ctrlCh       chan ctrlOp
	tick         clockwork.Ticker // housekeeping; owned by run

	runCtx    context.Context
	kill      context.CancelFunc
	ownerDone chan struct{}
	wg        sync.WaitGroup // owner, foreign-cursor watch, deleter
	lost      chan struct{}
	// trimCh and precreateCh (cap 1) ask the owner for a trim and for the
	// next ledger; a request made while one is pending is merged into it.
	trimCh      chan struct{}
	precreateCh chan struct{}
	next        nextLedger
	deleter     ledgerDeleter

	// Guarded by listMu (see Ownership).
	listMu  sync.Mutex
	list    listValue
	listRev int64

	// Guarded by the write lock.
	writer *ledger.Writer
	// closedLast is the ledger this instance closed whose final counts the
	// list does not hold yet (its write failed or has not happened); the
	// next write of the list records them.
	closedLast *ledgerInfo
	// precreateAsked says the next ledger was asked for since the last
	// rollover.
	precreateAsked bool
	lastIndex      int64
	lastTS         int64
	curEntries     int64
	curSize        int64
	curCreated     time.Time
	// created is when the record was created (listValue.Created; zero when
	// it was not kept). Set at open, never changed.
	created time.Time
	// incarnation is the record's CreateRevision: it tells this topic
	// apart from an earlier one of the same name that was deleted (whose
	// offsets started at 0 too). Set at open, never changed.
	incarnation int64

	mu   sync.Mutex
	v    view
	tail chan struct{} // closed and replaced whenever readers may have more to read
	// tailTaken says a reader holds tail; a wake-up with nobody waiting
	// costs nothing (no channel per confirmed entry).
	tailTaken bool
	cache     entryCache
	readers   map[int64]*ledger.Reader
	cursors   map[string]*Cursor
	marks     map[*Cursor]cursorMarks
	// slowestRead caches the lowest readAfter of marks while slowestValid.
	slowestRead  Position
	slowestValid bool
	foreign      map[string]Position
	// dormant holds the stored mark-delete positions of this topic's own
	// durable cursors that are not open here (a subscription with no
	// consumer right now). They pin retention just as open ones do.
	dormant map[string]Position
	// curSizeSeen is the confirmed bytes of the ledger being written
	// (its size in the list is written only when it closes).
	curSizeSeen int64
	err         error // terminal: why the instance stopped
	closing     bool
	// retention is the topic's retention policy: Config's RetentionTime
	// and RetentionSize until SetRetention.
	retention struct {
		time time.Duration
		size int64
	}
	// quorums are the E/Qw/Qa of the next ledger created: Config's until
	// WithQuorums or SetQuorums. Never nil.
	quorums atomic.Pointer[Quorums]
	// bookieGroups are the bookie groups of the next ledger created: none
	// (nil) until WithBookieGroups or SetBookieGroups.
	bookieGroups atomic.Pointer[BookieGroups]
	// persistInterval is the shortest time between two writes of one of
	// its cursors' states, in nanoseconds: Config's CursorPersistInterval
	// until SetMarkDeleteRate.
	persistInterval atomic.Int64
}

// cursorMarks is what a cursor publishes to its managed ledger: where it has
// read to (for cache eviction) and, for a durable cursor, its mark-delete
// position (for retention).
type cursorMarks struct {
	readAfter, markDelete Position
	durable               bool
}

type ctrlOp struct {
	f func() (stop bool)
	// write runs f under the write lock.
	write bool
	done  chan struct{}
}

// AppendFuture is the outcome of one append. It completes exactly once,
// and appends complete in the order they were taken.
type AppendFuture struct {
	done  chan struct{}
	pos   Position
	index int64
	err   error
	then  func(Position, error) // see AppendAsync
}

// Done is closed when the append is confirmed or has failed.
func (f *AppendFuture) Done() <-chan struct{} { return f.done }

// Result returns the position and error once Done is closed.
func (f *AppendFuture) Result() (Position, error) {
	<-f.done
	return f.pos, f.err
}

// Index returns the entry's BrokerEntryMetadata index once Done is closed
// without error.
func (f *AppendFuture) Index() int64 {
	<-f.done
	return f.index
}

// Wait blocks until the append completes or ctx ends. A ctx error says
// nothing about the append: it may still be confirmed.
func (f *AppendFuture) Wait(ctx context.Context) (Position, error) {
	select {
	case <-f.done:
		return f.pos, f.err
	case <-ctx.Done():
		return Position{}, ctx.Err()
	}
}

func (f *AppendFuture) complete(p Position, err error) {
	f.pos, f.err = p, err
	if f.then != nil {
		f.then(p, err)
	}
	close(f.done)
}

// open loads or creates the topic's list, recovers the previous last ledger
// (fencing whoever wrote it), reads back the last index and starts a new
// ledger, then claims the list by CAS.
func open(ctx context.Context, f *Factory, topic string, opts []OpenOption) (*ManagedLedger, error) {
	cfg := &f.cfg
	ml := &ManagedLedger{
		f: f, topic: topic, cfg: cfg, log: f.log.With("topic", topic), key: ListKey(cfg.Region, topic),
		writes:      newWriteStats(cfg),
		reads:       newReadLatency(cfg),
		writeSem:    make(chan struct{}, 1),
		stopping:    make(chan struct{}),
		ctrlCh:      make(chan ctrlOp),
		ownerDone:   make(chan struct{}),
		lost:        make(chan struct{}),
		trimCh:      make(chan struct{}, 1),
		precreateCh: make(chan struct{}, 1),
		deleter:     ledgerDeleter{wake: make(chan struct{}, 1)},
		lastIndex:   -1,
		tail:        make(chan struct{}),
		cache:       entryCache{max: cfg.CacheMaxBytes},
		readers:     map[int64]*ledger.Reader{},
		cursors:     map[string]*Cursor{},
		marks:       map[*Cursor]cursorMarks{},
		foreign:     map[string]Position{},
		dormant:     map[string]Position{},
	}
	ml.retention.time, ml.retention.size = cfg.RetentionTime, cfg.RetentionSize
	q := f.DefaultQuorums()
	ml.quorums.Store(&q)
	ml.persistInterval.Store(int64(cfg.CursorPersistInterval))
	for _, o := range opts {
		o(ml)
	}
	mctx, cancel := f.metaCtx(ctx)
	kv, err := f.store.Get(mctx, ml.key)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		ml.list = listValue{Ledgers: []ledgerInfo{}, Created: f.clock.Now().UnixMilli()}
		b, _ := encodeList(ml.list)
		ml.listRev, err = f.store.Create(mctx, ml.key, b, meta.NoLease)
		ml.incarnation = ml.listRev // a key's first ModRevision is its CreateRevision
		if errors.Is(err, meta.ErrExists) {
			err = fmt.Errorf("%w: %s was created concurrently", ErrFenced, topic)
		}
	case err == nil:
		if ml.list, err = decodeList(kv.Value); err != nil {
			break
		}
		ml.incarnation = kv.CreateRevision
		// Claim the record before recovering anything: rewriting it bumps
		// its revision, so a previous owner that is still running fails
		// its next CAS (a rollover) from here on. Without the claim, an
		// owner that rolls over faster than we recover would win every
		// time: we would fence a ledger it had just closed.
		ml.listRev, err = f.store.Update(mctx, ml.key, kv.Value, kv.ModRevision)
		if errors.Is(err, meta.ErrConflict) {
			err = fmt.Errorf("%w: %s changed while we opened it", ErrFenced, topic)
		}
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", topic, err)
	}
	if n := len(ml.list.Ledgers); n > 0 {
		last := &ml.list.Ledgers[n-1]
		r, err := f.client.OpenAndRecover(ctx, last.ID)
		if err != nil {
			return nil, fmt.Errorf("open %s: recover ledger %d: %w", topic, last.ID, err)
		}
		md := r.Metadata()
		last.Entries = md.LastEntry + 1
		if md.Length >= 0 {
			last.Size = md.Length
		}
		ml.readers[last.ID] = r
	}
	if err := ml.loadDormant(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", topic, err)
	}
	if ml.list.Created != 0 {
		ml.created = time.UnixMilli(ml.list.Created)
	}
	ml.v = view{ledgers: slices.Clone(ml.list.Ledgers), terminated: ml.list.Terminated, lac: Position{0, -1}}
	if err := ml.recoverIndex(ctx); err != nil {
		return nil, fmt.Errorf("open %s: %w", topic, err)
	}
	if !ml.list.Terminated {
		if err := ml.startLedger(ctx); err != nil {
			return nil, fmt.Errorf("open %s: %w", topic, err)
		}
	}
	ml.runCtx, ml.kill = context.WithCancel(context.Background())
	// The ticker is set before Open returns, so that a test moving a fake
	// clock from then on finds it.
	ml.tick = f.clock.NewTicker(cfg.HousekeepingInterval)
	ml.wg.Add(3)
	go ml.run()
	go ml.watchForeign()
	go ml.deleteLoop()
	ml.log.Info("managed ledger open", "ledgers", len(ml.list.Ledgers), "lastIndex", ml.lastIndex, "terminated", ml.list.Terminated)
	return ml, nil
}

// loadDormant records the mark-delete position of every durable cursor of
// the topic (its own, not the foreign ones, which the watch follows), so
// that retention never deletes what a subscription without a consumer
// still needs.
func (ml *ManagedLedger) loadDormant(ctx context.Context) error {
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	prefix := cursorPrefix(ml.cfg.Region, ml.topic)
	kvs, _, err := ml.f.store.List(mctx, prefix)
	if err != nil {
		return fmt.Errorf("list cursors: %w", err)
	}
	for _, kv := range kvs {
		name, err := meta.Name(kv.Key)
		if err != nil || strings.Contains(strings.TrimPrefix(kv.Key, prefix), "/") || ml.cfg.foreign(name) {
			continue
		}
		v, err := decodeCursor(kv.Value)
		if err != nil {
			// Unreadable: pin everything rather than guess.
			ml.log.Warn("cursor unreadable; holding retention", "cursor", name, "err", err)
			v.MarkDelete = Position{}
		}
		ml.dormant[name] = v.MarkDelete
	}
	return nil
}

// recoverIndex reads the last entry back to continue its index and keep
// broker timestamps from going backwards.
func (ml *ManagedLedger) recoverIndex(ctx context.Context) error {
	last := ml.v.last()
	if last.Entry < 0 {
		return nil
	}
	es, err := ml.readRun(ctx, last.Ledger, last.Entry, last.Entry)
	if err != nil {
		return fmt.Errorf("read last entry %v: %w", last, err)
	}
	idx, err := EntryIndex(es[0].Data)
	if err != nil {
		return fmt.Errorf("last entry %v: %w", last, err)
	}
	ts, _ := EntryTimestamp(es[0].Data)
	ml.lastIndex, ml.lastTS = idx, ts
	return nil
}

// startLedger makes a ledger (the one created ahead, or a new one) the
// list's last by CAS. Called only by open and under the write lock. A failed
// CAS means another instance has the topic: ErrFenced.
func (ml *ManagedLedger) startLedger(ctx context.Context) error {
	w, err := ml.next.take(ctx, ml.createLedger)
	if err != nil {
		return err
	}
	return ml.recordNext(ctx, w)
}

// casList writes next at the revision last written; the caller holds
// listMu. ErrConflict is lost
// ownership: the instance turns terminal with ErrFenced. Any other error
// leaves the outcome unknown; ml.list keeps the old value, so if the write
// did go through, the next CAS fails and the instance stops: it can lose
// the topic to itself, never write over another owner.
func (ml *ManagedLedger) casList(ctx context.Context, next listValue) error {
	b, err := encodeList(next)
	if err != nil {
		return err
	}
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	rev, err := ml.f.store.Update(mctx, ml.key, b, ml.listRev)
	if errors.Is(err, meta.ErrConflict) {
		err = fmt.Errorf("%w: ledger list of %s changed under us", ErrFenced, ml.topic)
		ml.fail(err)
		return err
	}
	if err != nil {
		return fmt.Errorf("write ledger list: %w", err)
	}
	ml.list, ml.listRev = next, rev
	return nil
}

// fail makes the instance terminal and reports it on Lost.
func (ml *ManagedLedger) fail(err error) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if ml.err != nil {
		return
	}
	ml.err = err
	close(ml.lost)
	ml.wakeLocked()
	if !errors.Is(err, ErrClosed) {
		ml.log.Warn("managed ledger stopped", "err", err)
	}
}

func (ml *ManagedLedger) wakeLocked() {
	if !ml.tailTaken {
		return
	}
	close(ml.tail)
	ml.tail = make(chan struct{})
	ml.tailTaken = false
}

// tailLocked returns the channel closed at the next change readers may
// care about.
func (ml *ManagedLedger) tailLocked() <-chan struct{} {
	ml.tailTaken = true
	return ml.tail
}

// Changed returns a channel closed at the next change a reader may care
// about: an entry confirmed, the topic terminated, or the instance stopped.
// Take it before reading, then wait on it when the read found nothing, so
// that no change in between is missed.
func (ml *ManagedLedger) Changed() <-chan struct{} {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.tailLocked()
}

// Lost is closed when the instance has lost the topic (ErrFenced,
// ErrOwnershipLost) or failed for good; Err says why. The owner of the topic
// should then close it and let go.
func (ml *ManagedLedger) Lost() <-chan struct{} { return ml.lost }

// Err returns why the instance stopped, or nil while it works.
func (ml *ManagedLedger) Err() error {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.err
}

// Incarnation returns the CreateRevision of the topic's record, the same
// number a replicator reads (Tailer.Incarnation) and stamps on the entries
// it sends elsewhere: with the region and an offset, it names an entry
// across regions and across a deletion and re-creation of the topic.
func (ml *ManagedLedger) Incarnation() int64 { return ml.incarnation }

// Name returns the topic.
func (ml *ManagedLedger) Name() string { return ml.topic }

// Append stores msg (a Pulsar message from its 0x0e01 magic on, holding
// numMessages messages) and waits until it is confirmed.
func (ml *ManagedLedger) Append(ctx context.Context, msg []byte, numMessages int) (Position, error) {
	f, err := ml.AppendAsync(ctx, msg, numMessages, nil)
	if err != nil {
		return Position{}, err
	}
	return f.Wait(ctx)
}

// AppendAsync stores msg as the topic's next entry and returns its future.
// Appends are confirmed in the order AppendAsync returns. It blocks while
// the ledger writer's budget (ledger.Config's MaxInFlightEntries and
// MaxInFlightBytes) is spent, and while a rollover closes the current
// ledger and writes the list: at most one ledger create, none when the
// next ledger was created ahead (see rollover), and never retention's
// deletions. ctx bounds only the wait for the write lock. msg is copied
// into the stored entry before AppendAsync returns.
//
// then, unless nil, runs once as the future completes, before Done is
// closed. For a confirmed entry it runs on the ledger writer's goroutine
// under the instance's lock (mu), in the same step that makes the entry
// visible: no reader can see the entry before then has run, as Pulsar
// runs an add's callback before it notifies the cursors. The broker queues the producer's receipt there, so a consumer
// on the producer's connection gets the message after the receipt. then
// must not block or call into the managed ledger.
func (ml *ManagedLedger) AppendAsync(ctx context.Context, msg []byte, numMessages int, then func(Position, error)) (*AppendFuture, error) {
	if numMessages < 1 {
		return nil, fmt.Errorf("%w: numMessages %d", ErrNoMessages, numMessages)
	}
	if !ml.lockWrite(ctx) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ml.errOr(ErrClosed)
	}
	defer ml.unlockWrite()
	if ml.writeStopped {
		return nil, ml.errOr(ErrClosed)
	}
	fut := &AppendFuture{done: make(chan struct{}), index: -1, then: then}
	ml.handleAppend(msg, numMessages, fut)
	return fut, nil
}

// lockWrite takes the write lock. It returns false, without it, when ctx
// ends or the instance stops first.
func (ml *ManagedLedger) lockWrite(ctx context.Context) bool {
	select {
	case ml.writeSem <- struct{}{}:
		return true
	case <-ml.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}

func (ml *ManagedLedger) unlockWrite() { <-ml.writeSem }

func (ml *ManagedLedger) errOr(def error) error {
	if err := ml.Err(); err != nil {
		return err
	}
	return def
}

// run is the owner goroutine: control operations (most under the write
// lock) and housekeeping (which takes the locks it needs itself).
func (ml *ManagedLedger) run() {
	defer ml.wg.Done()
	defer close(ml.ownerDone)
	defer func() {
		// Nobody holds the lock for long once runCtx is done: an appender
		// waits only on runCtx-bound calls.
		ml.writeSem <- struct{}{}
		ml.writeStopped = true
		ml.unlockWrite()
		close(ml.stopping)
	}()
	defer ml.tick.Stop()
	for {
		select {
		case op := <-ml.ctrlCh:
			if op.write {
				ml.writeSem <- struct{}{}
			}
			stop := op.f()
			if op.write {
				ml.unlockWrite()
			}
			close(op.done)
			if stop {
				return
			}
		case <-ml.tick.Chan():
			ml.housekeeping()
		case <-ml.trimCh:
			ml.trim()
		case <-ml.precreateCh:
			ml.precreate()
		case <-ml.runCtx.Done():
			return
		}
	}
}

// do runs f on the owner goroutine, under the write lock, and waits for
// it. f returns true to stop the owner.
func (ml *ManagedLedger) do(ctx context.Context, f func() bool) error {
	return ml.send(ctx, ctrlOp{f: f, write: true, done: make(chan struct{})})
}

// onOwner runs f on the owner goroutine without the write lock, and waits
// for it.
func (ml *ManagedLedger) onOwner(ctx context.Context, f func()) error {
	return ml.send(ctx, ctrlOp{f: func() bool { f(); return false }, done: make(chan struct{})})
}

func (ml *ManagedLedger) send(ctx context.Context, op ctrlOp) error {
	select {
	case ml.ctrlCh <- op:
	case <-ml.ownerDone:
		return ml.errOr(ErrClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-op.done:
		return nil
	case <-ctx.Done():
		// The owner finishes f regardless; its outcome is lost to us.
		return ctx.Err()
	}
}

// handleAppend stamps and stores one entry and completes fut with the
// outcome. Called under the write lock.
func (ml *ManagedLedger) handleAppend(msg []byte, n int, fut *AppendFuture) {
	ml.mu.Lock()
	stopped, terminated := ml.err, ml.v.terminated
	ml.mu.Unlock()
	if stopped != nil {
		ml.stopWriter()
		fut.complete(Position{}, stopped)
		return
	}
	if terminated {
		fut.complete(Position{}, fmt.Errorf("%w: %s", ErrTerminated, ml.topic))
		return
	}
	if ml.writer == nil {
		// A previous rollover could not create its ledger; try again now.
		if err := ml.startLedger(ml.runCtx); err != nil {
			fut.complete(Position{}, err)
			return
		}
	}
	idx := ml.lastIndex + int64(n)
	now := ml.f.clock.Now()
	ts := max(now.UnixMilli(), ml.lastTS)
	data := encodeEntry(ts, idx, msg)
	fut.index = idx
	id := ml.writer.ID()
	err := ml.writer.AddFunc(ml.runCtx, data, func(entry int64, aerr error) {
		if aerr == nil && ml.writes != nil {
			ml.writes.confirmed(ml.f.clock.Now().Sub(now), len(data))
		}
		ml.confirmed(id, data, fut, entry, aerr)
	})
	if errors.Is(err, ledger.ErrEntryTooLarge) {
		fut.complete(Position{}, err)
		return
	}
	if err != nil {
		ml.fail(classify(err))
		ml.stopWriter()
		fut.complete(Position{}, ml.errOr(err))
		return
	}
	ml.lastIndex, ml.lastTS = idx, ts
	ml.curEntries++
	ml.curSize += int64(len(data))
	switch age := now.Sub(ml.curCreated); {
	case ml.full(age):
		ml.rollover()
	case !ml.precreateAsked && ml.nearlyFull(age):
		ml.precreateAsked = true
		ml.ask(ml.precreateCh)
	}
}

// ask sends a request to the owner; one already pending absorbs it.
func (ml *ManagedLedger) ask(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// classify turns a writer error into the managed ledger's terms.
func classify(err error) error {
	switch {
	case errors.Is(err, ledger.ErrFenced):
		return fmt.Errorf("%w: %w", ErrFenced, err)
	case errors.Is(err, ledger.ErrWriterClosed), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("mledger: ledger write failed, reopen the topic to continue: %w", err)
}

func (ml *ManagedLedger) stopWriter() {
	if ml.writer != nil {
		ml.writer.Stop()
		ml.writer = nil
	}
}

// full is Pulsar's rule: the ledger is full once it reached its entry or
// size limit or its maximum age, and is at least the minimum age. An empty
// ledger never rolls over on age alone. age is the current ledger's.
func (ml *ManagedLedger) full(age time.Duration) bool {
	if ml.writer == nil {
		return false
	}
	space := ml.curEntries >= ml.cfg.MaxEntriesPerLedger || ml.curSize >= ml.cfg.MaxSizePerLedger
	aged := ml.curEntries > 0 && age >= ml.cfg.MaxLedgerRolloverTime
	return (space || aged) && age >= ml.cfg.MinLedgerRolloverTime
}

// nearlyFull says the current ledger has used three quarters of its entry
// or size limit or of its maximum age: time to create the next one, so
// that the rollover finds it made.
func (ml *ManagedLedger) nearlyFull(age time.Duration) bool {
	c := ml.cfg
	if ml.writer == nil {
		return false
	}
	space := ml.curEntries >= c.MaxEntriesPerLedger-c.MaxEntriesPerLedger/4 || ml.curSize >= c.MaxSizePerLedger-c.MaxSizePerLedger/4
	aged := ml.curEntries > 0 && age >= c.MaxLedgerRolloverTime-c.MaxLedgerRolloverTime/4
	return space || aged
}

// closeCurrent closes the ledger being written, waiting for its pending
// entries, and keeps its final counts in closedLast for the next write of
// the list.
func (ml *ManagedLedger) closeCurrent() error {
	if ml.writer == nil {
		return nil
	}
	if err := ml.writer.Close(ml.runCtx); err != nil {
		ml.fail(classify(err))
		ml.stopWriter()
		return ml.errOr(err)
	}
	ml.closedLast = &ledgerInfo{ID: ml.writer.ID(), Entries: ml.curEntries, Size: ml.curSize}
	ml.writer = nil
	return nil
}

// rollover closes the current ledger and starts the next, with one write
// of the list. It runs under the write lock, so appends wait meanwhile and
// none is lost or reordered: every entry of the closed ledger precedes
// every entry of the new one. What they wait for is the close (the pending
// entries and the ledger's CLOSED record), the next ledger (nothing when
// the owner created it ahead, else one create, or the end of the one the
// owner is running) and the list's CAS. Retention is the owner's, after.
func (ml *ManagedLedger) rollover() {
	if err := ml.closeCurrent(); err != nil {
		return
	}
	ml.precreateAsked = false
	// A request for the closed ledger's successor still pending is
	// answered by take; the new ledger asks for its own when nearly full.
	select {
	case <-ml.precreateCh:
	default:
	}
	w, err := ml.next.take(ml.runCtx, ml.createLedger)
	if err != nil {
		// No bookies, say: record the closed ledger; appends retry
		// creating one.
		ml.log.Warn("rollover: cannot start a ledger", "err", err)
		err = ml.recordClosed(false)
	} else {
		err = ml.recordNext(ml.runCtx, w)
	}
	if err == nil {
		ml.ask(ml.trimCh)
	}
}

// housekeeping runs on the owner: time-based rollover under the write lock,
// then the next ledger if the current one is nearly full, then retention,
// which takes only listMu.
func (ml *ManagedLedger) housekeeping() {
	if ml.Err() != nil {
		return
	}
	ml.writeSem <- struct{}{}
	age := ml.f.clock.Since(ml.curCreated)
	rolled, nearly := ml.full(age), ml.nearlyFull(age)
	if rolled {
		ml.rollover()
	} else if nearly {
		ml.precreateAsked = true
	}
	ml.unlockWrite()
	if !rolled && nearly {
		ml.precreate()
	}
	ml.trim()
}

// confirmed publishes one append's outcome: the writer calls it on its
// goroutine, in entry order. A confirmed entry becomes visible to readers
// (view.lac, the cache) and its future completes under mu, before the
// readers waiting for it are woken (see AppendAsync's then).
func (ml *ManagedLedger) confirmed(ledgerID int64, data []byte, fut *AppendFuture, entry int64, err error) {
	if err != nil {
		err = classify(err)
		ml.fail(err)
		fut.complete(Position{}, ml.errOr(err))
		return
	}
	pos := Position{ledgerID, entry}
	ml.mu.Lock()
	if ml.v.current == ledgerID && ml.v.lac.Less(pos) {
		ml.v.lac = pos
		ml.curSizeSeen += int64(len(data))
	}
	if len(ml.marks) > 0 {
		// Only an open cursor reads from the cache; with none, an entry
		// cached here would sit until eviction by size (CacheMaxBytes per
		// topic), and a cursor opened later reads from the bookies.
		ml.cache.put(Entry{Position: pos, Data: data})
	}
	fut.complete(pos, nil)
	ml.wakeLocked()
	ml.mu.Unlock()
}

// LastConfirmed returns the position of the last confirmed entry; for an
// empty topic its Entry is -1.
func (ml *ManagedLedger) LastConfirmed() Position {
	v := ml.snapshot()
	return v.last()
}

// LastIndex returns the index of the last entry taken (confirmed or in
// flight); -1 for a topic without entries.
func (ml *ManagedLedger) LastIndex(ctx context.Context) (int64, error) {
	var idx int64
	err := ml.do(ctx, func() bool { idx = ml.lastIndex; return false })
	return idx, err
}

// NumberOfEntries returns the number of readable entries.
func (ml *ManagedLedger) NumberOfEntries() int64 {
	v := ml.snapshot()
	return v.count(v.origin(), v.last())
}

// Ledgers returns the ids of the ledgers in the list.
func (ml *ManagedLedger) Ledgers() []int64 {
	v := ml.snapshot()
	ids := make([]int64, len(v.ledgers))
	for i, l := range v.ledgers {
		ids[i] = l.ID
	}
	return ids
}

// Terminated reports whether the topic was terminated.
func (ml *ManagedLedger) Terminated() bool {
	v := ml.snapshot()
	return v.terminated
}

func (ml *ManagedLedger) snapshot() view {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.v
}

// Terminate closes the ledger being written and records the topic as
// terminated: appends fail with ErrTerminated from now on, and readers get
// ErrEndOfTopic once they have read everything. It returns the last
// position.
func (ml *ManagedLedger) Terminate(ctx context.Context) (Position, error) {
	var err error
	derr := ml.do(ctx, func() bool {
		if err = ml.Err(); err != nil {
			return false
		}
		if ml.Terminated() {
			return false
		}
		if err = ml.closeCurrent(); err != nil {
			return false
		}
		if err = ml.recordClosed(true); err != nil {
			return false
		}
		ml.discardNext()
		return false
	})
	if derr != nil {
		return Position{}, derr
	}
	return ml.LastConfirmed(), err
}

// Trim deletes the ledgers that every durable cursor has consumed and that
// the retention policy no longer keeps, and waits for their deletion. It
// also runs every HousekeepingInterval and after each rollover, on the
// owner goroutine, where nobody waits for it.
func (ml *ManagedLedger) Trim(ctx context.Context) error {
	var deleted <-chan struct{}
	if err := ml.onOwner(ctx, func() { deleted = ml.trim() }); err != nil {
		return err
	}
	if deleted == nil {
		return nil
	}
	select {
	case <-deleted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// slowestLocked is the lowest mark-delete position among durable cursors,
// owned here or elsewhere; with none, everything readable counts as
// consumed (Pulsar deletes a subscription-less topic's data subject to
// retention).
func (ml *ManagedLedger) slowestLocked() Position {
	slowest := ml.v.last()
	for _, m := range ml.marks {
		if m.durable && m.markDelete.Less(slowest) {
			slowest = m.markDelete
		}
	}
	for _, p := range ml.foreign {
		if p.Less(slowest) {
			slowest = p
		}
	}
	for _, p := range ml.dormant {
		if p.Less(slowest) {
			slowest = p
		}
	}
	return slowest
}

// SetMarkDeleteRate paces the writes of each of the topic's cursors'
// states at perSecond at most, as Pulsar's managedLedgerMaxMarkDeleteRate
// throttles mark-deletes: the shortest time between two writes becomes
// 1/perSecond (at most an hour, Config's bound). 0 takes Config's
// CursorPersistInterval back. A write a cursor has scheduled already keeps
// its time; the ones it schedules after follow the new pace.
func (ml *ManagedLedger) SetMarkDeleteRate(perSecond float64) {
	d := ml.cfg.CursorPersistInterval
	if perSecond > 0 {
		d = time.Hour
		if perSecond > 1/time.Hour.Seconds() {
			d = time.Duration(float64(time.Second) / perSecond)
		}
	}
	ml.persistInterval.Store(int64(d))
}

// SetRetention replaces the topic's retention policy (Config's
// RetentionTime and RetentionSize: negative keeps forever, or without a
// size limit) from the next housekeeping on, as a namespace's or topic's
// policy change does on Pulsar.
func (ml *ManagedLedger) SetRetention(keep time.Duration, size int64) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.retention.time, ml.retention.size = keep, size
}

// trim drops from the list the ledgers that retention no longer keeps and
// hands their deletion to the deleter, whose done channel it returns (nil
// when it dropped nothing). It takes listMu, never the write lock: appends,
// and a rollover's wait for listMu aside, go on meanwhile. While the
// deleter is behind by maxPendingDeletes ledgers it drops nothing, so the
// ledgers wait in the list, where nothing is lost.
func (ml *ManagedLedger) trim() <-chan struct{} {
	if ml.Err() != nil || ml.deleter.pending() >= maxPendingDeletes {
		return nil
	}
	ml.listMu.Lock()
	defer ml.listMu.Unlock()
	ml.mu.Lock()
	slowest := ml.slowestLocked()
	v := ml.v
	keep := ml.retention
	ml.mu.Unlock()
	now := ml.f.clock.Now()
	total := v.totalSize()
	var drop int
	// Never the last ledger: it is being written, or it is what positions
	// of a closed or terminated topic refer to.
	for i := 0; i < len(v.ledgers)-1; i++ {
		l := v.ledgers[i]
		// An empty ledger holds nothing anyone needs, wherever it lies.
		consumed := v.entries(i) == 0 || l.ID < slowest.Ledger || (l.ID == slowest.Ledger && slowest.Entry >= v.entries(i)-1)
		if !consumed {
			break
		}
		expired := keep.time >= 0 && now.Sub(time.UnixMilli(l.CTime)) >= keep.time
		over := keep.size >= 0 && total > keep.size
		if !expired && !over {
			break
		}
		total -= l.Size
		drop = i + 1
	}
	if drop == 0 {
		return nil
	}
	gone := slices.Clone(ml.list.Ledgers[:drop])
	next := ml.list
	next.Ledgers = slices.Clone(ml.list.Ledgers[drop:])
	if err := ml.casList(ml.runCtx, next); err != nil {
		return nil
	}
	ids := make([]int64, len(gone))
	ml.mu.Lock()
	ml.v.ledgers = slices.Clone(next.Ledgers)
	for i, l := range gone {
		delete(ml.readers, l.ID)
		ids[i] = l.ID
	}
	ml.cache.dropLedgers(next.Ledgers[0].ID)
	ml.mu.Unlock()
	ml.log.Debug("retention dropped ledgers", "count", len(gone), "first", gone[0].ID, "last", gone[len(gone)-1].ID)
	return ml.deleter.add(ids)
}

// Close closes every cursor (persisting its state), closes the ledger
// being written and records its final counts, and stops every goroutine.
func (ml *ManagedLedger) Close(ctx context.Context) error {
	ml.mu.Lock()
	if ml.closing {
		ml.mu.Unlock()
		return nil
	}
	ml.closing = true
	cs := make([]*Cursor, 0, len(ml.cursors))
	for _, c := range ml.cursors {
		cs = append(cs, c)
	}
	ml.mu.Unlock()
	var first error
	for _, c := range cs {
		if err := c.Close(ctx); err != nil && first == nil && !errors.Is(err, ErrClosed) {
			first = err
		}
	}
	err := ml.do(ctx, func() bool {
		ml.discardNext()
		if ml.Err() != nil {
			ml.stopWriter()
			return true
		}
		if ml.writer != nil || ml.closedLast != nil {
			err := ml.closeCurrent()
			if err == nil {
				err = ml.recordClosed(false)
			}
			if err != nil && first == nil {
				first = err
			}
		}
		return true
	})
	if err != nil && !errors.Is(err, ErrClosed) && first == nil {
		first = err
	}
	// The ledgers retention dropped are deleted before we go, or as many as
	// ctx allows: the list no longer names them, so nobody else will.
	if err := ml.deleter.wait(ctx); err != nil && first == nil {
		first = fmt.Errorf("close %s: ledgers left to delete: %w", ml.topic, err)
	}
	ml.shutdown()
	return first
}

// shutdown stops the goroutines; the owner must have stopped the writer or
// be stopped by the cancel below.
func (ml *ManagedLedger) shutdown() {
	ml.kill()
	<-ml.ownerDone
	ml.stopWriter() // after a kill mid-append or mid-rollover one may be left
	ml.next.stop()  // left OPEN, as a crash leaves it, if Close did not discard it
	ml.wg.Wait()
	ml.fail(ErrClosed)
	ml.f.forget(ml.topic, ml)
}

// crash drops the instance as a killed process would: no final writes, the
// ledger left OPEN, cursors not persisted. For tests.
func (ml *ManagedLedger) crash() {
	ml.mu.Lock()
	ml.closing = true
	cs := make([]*Cursor, 0, len(ml.cursors))
	for _, c := range ml.cursors {
		cs = append(cs, c)
	}
	ml.mu.Unlock()
	for _, c := range cs {
		c.stop(false)
	}
	ml.shutdown()
}

// Delete deletes the topic: its ledgers, every cursor (owned elsewhere
// included) and its record, then closes the instance.
func (ml *ManagedLedger) Delete(ctx context.Context) error {
	ml.mu.Lock()
	cs := make([]*Cursor, 0, len(ml.cursors))
	for _, c := range ml.cursors {
		cs = append(cs, c)
	}
	ml.closing = true
	ml.mu.Unlock()
	for _, c := range cs {
		c.stop(false)
	}
	var err error
	derr := ml.do(ctx, func() bool {
		ml.discardNext()
		if err = ml.Err(); err != nil {
			return true
		}
		if err = ml.closeCurrent(); err != nil {
			return true
		}
		err = ml.deleteAll(ctx)
		return true
	})
	if werr := ml.deleter.wait(ctx); werr != nil && err == nil {
		err = fmt.Errorf("delete %s: ledgers left to delete: %w", ml.topic, werr)
	}
	ml.shutdown()
	if derr != nil {
		return derr
	}
	return err
}

func (ml *ManagedLedger) deleteAll(ctx context.Context) error {
	st := ml.f.store
	mctx, cancel := ml.f.metaCtx(ctx)
	defer cancel()
	ml.listMu.Lock()
	defer ml.listMu.Unlock()
	// The record goes first, by CAS: if someone else owns the topic we
	// must not touch its ledgers or cursors.
	if err := st.Delete(mctx, ml.key, ml.listRev); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			err = fmt.Errorf("%w: %w", ErrFenced, err)
			ml.fail(err)
		}
		return fmt.Errorf("delete %s: %w", ml.topic, err)
	}
	kvs, _, err := st.List(mctx, cursorPrefix(ml.cfg.Region, ml.topic))
	if err != nil {
		return fmt.Errorf("delete %s: list cursors: %w", ml.topic, err)
	}
	var errs []error
	for _, kv := range kvs {
		if err := st.Delete(mctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, meta.ErrConflict) {
			errs = append(errs, err)
		}
	}
	for _, l := range ml.list.Ledgers {
		if err := ml.f.client.Delete(mctx, l.ID); err != nil && !errors.Is(err, ledger.ErrLedgerNotFound) {
			errs = append(errs, fmt.Errorf("ledger %d: %w", l.ID, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete %s: %w", ml.topic, errors.Join(errs...))
	}
	return nil
}
