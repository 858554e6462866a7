package mledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// TailerConfig configures a Tailer.
type TailerConfig struct {
	// Region whose metadata the topic lives under. Required.
	Region string
	// MaxEntriesPerNext caps the entries one Next returns, whatever max the
	// caller asks for. 1..100,000.
	MaxEntriesPerNext int
	// MaxBytesPerNext bounds the bytes one Next returns: it stops reading
	// once this many are read, so a call holds at most this plus one read
	// chunk (tailReadChunk entries). 1KiB..1GiB.
	MaxBytesPerNext int64
	// MetaTimeout bounds one metadata read (the topic's record, a ledger's
	// metadata when it is opened). 1ms..10m.
	MetaTimeout time.Duration
}

// DefaultTailerConfig returns a config for region: 1,000 entries or 8 MiB
// per Next, 10 s per metadata read.
func DefaultTailerConfig(region string) TailerConfig {
	return TailerConfig{Region: region, MaxEntriesPerNext: 1000, MaxBytesPerNext: 8 << 20, MetaTimeout: 10 * time.Second}
}

// Validate checks every field against its documented bounds.
func (c TailerConfig) Validate() error {
	switch {
	case c.Region == "":
		return fmt.Errorf("%w: TailerConfig.Region is required", ErrInvalidConfig)
	case c.MaxEntriesPerNext < 1 || c.MaxEntriesPerNext > 100_000:
		return fmt.Errorf("%w: TailerConfig.MaxEntriesPerNext %d outside [1, 100000]", ErrInvalidConfig, c.MaxEntriesPerNext)
	case c.MaxBytesPerNext < 1<<10 || c.MaxBytesPerNext > 1<<30:
		return fmt.Errorf("%w: TailerConfig.MaxBytesPerNext %d outside [1KiB, 1GiB]", ErrInvalidConfig, c.MaxBytesPerNext)
	case c.MetaTimeout < time.Millisecond || c.MetaTimeout > 10*time.Minute:
		return fmt.Errorf("%w: TailerConfig.MetaTimeout %v outside [1ms, 10m]", ErrInvalidConfig, c.MetaTimeout)
	}
	return nil
}

// tailReadChunk is how many entries one read asks the bookies for before
// the byte bound is checked again: the ledger client's own read window.
const tailReadChunk = 64

