package bookie

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// store is the entry storage: entries and per-ledger state in pebble, plus
// the in-memory ledger table (fence flag, LAC, master key, LAC long-poll
// waiters).
//
// Pebble runs with its WAL disabled: the journal is the write-ahead log. An
// entry reaches pebble only after its journal record is fsynced (apply is
// called by the journal's apply stage after the sync), so pebble's memtable may
// be lost in a crash, and replay re-applies the journal from the last
// checkpoint. Applying is idempotent (same key, same value; LAC is a max;
// fence is a flag), so re-applying records that did reach an sstable is
// harmless.
//
// Ownership: the journal's apply stage (applyLoop) is the only writer of
// ledger state (fenced, lac, masterKey); it applies records in journal order,
// and that order decides whether an add raced with a fence. GC may delete a ledger
// concurrently. Readers take mu only to look a ledger up.
//
// Keys:
//
//	'e' ledgerID(8) entryID(8) -> crc32c(4) payload   an entry
//	'l' ledgerID(8)            -> ledgerMeta           a ledger's state
type store struct {
	db  *pebble.DB
	log *slog.Logger
	m   *metrics
	fp  Failpoints

	mu struct {
		sync.Mutex
		ledgers map[int64]*ledgerState
	}
}

type ledgerState struct {
	fenced    bool
	lac       int64
	masterKey []byte
	// waiters are LAC long-polls, fired when lac passes their previous.
	waiters map[*lacWaiter]struct{}
}

// lacWaiter is one LAC long-poll. Exactly one of the LAC update, the
// timeout or a GC deletion answers it: whoever wins claim.
type lacWaiter struct {
	ledgerID int64
	previous int64
	claimed  atomic.Bool
	answer   func(lac int64, err error)
}

func (w *lacWaiter) claim() bool { return w.claimed.CompareAndSwap(false, true) }

func entryKey(ledgerID, entryID int64) []byte {
	k := make([]byte, 17)
	k[0] = 'e'
	binary.BigEndian.PutUint64(k[1:], uint64(ledgerID))
	binary.BigEndian.PutUint64(k[9:], uint64(entryID))
	return k
}

func ledgerKey(ledgerID int64) []byte {
	k := make([]byte, 9)
	k[0] = 'l'
	binary.BigEndian.PutUint64(k[1:], uint64(ledgerID))
	return k
}

const ledgerMetaVersion = 1

func encodeLedgerMeta(fenced bool, lac int64, key []byte) []byte {
	v := []byte{ledgerMetaVersion, 0}
	if fenced {
		v[1] = 1
	}
	v = binary.BigEndian.AppendUint64(v, uint64(lac))
	v = binary.BigEndian.AppendUint16(v, uint16(len(key)))
	return append(v, key...)
}

func decodeLedgerMeta(v []byte) (*ledgerState, error) {
	if len(v) < 12 || v[0] != ledgerMetaVersion || int(binary.BigEndian.Uint16(v[10:]))+12 != len(v) {
		return nil, fmt.Errorf("%w: bad ledger metadata %x", ErrStorage, v)
	}
	st := &ledgerState{fenced: v[1]&1 != 0, lac: int64(binary.BigEndian.Uint64(v[2:]))}
	if len(v) > 12 {
		st.masterKey = bytes.Clone(v[12:])
	}
	return st, nil
}

type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}

func openStore(dir string, cacheSize int64, log *slog.Logger, m *metrics, fp Failpoints) (*store, error) {
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		// The journal is the WAL; see the type comment.
		DisableWAL: true,
		// Large memtables absorb bursts of 64 KiB entries without stalling
		// on flushes. Cost: up to two memtables (128 MiB) of memory.
		MemTableSize: 64 << 20,
		Cache:        cache,
		Logger:       pebbleLogger{log},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: open index %s: %w", ErrStorage, dir, err)
	}
	s := &store{db: db, log: log, m: m, fp: fp}
	s.mu.ledgers = make(map[int64]*ledgerState)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'m'}})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		st, err := decodeLedgerMeta(it.Value())
		if err != nil {
			it.Close()
			db.Close()
			return nil, err
		}
		s.mu.ledgers[int64(binary.BigEndian.Uint64(k[1:]))] = st
	}
	if err := it.Close(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	m.ledgers.Set(float64(len(s.mu.ledgers)))
	return s, nil
}

func (s *store) close() error { return s.db.Close() }

