package bookie

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// This file is the life cycle of journal files, which are also the entry
// log: the checkpoint, the accounting of live bytes per file and ledger, the
// deletion of files nothing points into any more, and compaction.
//
// The invariant everything here keeps: an index entry never names a deleted
// file, across crashes included. It holds because
//   - a file is deleted only when it is before the checkpoint (so replay
//     will never need it) and its accounting says no indexed entry is in
//     it, and that accounting is durable together with the index (same
//     pebble batches, durable as a prefix);
//   - GC flushes its index deletions before it deletes the files they
//     emptied;
//   - the compactor deletes a file only after every live entry in it has a
//     durable copy in a later journal file, whose replay points the index
//     at the copy if the crash comes before pebble flushed it.

// loadFiles reads the persisted accounting of the files before the
// checkpoint cp that exist on disk, drops stale accounting (files already
// deleted, or at or after cp, which replay rebuilds), and returns the
// checkpointed files on disk that have none (a crash between an unlink and
// the flush of its key cannot cause that, but a lost key must not keep a
// file forever).
func (s *store) loadFiles(cp uint64, onDisk []uint64) (unaccounted []uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'f'}, UpperBound: []byte{'g'}})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	present := make(map[uint64]bool, len(onDisk))
	for _, n := range onDisk {
		present[n] = true
	}
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.checkpoint = cp
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		n := binary.BigEndian.Uint64(k[1:])
		if n >= cp || !present[n] {
			b.Delete(k, nil)
			continue
		}
		f, err := decodeFileMeta(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		s.mu.files[n] = f
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	for _, n := range onDisk {
		if n < cp && s.mu.files[n] == nil {
			unaccounted = append(unaccounted, n)
		}
	}
	return unaccounted, nil
}

// recount sets the live bytes of files from the index: a record counts if
// its entry's index names it. It is how replayed files (whose apply-time
// counts may disagree with an index that pebble flushed ahead of the
// checkpoint) and unaccounted files get their accounting at start.
func (s *store) recount(files []uint64, adds []record) error {
	s.mu.Lock()
	for _, n := range files {
		if f := s.mu.files[n]; f != nil {
			f.live = make(map[int64]int64)
		} else {
			s.mu.files[n] = &fileSpace{live: make(map[int64]int64)}
		}
	}
	s.mu.Unlock()
	for i := range adds {
		r := &adds[i]
		loc, err := s.location(r.ledgerID, r.entryID)
		if errors.Is(err, bkproto.ErrNoSuchEntry) || err == nil && loc != r.loc {
			continue
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		f := s.mu.files[loc.file]
		f.live[r.ledgerID] += int64(loc.size)
		f.size = max(f.size, loc.off+int64(loc.size))
		s.mu.Unlock()
	}
	return nil
}

// persistFilesInMaint writes the accounting of the files in [from, to) to
// pebble, to be flushed by the caller's checkpoint. The caller holds maint.
func (s *store) persistFilesInMaint(from, to uint64) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	for n, f := range s.mu.files {
		if n >= from && n < to {
			b.Set(fileKey(n), encodeFileMeta(f), nil)
		}
	}
	s.mu.Unlock()
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

func (s *store) checkpointed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.checkpoint
}

// emptyFilesInMaint lists the checkpointed files that hold no indexed entry.
// The caller holds maint.
func (s *store) emptyFilesInMaint() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var empty []uint64
	for n, f := range s.mu.files {
		if n < s.mu.checkpoint && len(f.live) == 0 {
			empty = append(empty, n)
		}
	}
	slices.Sort(empty)
	return empty
}

// retireInMaint deletes journal file n, which must be checkpointed and hold
// no entry the durable index names. The caller holds maint. A failed unlink
// only leaves a file that the next start finds unaccounted, recounts as
// empty and deletes.
func (s *store) retireInMaint(n uint64) {
	s.mu.Lock()
	delete(s.mu.files, n)
	r := s.mu.readers[n]
	delete(s.mu.readers, n)
	s.mu.Unlock()
	if r != nil {
		r.close() // waits for the reads in progress
	}
	if err := s.db.Delete(fileKey(n), pebble.NoSync); err != nil {
		s.log.Warn("cannot drop a deleted journal file's accounting", "file", n, "err", err)
	}
	if err := s.fs.Remove(filepath.Join(s.dir, journalFileName(n))); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot delete journal file", "file", n, "err", err)
		return
	}
	s.m.logFiles.Dec()
	s.m.logFilesDeleted.Inc()
	s.log.Debug("deleted journal file", "file", n)
}

// reclaimInMaint deletes the checkpointed files that hold no indexed entry.
// The caller holds maint and has flushed since the index stopped naming
// them.
func (s *store) reclaimInMaint() {
	for _, n := range s.emptyFilesInMaint() {
		s.retireInMaint(n)
	}
}

// checkpoint retires the journal before file n: once every record before it
// is in pebble's sstables (Flush), with the accounting of the files it
// covers, CHECKPOINT says so; then the files that hold no live entry go.
func (j *journal) checkpoint(n uint64) error {
	s := j.store
	s.maint.Lock()
	defer s.maint.Unlock()
	if err := s.persistFilesInMaint(s.checkpointed(), n); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	if err := writeCheckpoint(j.fs, j.dir, n); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			j.log.Warn("no space to write the journal checkpoint; a restart will replay more", "err", err)
			return nil
		}
		return err
	}
	s.mu.Lock()
	s.mu.checkpoint = n
	s.mu.Unlock()
	s.reclaimInMaint()
	return nil
}