// Tailer reads a topic's stored entries from outside the process that owns
// the topic, straight from the bookies, and never writes anything: the
// replicator's reader (DESIGN §6).
//
// What it follows. The ledger list comes from the topic's record
// (ListKey), which it watches. Entries are read from one ledger at a time,
// up to that ledger's LAC; when caught up on a ledger still being written,
// Next long-polls the LAC (ledger.Reader.WaitLAC) and watches the record
// meanwhile. Once the ledger is closed
// and read to its end, the tailer moves to the next ledger the record
// names, waiting on the watch if the owner has not appended it yet. The
// owner closes a ledger before it creates the next (the package doc), so
// moving on only after the close loses nothing, and reading each ledger
// from the entry after the last one returned repeats nothing.
//
// Gone ledgers. A ledger is needed when it may hold entries after the
// tailer's position. The tailer remembers every ledger it has seen in the
// record past its position; if one of those with entries leaves the
// record, or its metadata is gone when the tailer opens it, Next fails
// with ErrLedgerGone. It never skips it. Ledgers already gone when the
// tailer opens are a different case: the tailer cannot know what they
// held, and it starts at the first ledger the record names at or after
// from.Ledger. That is exact when from is the mark-delete position of a
// durable cursor of the topic (the replicator's meridian.repl.<remote>),
// because retention deletes a ledger only once every durable cursor has
// consumed all of it; for any other from, entries removed by retention
// before the tailer opened are not reported.
//
// Ownership. One Next runs at a time (others wait for it); the fields
// after busy belong to the call that holds it. Close cancels life, which
// unblocks a waiting Next and ends the record watch (whose goroutine the
// store owns), then waits for that Next to return.
type Tailer struct {
	cfg    TailerConfig
	client *ledger.Client
	store  meta.Store
	topic  string
	key    string

	life   context.Context
	cancel context.CancelFunc
	// incarnation is the record's CreateRevision, 0 until it is seen.
	incarnation atomic.Int64

	busy chan struct{} // cap 1: held by the running Next and by Close

	closed bool
	// err is a terminal condition (ErrTopicDeleted): every Next returns it.
	err error
	// watch streams the record's changes; nil when it must be restarted.
	watch       <-chan meta.WatchResponse
	watchCancel context.CancelFunc
	// recRev is the ModRevision of the record state last applied.
	recRev     int64
	haveRecord bool
	terminated bool
	// pos is the last entry returned, or from: the next entry returned is
	// the first one after it.
	pos Position
	// cur reads ledger pos.Ledger once it is opened; nil while the tailer
	// is between ledgers. It is shared with the client's other tailers of
	// the ledger (ledger.Client.OpenTail); releaseCur gives it back.
	// curDropped says the record no longer names it.
	cur        *ledger.Reader
	releaseCur func()
	curDropped bool
	// recordMoved says the record changed since cur's metadata was last
	// read: a rollover, or a new owner that recovered and closed the
	// ledger, shows there first. The reader holds its metadata while its
	// polls move the LAC, so next reads it again (UpdateLAC) before it
	// waits; otherwise it would learn of the close only when a poll held
	// on the closed ledger timed out.
	recordMoved bool
	// ahead are the ledgers seen in the record that are still to be read,
	// in id order: every listed ledger above pos.Ledger (and pos.Ledger
	// itself until it is opened). known is the highest id taken into
	// ahead or opened.
	ahead []tailLedger
	known int64
}

// tailLedger is a ledger the tailer has seen in the record and not read yet.
type tailLedger struct {
	id int64
	// entries is the ledger's entry count as the record last gave it;
	// final says it was then closed (not the record's last ledger), so the
	// count will not change.
	entries int64
	final   bool
	// dropped says the record no longer names the ledger.
	dropped bool
}

// OpenTailer reads topic's entries after position from (from itself
// excluded). The zero Position means from the first entry still stored:
// ledger ids start at 1 (meta.NextID), so every entry comes after it. The
// record need not exist yet: Next waits for the topic to be created. See
// Tailer for what from must be for ledgers deleted before the call.
func OpenTailer(ctx context.Context, cfg TailerConfig, client *ledger.Client, store meta.Store, topic string, from Position) (*Tailer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil || store == nil || topic == "" {
		return nil, fmt.Errorf("%w: OpenTailer needs a ledger client, a store and a topic", ErrInvalidConfig)
	}
	if from.Entry < -1 {
		return nil, fmt.Errorf("%w: tail %s from %v: entry below -1", ErrInvalidPosition, topic, from)
	}
	t := &Tailer{
		cfg: cfg, client: client, store: store, topic: topic, key: ListKey(cfg.Region, topic),
		busy: make(chan struct{}, 1),
		pos:  from, known: from.Ledger - 1,
	}
	t.life, t.cancel = context.WithCancel(context.Background())
	if err := t.restartWatch(ctx); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Incarnation returns the CreateRevision of the topic's record, which
// tells a topic apart from one deleted and created again under the same
// name, or 0 while the record has not been seen.
func (t *Tailer) Incarnation() int64 { return t.incarnation.Load() }

// Next blocks until at least one entry after the last returned is
// confirmed, and returns up to max of them in order (fewer when
// MaxEntriesPerNext or MaxBytesPerNext stop it first); ctx bounds the
// wait. An entry that cannot be read from any replica (a checksum failure
// on every one, say) is an error; the entries before it are returned
// first, by the call that reaches them. Errors: ErrLedgerGone,
// ErrTopicDeleted, ErrEndOfTopic once a terminated topic is read to its
// end, ErrClosed after Close, or ctx's error.
func (t *Tailer) Next(ctx context.Context, max int) ([]Entry, error) {
	if max < 1 {
		return nil, fmt.Errorf("tail %s: Next needs max >= 1, got %d", t.topic, max)
	}
	select {
	case t.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.life.Done():
		return nil, ErrClosed
	}
	defer func() { <-t.busy }()
	if t.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.life, cancel)
	defer stop()
	es, err := t.next(ctx, min(max, t.cfg.MaxEntriesPerNext))
	if err != nil && t.life.Err() != nil {
		return nil, ErrClosed
	}
	return es, err
}