// flush makes everything applied so far durable in sstables; the journal
// behind it can then be deleted.
func (s *store) flush() error {
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("%w: flush: %w", ErrStorage, err)
	}
	return nil
}

// opResult is what applying one record produced.
type opResult struct {
	err error
	lac int64 // the ledger's LAC after the record
}

// apply applies journaled records, in journal order, to pebble and to the
// ledger table, and says for each whether it took effect. It is called only
// by the journal's apply stage (and by replay before it starts). An error is
// fatal (ErrStorage).
//
// The rules, which replay applies identically so that a restart reaches the
// same state: a non-recovery add to a fenced ledger is refused (its record
// stays in the journal but has no effect), as is an add or LAC write whose
// master key differs from the ledger's.
func (s *store) apply(recs []*record, results []opResult) error {
	// Phase 1: decide, on copies of the touched ledgers' state.
	type draft struct {
		fenced bool
		lac    int64
		key    []byte
	}
	drafts := make(map[int64]*draft)
	s.mu.Lock()
	for _, r := range recs {
		if r.kind == recProbe || drafts[r.ledgerID] != nil {
			continue
		}
		d := &draft{lac: bkproto.NoEntry}
		if st := s.mu.ledgers[r.ledgerID]; st != nil {
			d.fenced, d.lac, d.key = st.fenced, st.lac, st.masterKey
		}
		drafts[r.ledgerID] = d
	}
	s.mu.Unlock()

	b := s.db.NewBatch()
	defer b.Close()
	for i, r := range recs {
		if r.kind == recProbe {
			results[i] = opResult{lac: bkproto.NoEntry}
			continue
		}
		d := drafts[r.ledgerID]
		res := opResult{}
		switch {
		case r.kind == recFence:
			d.fenced = true
		case (r.kind == recAdd && !r.recovery || r.kind == recLAC) && d.fenced:
			res.err = fmt.Errorf("%w: ledger %d is fenced; only recovery may add to it", bkproto.ErrFenced, r.ledgerID)
		case len(r.masterKey) > 0 && len(d.key) > 0 && !bytes.Equal(r.masterKey, d.key):
			res.err = fmt.Errorf("%w: master key differs from ledger %d's", bkproto.ErrBadRequest, r.ledgerID)
		default:
			if len(d.key) == 0 && len(r.masterKey) > 0 {
				d.key = bytes.Clone(r.masterKey)
			}
			d.lac = max(d.lac, r.lac)
			if r.kind == recAdd {
				v := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(r.payload)), r.checksum)
				if err := b.Set(entryKey(r.ledgerID, r.entryID), append(v, r.payload...), nil); err != nil {
					return fmt.Errorf("%w: %w", ErrStorage, err)
				}
			}
		}
		res.lac = d.lac
		results[i] = res
	}
	for id, d := range drafts {
		if err := b.Set(ledgerKey(id), encodeLedgerMeta(d.fenced, d.lac, d.key), nil); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	// Phase 2: to pebble (memtable only; the journal already made it
	// durable).
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("%w: apply: %w", ErrStorage, err)
	}
	// Phase 3: publish, after the entries are readable, and wake long-polls.
	var fire []*lacWaiter
	var lacs []int64
	s.mu.Lock()
	for id, d := range drafts {
		st := s.mu.ledgers[id]
		if st == nil {
			st = &ledgerState{}
			s.mu.ledgers[id] = st
		}
		st.fenced, st.lac, st.masterKey = d.fenced, d.lac, d.key
		for w := range st.waiters {
			if st.lac > w.previous {
				delete(st.waiters, w)
				fire = append(fire, w)
				lacs = append(lacs, st.lac)
			}
		}
	}
	n := len(s.mu.ledgers)
	s.mu.Unlock()
	s.m.ledgers.Set(float64(n))
	for i, w := range fire {
		if w.claim() {
			w.answer(lacs[i], nil)
		}
	}
	return nil
}

// ledger returns a copy of a ledger's fence flag and LAC.
func (s *store) ledger(ledgerID int64) (fenced bool, lac int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	if st == nil {
		return false, bkproto.NoEntry, false
	}
	return st.fenced, st.lac, true
}

