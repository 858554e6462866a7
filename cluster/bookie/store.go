package bookie

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// store is the entry index and the ledger state: in pebble, the index
// (ledger, entry) -> the entry's record in the journal, each ledger's state
// and each checkpointed journal file's accounting; in memory, the ledger
// table (fence flag, LAC, master key, LAC long-poll waiters), the journal
// files' accounting and the open read handles of journal files. The entries
// themselves live only in the journal files (see the package comment).
//
// Pebble runs with its WAL disabled: the journal is the write-ahead log. An
// index entry reaches pebble only after its journal record is fsynced (apply
// is called by the journal's apply stage after the sync), so pebble's
// memtable may be lost in a crash, and replay re-applies the journal from the
// last checkpoint. Applying is idempotent (same key, same value; LAC is a
// max; fence is a flag), so re-applying records that did reach an sstable is
// harmless. Pebble's durable state is always a prefix of the batches applied
// (memtables flush in order), so the index, the ledger state and the file
// accounting written in one batch are durable together or not at all.
//
// Ownership: the journal's apply stage (journal.applyAndAnswer, on one of
// its two goroutines at a time) is the only writer of ledger state (fenced, lac, masterKey) and of index entries for new
// records; it applies records in journal order, and that order decides
// whether an add raced with a fence. GC may delete a ledger concurrently.
// Whoever changes the set of journal files or their persisted accounting
// (the checkpointer, GC, the compactor) holds maint for the whole change;
// readers take mu only to look a ledger or a file up.
//
// Keys:
//
//	'e' ledgerID(8) entryID(8) -> file(8) offset(8) size(4)   an entry's record
//	'l' ledgerID(8)            -> ledgerMeta                  a ledger's state
//	'f' fileNum(8)             -> fileMeta                    a checkpointed file's accounting
//	'v'                        -> format version
type store struct {
	db  *pebble.DB
	log *slog.Logger
	m   *metrics
	fp  *failpointSwitch
	fs  FS
	dir string // the journal's directory, where the entries are

	// maint serializes the checkpointer, GC and the compactor: each of
	// them snapshots file accounting under mu and writes it to pebble
	// outside it, and the writes must land in snapshot order. Its place in
	// the lock order: docs/lock-order.md.
	maint sync.Mutex

	mu struct {
		sync.Mutex
		ledgers map[int64]*ledgerState
		// unknownWaiters are LAC long-polls on ledgers this bookie holds
		// nothing of yet (a ledger just created, or one whose entries all
		// went to other bookies so far): held like the others, and
		// moved to the ledger's state when its first record is applied.
		// Answering them at once with NoSuchLedger made every tailing
		// reader of an empty ledger poll in a loop, an etcd read and two
		// bookie calls each time: 12-14% of a core per idle replicator,
		// 17% per region's etcd and 5% per bookie on the geo bed.
		unknownWaiters map[int64]map[*lacWaiter]struct{}
		// files is the accounting of every journal file that holds a
		// record (see fileSpace); a file absent from it is being, or
		// has been, deleted.
		files map[uint64]*fileSpace
		// readers are open read handles of journal files.
		readers map[uint64]*logReader
		// checkpoint is the first journal file not known to be fully
		// applied to flushed sstables: files before it may be deleted or
		// compacted, files from it on are replayed after a crash.
		checkpoint uint64
	}
}

// fileSpace is one journal file's accounting: its size and, per ledger, the
// bytes of records that an index entry was written for. An entry re-added
// elsewhere (a recovery add, a compaction copy) still counts here until its
// ledger is deleted or the file is compacted: the count may be high, never
// low, so a file whose count is zero holds no indexed entry and may go.
type fileSpace struct {
	size int64
	live map[int64]int64
}

func (f *fileSpace) liveBytes() int64 {
	var n int64
	for _, b := range f.live {
		n += b
	}
	return n
}