func (t *Tailer) next(ctx context.Context, max int) ([]Entry, error) {
	for {
		if err := t.syncRecord(ctx, false); err != nil {
			return nil, err
		}
		if t.cur == nil {
			opened := false
			if t.haveRecord {
				var err error
				if opened, err = t.openNext(ctx); err != nil {
					return nil, err
				}
			}
			if !opened {
				if t.terminated {
					return nil, fmt.Errorf("tail %s after %v: %w", t.topic, t.pos, ErrEndOfTopic)
				}
				if err := t.syncRecord(ctx, true); err != nil {
					return nil, err
				}
				continue
			}
		}
		if t.recordMoved {
			t.recordMoved = false
			if _, err := t.cur.UpdateLAC(ctx); err != nil {
				return nil, t.readError(ctx, fmt.Sprintf("read the metadata of ledger %d", t.cur.ID()), err)
			}
		}
		if lac := t.cur.LastAddConfirmed(); t.pos.Entry < lac {
			return t.read(ctx, lac, max)
		}
		if t.cur.Closed() {
			t.dropCur()
			continue
		}
		if err := t.waitLAC(ctx); err != nil {
			return nil, err
		}
	}
}

// read returns entries pos.Entry+1 .. up to lac of the current ledger,
// at most max of them and about MaxBytesPerNext bytes.
func (t *Tailer) read(ctx context.Context, lac int64, max int) ([]Entry, error) {
	id := t.pos.Ledger
	last := min(lac, t.pos.Entry+int64(max))
	var out []Entry
	var bytes int64
	for first := t.pos.Entry + 1; first <= last && bytes < t.cfg.MaxBytesPerNext; first += tailReadChunk {
		les, err := t.cur.Read(ctx, first, min(last, first+tailReadChunk-1))
		for _, e := range les {
			out = append(out, Entry{Position: Position{id, e.ID}, Data: e.Payload})
			bytes += int64(len(e.Payload))
			t.pos = Position{id, e.ID}
		}
		if err != nil {
			if len(out) > 0 && ctx.Err() == nil {
				// The entries before the failure go out now; the next
				// call reaches the failure again and returns it.
				return out, nil
			}
			return nil, t.readError(ctx, fmt.Sprintf("read %d:%d..%d", id, first, last), err)
		}
	}
	return out, nil
}