// forEachRecord reads journal file n from the start and calls fn with each
// record, its loc set; slices in it are fresh for each record. Damage is
// ErrJournalCorrupt: it is for checkpointed files, whose torn tail, if they
// had one, was truncated by replay.
func (j *journal) forEachRecord(n uint64, fn func(r record) error) error {
	path := filepath.Join(j.dir, journalFileName(n))
	f, err := j.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("bookie: open journal %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [recordHeaderSize]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%w: %s: cut in a record header at offset %d", ErrJournalCorrupt, path, off)
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > maxRecordBody {
			return fmt.Errorf("%w: %s: record length %d at offset %d", ErrJournalCorrupt, path, size, off)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("%w: %s: cut in a record body at offset %d", ErrJournalCorrupt, path, off)
		}
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
			return fmt.Errorf("%w: %s: record at offset %d fails its checksum", ErrJournalCorrupt, path, off)
		}
		r, err := decodeRecord(body)
		if err != nil {
			return fmt.Errorf("%w: %s at offset %d: %w", ErrJournalCorrupt, path, off, err)
		}
		r.loc = entryLoc{file: n, off: off, size: recordHeaderSize + size}
		if err := fn(r); err != nil {
			return err
		}
		off += int64(r.loc.size)
	}
}

// unaccountedAdds lists the add records of files (for recount).
func (j *journal) unaccountedAdds(files []uint64) ([]record, error) {
	var adds []record
	for _, n := range files {
		err := j.forEachRecord(n, func(r record) error {
			if r.kind == recAdd {
				adds = append(adds, record{kind: recAdd, ledgerID: r.ledgerID, entryID: r.entryID, loc: r.loc})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return adds, nil
}

// compactionCandidates are the checkpointed files whose live fraction is
// below threshold but above zero (empty files are GC's and the
// checkpointer's), emptiest first.
func (s *store) compactionCandidates(threshold float64) []uint64 {
	type cand struct {
		n    uint64
		frac float64
	}
	var cands []cand
	s.mu.Lock()
	for n, f := range s.mu.files {
		if n >= s.mu.checkpoint || f.size == 0 || len(f.live) == 0 {
			continue
		}
		if frac := float64(f.liveBytes()) / float64(f.size); frac < threshold {
			cands = append(cands, cand{n, frac})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(a.frac, b.frac), cmp.Compare(a.n, b.n)) })
	out := make([]uint64, len(cands))
	for i, c := range cands {
		out[i] = c.n
	}
	return out
}

// compact rewrites the checkpointed files whose live fraction is below
// threshold: their live entries are appended again through the journal
// (relocated records), and the files are deleted once the copies are
// durable and indexed. It returns how many files it deleted. A copy that
// fails (a full disk) stops the pass and keeps the file.
//
// The copies compete with adds for the journal, as any writer would: a
// pass moves at most threshold × JournalFileSize bytes per file.
func (j *journal) compact(ctx context.Context, threshold float64) (int, error) {
	s := j.store
	s.maint.Lock()
	defer s.maint.Unlock()
	done := 0
	for _, n := range s.compactionCandidates(threshold) {
		if j.readOnly.Load() {
			return done, nil // copies would be refused; GC may make room
		}
		moved, err := j.relocateInMaint(ctx, n)
		if errors.Is(err, ErrJournalCorrupt) {
			j.log.Error("cannot compact a damaged journal file; keeping it", "file", n, "err", err)
			continue
		}
		if err != nil {
			return done, err
		}
		s.retireInMaint(n)
		s.m.compactedFiles.Inc()
		s.m.compactedBytes.Add(float64(moved))
		j.log.Info("compacted journal file", "file", n, "moved_bytes", moved)
		done++
	}
	return done, nil
}

// relocateInMaint copies the live entries of file n to the journal's current
// file and waits until every copy is durable and indexed. An entry is live
// if the index names its record here. The caller holds maint.
func (j *journal) relocateInMaint(ctx context.Context, n uint64) (int64, error) {
	var (
		pending  atomic.Int64
		failed   atomic.Pointer[error]
		allDone  = make(chan struct{})
		moved    int64
		enqueued error
	)
	finish := func() {
		if pending.Add(-1) == 0 {
			close(allDone)
		}
	}
	pending.Store(1) // the scan's own, released after it
	err := j.forEachRecord(n, func(r record) error {
		if r.kind != recAdd {
			return nil
		}
		loc, err := j.store.location(r.ledgerID, r.entryID)
		if errors.Is(err, bkproto.ErrNoSuchEntry) || err == nil && loc != r.loc {
			return nil // deleted, or its index names another copy
		}
		if err != nil {
			return err
		}
		r.relocated, r.loc = true, entryLoc{}
		moved += int64(loc.size)
		pending.Add(1)
		o := &op{rec: r, done: func(res opResult) {
			if res.err != nil {
				failed.CompareAndSwap(nil, &res.err)
			}
			finish()
		}}
		if err := j.enqueue(ctx, o); err != nil {
			finish()
			enqueued = err
			return err
		}
		return nil
	})
	finish()
	if enqueued != nil {
		return 0, enqueued
	}
	if err != nil {
		return 0, err
	}
	select {
	case <-allDone:
	case <-ctx.Done():
		return 0, ErrClosed
	}
	if e := failed.Load(); e != nil {
		return 0, fmt.Errorf("bookie: compaction copy of journal file %d: %w", n, *e)
	}
	return moved, nil
}

// compactLoop runs compaction every CompactionInterval.
func (b *Bookie) compactLoop() {
	t := b.clock.NewTicker(b.cfg.CompactionInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.Chan():
			if _, err := b.journal.compact(b.ctx, b.cfg.CompactionThreshold); err != nil && b.ctx.Err() == nil {
				b.log.Warn("journal compaction failed", "err", err)
			}
		}
	}
}