// logReader is a read handle of one journal file. Reads hold mu for reading
// across the pread; deleting the file takes it for writing and sets f to
// nil, so no read ever uses a closed descriptor.
type logReader struct {
	mu sync.RWMutex
	f  File
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

func fileKey(n uint64) []byte {
	k := make([]byte, 9)
	k[0] = 'f'
	binary.BigEndian.PutUint64(k[1:], n)
	return k
}

var versionKey = []byte{'v'}

// indexFormat is the index's format version: 2 is the index into journal
// files; 1 (entries stored in pebble) is refused.
const indexFormat = 2

func encodeLoc(l entryLoc) []byte {
	v := make([]byte, 20)
	binary.BigEndian.PutUint64(v, l.file)
	binary.BigEndian.PutUint64(v[8:], uint64(l.off))
	binary.BigEndian.PutUint32(v[16:], l.size)
	return v
}

func decodeLoc(v []byte) (entryLoc, bool) {
	if len(v) != 20 {
		return entryLoc{}, false
	}
	return entryLoc{file: binary.BigEndian.Uint64(v), off: int64(binary.BigEndian.Uint64(v[8:])),
		size: binary.BigEndian.Uint32(v[16:])}, true
}

const fileMetaVersion = 1

func encodeFileMeta(f *fileSpace) []byte {
	v := []byte{fileMetaVersion}
	v = binary.BigEndian.AppendUint64(v, uint64(f.size))
	v = binary.BigEndian.AppendUint32(v, uint32(len(f.live)))
	for id, n := range f.live {
		v = binary.BigEndian.AppendUint64(v, uint64(id))
		v = binary.BigEndian.AppendUint64(v, uint64(n))
	}
	return v
}

func decodeFileMeta(v []byte) (*fileSpace, error) {
	if len(v) < 13 || v[0] != fileMetaVersion || 13+16*int(binary.BigEndian.Uint32(v[9:])) != len(v) {
		return nil, fmt.Errorf("%w: bad journal file accounting %x", ErrStorage, v)
	}
	f := &fileSpace{size: int64(binary.BigEndian.Uint64(v[1:])), live: make(map[int64]int64)}
	for b := v[13:]; len(b) > 0; b = b[16:] {
		f.live[int64(binary.BigEndian.Uint64(b))] = int64(binary.BigEndian.Uint64(b[8:]))
	}
	return f, nil
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

func openStore(dir string, cacheSize int64, log *slog.Logger, m *metrics, fp *failpointSwitch, fs FS, journalDir string) (*store, error) {
	cache := pebble.NewCache(cacheSize)
	defer cache.Unref()
	opts := &pebble.Options{
		// The journal is the WAL; see the type comment.
		DisableWAL: true,
		// Index entries are ~60 bytes: 32 MiB holds the index of a few
		// hundred thousand entries, more than a journal file's worth
		// between two checkpoints. Cost: up to two memtables of memory.
		// Pebble sizes them itself: the first is 256 KiB, and after a
		// flush that found one over half full the next is twice its
		// size, up to this; they never shrink. So a bookie's index
		// memory ratchets up to fit the most index written between two
		// flushes (journal checkpoints, GC passes that delete ledgers),
		// and may step up hours after start when that most grows.
		MemTableSize: 32 << 20,
		Cache:        cache,
		Logger:       pebbleLogger{log},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: open index %s: %w", ErrStorage, dir, err)
	}
	s := &store{db: db, log: log, m: m, fp: fp, fs: fs, dir: journalDir}
	s.mu.ledgers = make(map[int64]*ledgerState)
	s.mu.unknownWaiters = make(map[int64]map[*lacWaiter]struct{})
	s.mu.files = make(map[uint64]*fileSpace)
	s.mu.readers = make(map[uint64]*logReader)
	if err := s.checkFormat(); err != nil {
		db.Close()
		return nil, err
	}
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
	m.setLedgers(len(s.mu.ledgers))
	m.index.set(db)
	return s, nil
}

// checkFormat refuses an index written by the previous format (entries in
// pebble), which this code would misread, and stamps a new one.
func (s *store) checkFormat() error {
	v, closer, err := s.db.Get(versionKey)
	if err == nil {
		ok := len(v) == 1 && v[0] == indexFormat
		closer.Close()
		if !ok {
			return fmt.Errorf("%w: index format %x, this bookie reads %d", ErrStorage, v, indexFormat)
		}
		return nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	nonEmpty := it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if nonEmpty {
		return fmt.Errorf("%w: the data directory was written by a bookie that stored entries in its index (format 1); "+
			"drain this bookie's ledgers to others and start it on an empty directory", ErrStorage)
	}
	// Durable with the first flush, before anything else can be.
	if err := s.db.Set(versionKey, []byte{indexFormat}, pebble.NoSync); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// close closes the journal files' read handles and pebble.
func (s *store) close() error {
	s.mu.Lock()
	readers := s.mu.readers
	s.mu.readers = make(map[uint64]*logReader)
	s.mu.Unlock()
	for _, r := range readers {
		r.close()
	}
	s.m.index.set(nil)
	return s.db.Close()
}

func (r *logReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// flush makes everything applied so far durable in sstables; the journal
// behind it then no longer needs replaying.
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
// fatal (ErrStorage). Each record's loc must be set.
//
// The rules, which replay applies identically so that a restart reaches the
// same state:
//   - The master key. A ledger's key is the first one a record carries (an
//     add, a fence or a LAC write); once it has one, a record with another
//     key or none is refused with ErrUnauthorized, recovery adds included.
//     A ledger without a key (one written before clients sent keys) takes
//     any record, as before. Keys are compared in constant time.
//   - Fencing. A non-recovery add, or a LAC write, to a fenced ledger is
//     refused with ErrFenced; a recovery add with the key is accepted.
//
// A refused record stays in the journal but has no effect. A relocated add
// (a compaction copy) only points the entry's index at the copy, and does
// nothing if the ledger is unknown: GC deleted it after the compactor read
// the original, and the copy must not bring it back.
//
// Why replaying old journals under these rules is safe: before this
// version, clients sent no key and fences carried none, so no ledger a real
// client wrote had a key, and on a keyless ledger the rules are the ones
// those records were applied under.
func (s *store) apply(recs []*record, results []opResult) error {
	// Phase 1: decide, on copies of the touched ledgers' state.
	type draft struct {
		known  bool // the ledger exists, or a record here creates it
		fenced bool
		lac    int64
		key    []byte
	}
	drafts := make(map[int64]*draft)
	s.mu.Lock()
	for _, r := range recs {
		// A read may find an index entry in this file before phase 3:
		// the file must already count as present (see reader).
		if s.mu.files[r.loc.file] == nil {
			s.mu.files[r.loc.file] = &fileSpace{live: make(map[int64]int64)}
		}
		if r.kind == recProbe || drafts[r.ledgerID] != nil {
			continue
		}
		d := &draft{lac: bkproto.NoEntry}
		if st := s.mu.ledgers[r.ledgerID]; st != nil {
			d.known, d.fenced, d.lac, d.key = true, st.fenced, st.lac, st.masterKey
		}
		drafts[r.ledgerID] = d
	}
	s.mu.Unlock()

	b := s.db.NewBatch()
	defer b.Close()
	indexed := make([]bool, len(recs))
	for i, r := range recs {
		if r.kind == recProbe {
			results[i] = opResult{lac: bkproto.NoEntry}
			continue
		}
		d := drafts[r.ledgerID]
		res := opResult{}
		switch {
		case r.kind == recAdd && r.relocated:
			if d.known {
				if err := b.Set(entryKey(r.ledgerID, r.entryID), encodeLoc(r.loc), nil); err != nil {
					return fmt.Errorf("%w: %w", ErrStorage, err)
				}
				indexed[i] = true
			}
		case !keyMatches(d.key, r.masterKey):
			res.err = keyError(r.ledgerID, r.masterKey)
		case r.kind == recFence:
			d.known, d.fenced = true, true
			d.key = bindKey(d.key, r.masterKey)
		case (r.kind == recAdd && !r.recovery || r.kind == recLAC) && d.fenced:
			res.err = fmt.Errorf("%w: ledger %d is fenced; only recovery may add to it", bkproto.ErrFenced, r.ledgerID)
		default:
			d.known = true
			d.key = bindKey(d.key, r.masterKey)
			d.lac = max(d.lac, r.lac)
			if r.kind == recAdd {
				if err := b.Set(entryKey(r.ledgerID, r.entryID), encodeLoc(r.loc), nil); err != nil {
					return fmt.Errorf("%w: %w", ErrStorage, err)
				}
				indexed[i] = true
			}
		}
		res.lac = d.lac
		results[i] = res
	}
	for id, d := range drafts {
		if !d.known {
			continue
		}
		if err := b.Set(ledgerKey(id), encodeLedgerMeta(d.fenced, d.lac, d.key), nil); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	// Phase 2: to pebble (memtable only; the journal already made it
	// durable).
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("%w: apply: %w", ErrStorage, err)
	}
	// Phase 3: publish, after the index is readable, account for the
	// records' bytes, and wake long-polls.
	var fire []*lacWaiter
	var lacs []int64
	s.mu.Lock()
	for i, r := range recs {
		f := s.mu.files[r.loc.file]
		if f == nil {
			continue // deleted meanwhile: only an empty file can be
		}
		f.size = max(f.size, r.loc.off+int64(r.loc.size))
		if indexed[i] {
			f.live[r.ledgerID] += int64(r.loc.size)
		}
	}
	for id, d := range drafts {
		if !d.known {
			continue
		}
		st := s.mu.ledgers[id]
		if st == nil {
			st = &ledgerState{waiters: s.mu.unknownWaiters[id]}
			delete(s.mu.unknownWaiters, id)
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
	s.m.setLedgers(n)
	for i, w := range fire {
		if w.claim() {
			w.answer(lacs[i], nil)
		}
	}
	return nil
}

// keyMatches reports whether a request carrying key may change a ledger
// whose bound key is ledgerKey: always when the ledger has none yet.
func keyMatches(ledgerKey, key []byte) bool {
	return len(ledgerKey) == 0 || subtle.ConstantTimeCompare(ledgerKey, key) == 1
}

// bindKey is a ledger's key after a record carrying key took effect: the
// first key it is given stays.
func bindKey(ledgerKey, key []byte) []byte {
	if len(ledgerKey) == 0 && len(key) > 0 {
		return bytes.Clone(key)
	}
	return ledgerKey
}

// keyError is the refusal of a request whose key does not match the
// ledger's.
func keyError(ledgerID int64, key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: ledger %d has a master key and the request carries none", bkproto.ErrUnauthorized, ledgerID)
	}
	return fmt.Errorf("%w: master key differs from ledger %d's", bkproto.ErrUnauthorized, ledgerID)
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

// keyAllows reports whether a request carrying key passes the ledger's
// master key check now; the journal's apply stage decides for real.
func (s *store) keyAllows(ledgerID int64, key []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mu.ledgers[ledgerID]
	return st == nil || keyMatches(st.masterKey, key)
}

// errFileGone: the journal file an index entry named has been deleted (the
// compactor moved the entry); look the entry up again.
var errFileGone = errors.New("journal file deleted")

// location looks an entry up in the index.
func (s *store) location(ledgerID, entryID int64) (entryLoc, error) {
	v, closer, err := s.db.Get(entryKey(ledgerID, entryID))
	if errors.Is(err, pebble.ErrNotFound) {
		return entryLoc{}, fmt.Errorf("%w: ledger %d entry %d", bkproto.ErrNoSuchEntry, ledgerID, entryID)
	}
	if err != nil {
		return entryLoc{}, fmt.Errorf("%w: read ledger %d entry %d: %w", bkproto.ErrInternal, ledgerID, entryID, err)
	}
	loc, ok := decodeLoc(v)
	closer.Close()
	if !ok {
		return entryLoc{}, fmt.Errorf("%w: ledger %d entry %d: bad index value", ErrStorage, ledgerID, entryID)
	}
	return loc, nil
}

// read returns an entry's payload, read from its journal record and verified
// against its checksum, and the ledger's LAC.
func (s *store) read(ledgerID, entryID int64) (payload []byte, checksum uint32, lac int64, err error) {
	_, lac, ok := s.ledger(ledgerID)
	if !ok {
		return nil, 0, lac, fmt.Errorf("%w: ledger %d", bkproto.ErrNoSuchLedger, ledgerID)
	}
	var buf []byte
	// The compactor may move the entry and delete its file between the
	// lookup and the pread; it updates the index first, so a second
	// lookup finds the copy. A third miss is not a race any more.
	for attempt := 0; ; attempt++ {
		loc, err := s.location(ledgerID, entryID)
		if errors.Is(err, ErrStorage) {
			s.m.checksumErrors.Inc()
			return nil, 0, lac, fmt.Errorf("%w: %v", bkproto.ErrChecksumMismatch, err)
		}
		if err != nil {
			return nil, 0, lac, err
		}
		buf, err = s.pread(loc)
		if errors.Is(err, errFileGone) && attempt < 2 {
			continue
		}
		if err != nil {
			return nil, 0, lac, fmt.Errorf("%w: ledger %d entry %d: %w", bkproto.ErrInternal, ledgerID, entryID, err)
		}
		break
	}
	damaged := func(why string) error {
		s.m.checksumErrors.Inc()
		s.log.Error("stored entry is damaged", "ledger", ledgerID, "entry", entryID, "why", why)
		return fmt.Errorf("%w: ledger %d entry %d is damaged on this bookie (%s); read another replica",
			bkproto.ErrChecksumMismatch, ledgerID, entryID, why)
	}
	// A short file reads short: pread reports what it got.
	if len(buf) < recordHeaderSize || int(binary.BigEndian.Uint32(buf)) != len(buf)-recordHeaderSize {
		return nil, 0, lac, damaged("record frame does not match the index")
	}
	// The entry checksum below covers ledger, entry and payload, which is
	// all a read returns, so the frame CRC (the whole body again) is left
	// to replay.
	rec, err := decodeRecord(buf[recordHeaderSize:])
	if err != nil || rec.kind != recAdd || rec.ledgerID != ledgerID || rec.entryID != entryID {
		return nil, 0, lac, damaged("record is not this entry")
	}
	checksum, payload = rec.checksum, rec.payload
	if s.fp.corrupts(ledgerID, entryID) && len(payload) > 0 {
		payload[len(payload)/2] ^= 0x40
	}
	if got := bkproto.EntryChecksum(ledgerID, entryID, payload); got != checksum {
		return nil, 0, lac, damaged(fmt.Sprintf("checksum %08x, stored %08x", got, checksum))
	}
	return payload, checksum, lac, nil
}

// pread reads a record. It returns fewer bytes than loc.size only if the
// file is shorter than the index says.
func (s *store) pread(loc entryLoc) ([]byte, error) {
	r, err := s.reader(loc.file)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.f == nil {
		return nil, errFileGone
	}
	buf := make([]byte, loc.size)
	n, err := r.f.ReadAt(buf, loc.off)
	if n == len(buf) || errors.Is(err, io.EOF) {
		return buf[:n], nil
	}
	return nil, err
}

// reader returns journal file n's read handle, opening it on first use. A
// file no longer accounted for is being deleted: errFileGone, and no handle
// is cached that would keep its space after the unlink.
func (s *store) reader(n uint64) (*logReader, error) {
	s.mu.Lock()
	r := s.mu.readers[n]
	s.mu.Unlock()
	if r != nil {
		return r, nil
	}
	f, err := s.fs.OpenFile(filepath.Join(s.dir, journalFileName(n)), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errFileGone
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mu.readers[n]; r != nil {
		f.Close()
		return r, nil
	}
	if s.mu.files[n] == nil {
		f.Close()
		return nil, errFileGone
	}
	r = &logReader{f: f}
	s.mu.readers[n] = r
	return r, nil
}

// waitLAC registers w, to be answered (by whoever claims it) once the
// ledger's LAC exceeds w.previous; a ledger this bookie holds nothing of
// yet is waited for too, until its first record. It reports false, having
// answered w itself, if there is nothing to wait for: the LAC already
// exceeds it.
func (s *store) waitLAC(w *lacWaiter) bool {
	s.mu.Lock()
	st := s.mu.ledgers[w.ledgerID]
	if st == nil {
		held := s.mu.unknownWaiters[w.ledgerID]
		if held == nil {
			held = make(map[*lacWaiter]struct{})
			s.mu.unknownWaiters[w.ledgerID] = held
		}
		held[w] = struct{}{}
		s.mu.Unlock()
		return true
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
	if held := s.mu.unknownWaiters[w.ledgerID]; held != nil {
		delete(held, w)
		if len(held) == 0 {
			delete(s.mu.unknownWaiters, w.ledgerID)
		}
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

// deleteLedgerInMaint removes a ledger, its index entries and its bytes from
// the journal files' accounting. Like every pebble write it is durable at the
// next flush; a crash before that resurrects the ledger, and the next GC pass
// deletes it again. The caller holds maint, and flushes before it deletes the
// files this emptied: an index entry must never outlive its file.
func (s *store) deleteLedgerInMaint(ledgerID int64) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	st := s.mu.ledgers[ledgerID]
	delete(s.mu.ledgers, ledgerID)
	n := len(s.mu.ledgers)
	for num, f := range s.mu.files {
		if _, ok := f.live[ledgerID]; !ok {
			continue
		}
		delete(f.live, ledgerID)
		if num < s.mu.checkpoint {
			// Persisted accounting changes in the same batch as the
			// index, so that the two stay consistent across a crash.
			b.Set(fileKey(num), encodeFileMeta(f), nil)
		}
	}
	s.mu.Unlock()
	s.m.setLedgers(n)
	if st != nil {
		for w := range st.waiters {
			if w.claim() {
				w.answer(bkproto.NoEntry, fmt.Errorf("%w: ledger %d was deleted", bkproto.ErrNoSuchLedger, ledgerID))
			}
		}
	}
	if err := b.DeleteRange(entryKey(ledgerID, 0), entryKey(ledgerID+1, 0), nil); err != nil {
		return fmt.Errorf("%w: delete ledger %d: %w", ErrStorage, ledgerID, err)
	}
	if err := b.Delete(ledgerKey(ledgerID), nil); err != nil {
		return fmt.Errorf("%w: delete ledger %d: %w", ErrStorage, ledgerID, err)
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("%w: delete ledger %d: %w", ErrStorage, ledgerID, err)
	}
	return nil
}