// read returns an entry's payload, verified against its stored checksum, and
// the ledger's LAC.
func (s *store) read(ledgerID, entryID int64) (payload []byte, checksum uint32, lac int64, err error) {
	_, lac, ok := s.ledger(ledgerID)
	if !ok {
		return nil, 0, lac, fmt.Errorf("%w: ledger %d", bkproto.ErrNoSuchLedger, ledgerID)
	}
	v, closer, err := s.db.Get(entryKey(ledgerID, entryID))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, 0, lac, fmt.Errorf("%w: ledger %d entry %d", bkproto.ErrNoSuchEntry, ledgerID, entryID)
	}
	if err != nil {
		return nil, 0, lac, fmt.Errorf("%w: read ledger %d entry %d: %w", bkproto.ErrInternal, ledgerID, entryID, err)
	}
	v = bytes.Clone(v)
	closer.Close()
	if len(v) < 4 {
		s.m.checksumErrors.Inc()
		return nil, 0, lac, fmt.Errorf("%w: ledger %d entry %d: stored value too short", bkproto.ErrChecksumMismatch, ledgerID, entryID)
	}
	checksum, payload = binary.BigEndian.Uint32(v), v[4:]
	if s.fp.corrupts(ledgerID, entryID) && len(payload) > 0 {
		payload[len(payload)/2] ^= 0x40
	}
	if got := bkproto.EntryChecksum(ledgerID, entryID, payload); got != checksum {
		s.m.checksumErrors.Inc()
		s.log.Error("stored entry fails its checksum", "ledger", ledgerID, "entry", entryID,
			"stored", checksum, "computed", got)
		return nil, 0, lac, fmt.Errorf("%w: ledger %d entry %d is damaged on this bookie; read another replica",
			bkproto.ErrChecksumMismatch, ledgerID, entryID)
	}
	return payload, checksum, lac, nil
}

// waitLAC registers w, to be answered (by whoever claims it) once the
// ledger's LAC exceeds w.previous. It reports false, having answered w
// itself, if there is nothing to wait for: the LAC already exceeds it, or the
// ledger is unknown.
func (s *store) waitLAC(w *lacWaiter) bool {
	s.mu.Lock()
	st := s.mu.ledgers[w.ledgerID]
	if st == nil {
		s.mu.Unlock()
		if w.claim() {
			w.answer(bkproto.NoEntry, fmt.Errorf("%w: ledger %d", bkproto.ErrNoSuchLedger, w.ledgerID))
		}
		return false
	}
	if st.lac > w.previous {
		lac := st.lac
		s.mu.Unlock()
		if w.claim() {
			w.answer(lac, nil)
		}
		return false
	}
	if st.waiters == nil {
		st.waiters = make(map[*lacWaiter]struct{})
	}
	st.waiters[w] = struct{}{}
	s.mu.Unlock()
	return true
}

// forgetWaiter drops a waiter that something else (its timeout, its
// connection closing) has claimed.
func (s *store) forgetWaiter(w *lacWaiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.mu.ledgers[w.ledgerID]; st != nil {
		delete(st.waiters, w)
	}
}

// ledgerIDs is a snapshot of the ledgers stored here, sorted.
func (s *store) ledgerIDs() []int64 {
	s.mu.Lock()
	ids := make([]int64, 0, len(s.mu.ledgers))
	for id := range s.mu.ledgers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// deleteLedger removes a ledger and its entries. Like every pebble write it
// is durable at the next flush; a crash before that resurrects the ledger,
// and the next GC pass deletes it again.
func (s *store) deleteLedger(ledgerID int64) error {
	s.mu.Lock()
	st := s.mu.ledgers[ledgerID]
	delete(s.mu.ledgers, ledgerID)
	n := len(s.mu.ledgers)
	s.mu.Unlock()
	s.m.ledgers.Set(float64(n))
	if st != nil {
		for w := range st.waiters {
			if w.claim() {
				w.answer(bkproto.NoEntry, fmt.Errorf("%w: ledger %d was deleted", bkproto.ErrNoSuchLedger, ledgerID))
			}
		}
	}
	if err := s.db.DeleteRange(entryKey(ledgerID, 0), entryKey(ledgerID+1, 0), pebble.NoSync); err != nil {
		return fmt.Errorf("%w: delete ledger %d: %w", ErrStorage, ledgerID, err)
	}
	if err := s.db.Delete(ledgerKey(ledgerID), pebble.NoSync); err != nil {
		return fmt.Errorf("%w: delete ledger %d: %w", ErrStorage, ledgerID, err)
	}
	return nil
}