// readError wraps a failure to read the current ledger, telling a ledger
// deleted under the tailer (ErrLedgerGone) or a deleted topic from the
// rest.
func (t *Tailer) readError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	absent := errors.Is(err, ledger.ErrNoSuchEntry) || errors.Is(err, ledger.ErrNoSuchLedger)
	if errors.Is(err, ledger.ErrLedgerNotFound) || (t.curDropped && absent) {
		return t.goneError(ctx, fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("tail %s: %s: %w", t.topic, what, err)
}

// goneError reports a ledger whose metadata is gone: ErrTopicDeleted when
// the record, read afresh, shows the topic deleted (the watch may not have
// delivered that yet), else ErrLedgerGone.
func (t *Tailer) goneError(ctx context.Context, err error) error {
	if rerr := t.restartWatch(ctx); rerr != nil {
		return rerr
	}
	return fmt.Errorf("tail %s: %w: %w", t.topic, ErrLedgerGone, err)
}

// openNext opens the first ledger of ahead and makes it current. It
// reports false when the record names no further ledger yet.
func (t *Tailer) openNext(ctx context.Context) (bool, error) {
	for len(t.ahead) > 0 {
		l := t.ahead[0]
		if l.dropped {
			if l.final && l.entries == 0 {
				t.ahead = t.ahead[1:]
				continue
			}
			return false, fmt.Errorf("tail %s after %v: %w: ledger %d left the record before it was read", t.topic, t.pos, ErrLedgerGone, l.id)
		}
		mctx, cancel := context.WithTimeout(ctx, t.cfg.MetaTimeout)
		r, release, err := t.client.OpenTail(mctx, l.id)
		cancel()
		if errors.Is(err, ledger.ErrLedgerNotFound) {
			return false, t.goneError(ctx, fmt.Errorf("open ledger %d after %v: %w", l.id, t.pos, err))
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("tail %s: open ledger %d: %w", t.topic, l.id, err)
		}
		if l.id != t.pos.Ledger {
			t.pos = Position{l.id, -1}
		} else if r.Closed() && t.pos.Entry > r.LastAddConfirmed() {
			release()
			return false, fmt.Errorf("%w: tail %s from %v: ledger %d ends at entry %d", ErrInvalidPosition, t.topic, t.pos, l.id, r.LastAddConfirmed())
		}
		t.ahead = t.ahead[1:]
		t.cur, t.releaseCur = r, release
		return true, nil
	}
	return false, nil
}

// dropCur leaves the current ledger, read to its end.
func (t *Tailer) dropCur() {
	t.releaseCur()
	t.cur, t.releaseCur, t.curDropped = nil, nil, false
}

// restartWatch starts a watch of the record and then reads it: every
// change after the read arrives on the watch, and the ones the read
// already shows are skipped by revision.
func (t *Tailer) restartWatch(ctx context.Context) error {
	if t.watchCancel != nil {
		t.watchCancel()
		t.watch, t.watchCancel = nil, nil
	}
	wctx, wcancel := context.WithCancel(t.life)
	watch := t.store.Watch(wctx, t.key, 0)
	mctx, cancel := context.WithTimeout(ctx, t.cfg.MetaTimeout)
	kv, err := t.store.Get(mctx, t.key)
	cancel()
	switch {
	case errors.Is(err, meta.ErrNotFound):
		if t.haveRecord {
			t.err = fmt.Errorf("tail %s: %w", t.topic, ErrTopicDeleted)
		}
	case err != nil:
		wcancel()
		return fmt.Errorf("tail %s: read its record: %w", t.topic, err)
	default:
		if err := t.applyRecord(kv); err != nil {
			wcancel()
			t.err = err
			return err
		}
	}
	t.watch, t.watchCancel = watch, wcancel
	return t.err
}

// syncRecord applies the record changes the watch has delivered. With
// block it first waits, bounded by ctx, for at least one watch response.
// A watch that ended (compaction, a lost leader) is started again.
func (t *Tailer) syncRecord(ctx context.Context, block bool) error {
	for {
		if t.err != nil {
			return t.err
		}
		if t.watch == nil {
			if err := t.restartWatch(ctx); err != nil {
				return err
			}
			if block {
				// The fresh read may be the change waited for; the caller
				// looks and blocks again if it is not.
				return nil
			}
		}
		var wr meta.WatchResponse
		var ok bool
		if block {
			select {
			case wr, ok = <-t.watch:
			case <-ctx.Done():
				return ctx.Err()
			}
			block = false
		} else {
			select {
			case wr, ok = <-t.watch:
			default:
				return nil
			}
		}
		if err := t.applyWatch(wr, ok); err != nil {
			return err
		}
	}
}

// applyWatch applies one receive from the watch (ok false: the channel
// was closed). A watch that ended is dropped, for syncRecord to start
// again.
func (t *Tailer) applyWatch(wr meta.WatchResponse, ok bool) error {
	if !ok || wr.Err != nil {
		if t.life.Err() != nil {
			return ErrClosed
		}
		t.watchCancel()
		t.watch, t.watchCancel = nil, nil
		return nil
	}
	for _, ev := range wr.Events {
		if ev.KV.Key != t.key {
			continue // a topic whose name starts with ours
		}
		var err error
		if ev.Type == meta.EventDelete {
			if t.haveRecord {
				err = fmt.Errorf("tail %s: %w", t.topic, ErrTopicDeleted)
			}
		} else {
			err = t.applyRecord(ev.KV)
		}
		if err != nil {
			t.err = err
			return err
		}
	}
	return nil
}

// waitLAC long-polls the current ledger's LAC past pos, and also returns
// when the record changes: a rollover, or a new owner that recovered and
// closed the ledger, shows there first (see recordMoved), and so does a
// deleted topic. The poll runs on its own goroutine, which waitLAC stops
// and waits for before it returns.
func (t *Tailer) waitLAC(ctx context.Context) error {
	if t.watch == nil {
		if _, err := t.cur.WaitLAC(ctx, t.pos.Entry); err != nil && !errors.Is(err, ledger.ErrLedgerClosed) {
			return t.readError(ctx, fmt.Sprintf("wait for entries after %v", t.pos), err)
		}
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	polled := make(chan error, 1)
	go func() {
		_, err := t.cur.WaitLAC(pctx, t.pos.Entry)
		polled <- err
	}()
	select {
	case err := <-polled:
		if err != nil && !errors.Is(err, ledger.ErrLedgerClosed) {
			return t.readError(ctx, fmt.Sprintf("wait for entries after %v", t.pos), err)
		}
		return nil
	case wr, ok := <-t.watch:
		cancel()
		<-polled
		return t.applyWatch(wr, ok)
	}
}

// applyRecord takes a state of the record into the tailer's view: new
// ledgers go to ahead, ledgers that left the record are marked dropped.
func (t *Tailer) applyRecord(kv meta.KV) error {
	if inc := t.incarnation.Load(); inc != 0 && kv.CreateRevision != inc {
		return fmt.Errorf("tail %s: %w: created again at revision %d (was %d)", t.topic, ErrTopicDeleted, kv.CreateRevision, inc)
	}
	if kv.ModRevision <= t.recRev {
		return nil
	}
	list, err := decodeList(kv.Value)
	if err != nil {
		return fmt.Errorf("tail %s: %w", t.topic, err)
	}
	t.incarnation.Store(kv.CreateRevision)
	t.haveRecord, t.recRev, t.terminated = true, kv.ModRevision, list.Terminated
	t.recordMoved = t.cur != nil
	listed := make(map[int64]ledgerInfo, len(list.Ledgers))
	for _, l := range list.Ledgers {
		listed[l.ID] = l
	}
	if t.cur != nil {
		_, ok := listed[t.cur.ID()]
		t.curDropped = !ok
	}
	for i := range t.ahead {
		a := &t.ahead[i]
		l, ok := listed[a.id]
		if !ok {
			a.dropped = true
			continue
		}
		a.entries = l.Entries
		a.final = a.final || a.id != list.Ledgers[len(list.Ledgers)-1].ID
	}
	for i, l := range list.Ledgers {
		if l.ID > t.known {
			t.ahead = append(t.ahead, tailLedger{id: l.ID, entries: l.Entries, final: i < len(list.Ledgers)-1})
			t.known = l.ID
		}
	}
	return nil
}

// Close stops the tailer: a Next waiting returns ErrClosed, and every
// later call does too.
func (t *Tailer) Close() error {
	t.cancel()
	t.busy <- struct{}{}
	defer func() { <-t.busy }()
	t.closed = true
	if t.cur != nil {
		t.dropCur()
	}
	if t.watchCancel != nil {
		t.watchCancel()
		t.watch, t.watchCancel = nil, nil
	}
	return nil
}
