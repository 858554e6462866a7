package bookie

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"golang.org/x/sync/semaphore"
)

// op is a record waiting for the journal, with whom to tell once it is
// fsynced and applied, or has failed: a connection's request (conn,
// requestID and answer), whose answers of one group commit leave together
// (see replies), or else done. Whichever it is is called exactly once, by
// the goroutine that answers the op's batch, and must not block.
type op struct {
	rec record

	conn      *serverConn
	requestID uint64
	answer    func(opResult) bkproto.Message

	done func(opResult)

	// Set by enqueue: the queue bytes the op holds until it is answered,
	// and when it was queued.
	held   int64
	queued time.Time
}

// journal is the bookie's write-ahead log, and its group commit.
//
// One goroutine (run) owns the current journal file. It takes whatever is
// queued (at least one op, at most JournalMaxBatchBytes, and it stops
// collecting after JournalMaxWait if ops keep arriving) and writes the batch
// with one write(2). Then the batch is fdatasynced, and only then applied to
// the store and answered: an add is acknowledged only after its record is
// durable, and a read after the acknowledgement finds it. (A batch of
// explicit LACs alone is the one exception: it is not synced on its own; see
// syncDeferred.)
//
// Who syncs a written batch depends on whether anyone waits for the disk:
//   - Nobody queued, and no batch with the syncer: run syncs it itself. A
//     hand-off to another goroutine costs a wake-up, tens of microseconds
//     and hundreds under load, on every add at a modest rate.
//   - Otherwise run passes it to the syncer (syncLoop) and goes back to
//     collecting and writing the next batch while this one syncs, as
//     BookKeeper's journal thread does beside its force-write thread. Under
//     load the write(2), a copy into the page cache that takes as long as a
//     fast fdatasync, is then off the critical path of the sync. The syncer
//     takes one batch at a time, in journal order; syncq holds one more, so
//     at most three batches are written and unsynced at once (unsyncedBatches).
//
// Who applies a synced batch depends on the same: nobody waiting and nothing
// ahead of it in the apply stage, whoever synced it applies and answers it
// at once; otherwise it goes to a third goroutine (applyLoop), so that the
// memtable insert of one batch (hundreds of microseconds for a few MiB of
// small entries) is off the critical path of the next sync.
//
// Either way batches are synced, applied and answered one at a time in
// journal order, which is what decides whether an add raced with a fence:
// run syncs only when the syncer holds nothing (outstanding is 0), anyone
// applies only when applying is 0, and syncq and applyq are FIFO. run never
// waits for more work once the queue is empty, so a lone add costs one sync,
// and under load every batch carries everything that arrived during the one
// before: the batch size adapts to the disk's latency instead of to a timer.
//
// Faults (DESIGN §4): ENOSPC on write truncates the partial batch away, fails
// the batch with ReadOnly and turns the bookie read-only; any other write
// error or any sync error is fatal (ErrJournalSync), because after a failed
// fsync the kernel may have dropped the dirty pages and no later sync can say
// whether earlier acknowledged data is on disk.
//
// Files are named %016x.log by a sequence number and rolled at
// JournalFileSize. They are also the entry log: the index names each entry's
// record, and reads pread it. After a roll, the checkpointer flushes pebble
// and records the first file replay still needs in CHECKPOINT; older files
// stay as long as they hold a live entry (space.go).
type journal struct {
	fs    FS
	dir   string
	log   *slog.Logger
	m     *metrics
	clock clockwork.Clock
	store *store

	maxBatchBytes int
	maxWait       time.Duration
	fileSize      int64

	queue chan *op
	// queueBytes holds the record bytes of the ops between enqueue and
	// done; enqueue waits for room.
	queueBytes *semaphore.Weighted
	maxQueued  int64
	// syncq carries written batches from run to syncLoop, in journal
	// order; it holds one. It is closed by run when it stops.
	syncq chan []*op
	// outstanding counts the batches sent on syncq that syncLoop has not
	// yet applied or handed to applyLoop. While it is above 0, syncLoop
	// alone syncs; at 0, run may (see commit). So the two never sync at
	// once, and the sync state (unsynced, failed's cause) is owned by
	// whichever of them syncs. syncerIdle holds a token once it drops to 0
	// (see drainSyncer).
	outstanding atomic.Int64
	syncerIdle  chan struct{}
	// failed is set after a failed sync: no later sync can say whether
	// earlier acknowledged data is on disk, so every later batch fails.
	failed atomic.Bool
	// applyq carries synced batches from run and syncLoop to applyLoop, in
	// journal order. It is closed by run when it stops.
	applyq chan applyItem
	// applying counts the items sent on applyq that applyLoop has not
	// finished. While it is above 0, applyLoop alone applies and answers;
	// at 0, run or syncLoop may (see syncAndAnswer), never both at once
	// (outstanding). The fields below are owned by whichever applies.
	applying atomic.Int64
	// applyErr is the store failure that ended applying: every batch
	// after it fails with it.
	applyErr error
	recs     []*record
	results  []opResult
	// rolled carries the number of a newly opened file to the
	// checkpointer; it holds at most one pending value (the newest).
	rolled chan uint64

	onFatal    func(error)
	onReadOnly func()
	readOnly   *atomic.Bool

	// Owned by run.
	file    File
	fileNum uint64
	size    int64
	buf     []byte
	// unsynced is the bytes at the end of the file written since its last
	// sync and already answered: batches of explicit LACs alone (see
	// syncDeferred). Owned by whichever syncs (outstanding).
	unsynced int64
}

// unsyncedBatches is the most batches that may be written and not yet
// synced at once: one syncing, one waiting in syncq, one being written.
const unsyncedBatches = 3

// applyItem is one synced batch for applyLoop, or (ops == nil) the news that
// the journal rolled to file rolledTo, to pass on to the checkpointer once
// everything before it is applied.
type applyItem struct {
	ops      []*op
	rolledTo uint64
}

const checkpointName = "CHECKPOINT"

func journalFileName(n uint64) string { return fmt.Sprintf("%016x.log", n) }

func parseJournalFileName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".log")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil
}

// openJournal replays the journal into the store and opens a fresh file.
// Replay applies every record from the checkpoint on, in order; a damaged
// record at the very end of the last file, within maxTornTail of its end, is
// a write cut by a crash (it was never acknowledged, since acks follow the
// sync) and is truncated away; damage anywhere else is ErrJournalCorrupt. The accounting of the replayed
// files is then counted from the index, pebble is flushed, the checkpoint
// moves past the replayed files, and the checkpointed files that hold no
// live entry are deleted; the others stay, since they hold the entries.
func openJournal(j *journal) error {
	if err := j.fs.MkdirAll(j.dir, 0o755); err != nil {
		return fmt.Errorf("bookie: create journal dir: %w", err)
	}
	cp, err := readCheckpoint(j.fs, j.dir)
	if err != nil {
		return err
	}
	names, err := j.fs.ReadDirNames(j.dir)
	if err != nil {
		return fmt.Errorf("bookie: list journal: %w", err)
	}
	var files []uint64
	for _, name := range names {
		if n, ok := parseJournalFileName(name); ok {
			files = append(files, n)
		}
	}
	unaccounted, err := j.store.loadFiles(cp, files)
	if err != nil {
		return err
	}
	next := cp
	var replayed []uint64
	var adds []record
	count := 0
	for i, n := range files {
		if n < cp {
			continue
		}
		c, err := j.replayFile(n, i == len(files)-1, &adds)
		if err != nil {
			return err
		}
		count += c
		replayed = append(replayed, n)
		next = n + 1
	}
	if count > 0 {
		j.log.Info("journal replayed", "records", count, "files", len(replayed))
	}
	if len(unaccounted) > 0 {
		j.log.Warn("journal files without accounting; counting their live entries", "files", unaccounted)
		more, err := j.unaccountedAdds(unaccounted)
		if err != nil {
			return err
		}
		adds = append(adds, more...)
	}
	if err := j.store.recount(slices.Concat(replayed, unaccounted), adds); err != nil {
		return err
	}
	// The checkpointer is not running yet; maint is for form.
	j.store.maint.Lock()
	defer j.store.maint.Unlock()
	if err := j.store.persistFilesInMaint(0, next); err != nil {
		return err
	}
	if err := j.store.flush(); err != nil {
		return err
	}
	if err := writeCheckpoint(j.fs, j.dir, next); err != nil {
		return err
	}
	j.store.mu.Lock()
	j.store.mu.checkpoint = next
	j.store.mu.Unlock()
	j.store.reclaimInMaint()
	if err := j.openFile(next); err != nil {
		return err
	}
	names, err = j.fs.ReadDirNames(j.dir)
	if err != nil {
		return fmt.Errorf("bookie: list journal: %w", err)
	}
	live := 0
	for _, name := range names {
		if _, ok := parseJournalFileName(name); ok {
			live++
		}
	}
	j.m.logFiles.Set(float64(live))
	return nil
}

func (j *journal) openFile(n uint64) error {
	f, err := j.fs.OpenFile(filepath.Join(j.dir, journalFileName(n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bookie: create journal file: %w", err)
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		f.Close()
		return fmt.Errorf("%w: sync journal dir: %w", ErrJournalSync, err)
	}
	if j.file != nil {
		j.file.Close()
	}
	j.file, j.fileNum, j.size = f, n, 0
	return nil
}

// replayFile applies the records of file n and appends its adds (without
// payloads) to adds, for the accounting.
func (j *journal) replayFile(n uint64, last bool, adds *[]record) (int, error) {
	path := filepath.Join(j.dir, journalFileName(n))
	f, err := j.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("bookie: open journal %s: %w", path, err)
	}
	defer f.Close()
	fileSize, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return 0, fmt.Errorf("bookie: size of journal %s: %w", path, err)
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var (
		off     int64
		count   int
		batch   []*record
		pending int
	)
	applyBatch := func() error {
		if len(batch) == 0 {
			return nil
		}
		results := make([]opResult, len(batch))
		if err := j.store.apply(batch, results); err != nil {
			return err
		}
		batch, pending = batch[:0], 0
		return nil
	}
	var hdr [recordHeaderSize]byte
	for {
		torn := ""
		if _, err := io.ReadFull(br, hdr[:]); err == io.EOF {
			break
		} else if err != nil {
			torn = "cut in a record header"
		}
		var body []byte
		if torn == "" {
			size := binary.BigEndian.Uint32(hdr[:])
			if size > maxRecordBody {
				torn = fmt.Sprintf("record length %d is impossible", size)
			} else {
				body = make([]byte, size)
				if _, err := io.ReadFull(br, body); err != nil {
					torn = "cut in a record body"
				} else if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:]) {
					torn = "record fails its checksum"
				}
			}
		}
		if torn != "" {
			if !last {
				return 0, fmt.Errorf("%w: %s at offset %d of %s, which is not the last file", ErrJournalCorrupt, torn, off, path)
			}
			// A crash can cut only what was written and not yet synced:
			// at most maxTornTail. More after the damage means synced,
			// acknowledged records follow it: that is corruption, not a
			// torn tail, and truncating would drop acknowledged entries.
			if after := fileSize - off; after > j.maxTornTail() {
				return 0, fmt.Errorf("%w: %s at offset %d of %s with %d bytes after it, more than one write can leave unsynced",
					ErrJournalCorrupt, torn, off, path, after)
			}
			if err := applyBatch(); err != nil {
				return 0, err
			}
			j.log.Warn("truncating torn journal tail", "file", path, "offset", off, "why", torn)
			if err := truncateFile(j.fs, path, off); err != nil {
				return 0, err
			}
			return count, nil
		}
		rec, err := decodeRecord(body)
		if err != nil {
			return 0, fmt.Errorf("%w: %s at offset %d: %w", ErrJournalCorrupt, path, off, err)
		}
		rec.loc = entryLoc{file: n, off: off, size: recordHeaderSize + uint32(len(body))}
		if rec.kind == recAdd {
			*adds = append(*adds, record{kind: recAdd, ledgerID: rec.ledgerID, entryID: rec.entryID, loc: rec.loc})
		}
		batch = append(batch, &rec)
		pending += len(body)
		count++
		off += recordHeaderSize + int64(len(body))
		if len(batch) >= 4096 || pending >= 32<<20 {
			if err := applyBatch(); err != nil {
				return 0, err
			}
		}
	}
	return count, applyBatch()
}

// maxTornTail is the most a crash can leave unsynced at the end of the last
// journal file: the explicit LACs whose sync was deferred (at most
// maxBatchBytes, see syncDeferred), then unsyncedBatches batches, each of
// which holds at most maxBatchBytes or a single record larger than that.
func (j *journal) maxTornTail() int64 { return maxTornTail(j.maxBatchBytes) }

func maxTornTail(maxBatchBytes int) int64 {
	return int64(maxBatchBytes + unsyncedBatches*max(maxBatchBytes, recordHeaderSize+maxRecordBody))
}

func truncateFile(fs FS, path string, size int64) error {
	f, err := fs.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("bookie: truncate %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("bookie: truncate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrJournalSync, path, err)
	}
	return nil
}

func readCheckpoint(fs FS, dir string) (uint64, error) {
	f, err := fs.OpenFile(filepath.Join(dir, checkpointName), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bookie: read checkpoint: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("bookie: read checkpoint: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: checkpoint %q: %w", ErrJournalCorrupt, b, err)
	}
	return n, nil
}

// writeCheckpoint durably records that journal files before n are no longer
// needed: write a temporary file, sync it, rename it over the old one, sync
// the directory.
func writeCheckpoint(fs FS, dir string, n uint64) error {
	tmp := filepath.Join(dir, checkpointName+".tmp")
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("bookie: write checkpoint: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%016x\n", n)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("bookie: write checkpoint: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("%w: checkpoint: %w", ErrJournalSync, serr)
	}
	if err := fs.Rename(tmp, filepath.Join(dir, checkpointName)); err != nil {
		return fmt.Errorf("bookie: write checkpoint: %w", err)
	}
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: checkpoint dir: %w", ErrJournalSync, err)
	}
	return nil
}

// enqueue hands an op to the journal, waiting while the queue is full by
// count or by bytes (that wait is the backpressure a writer feels). It fails
// with ErrClosed when the bookie stops first; the op is then not answered.
// The op's bytes are released when it is answered.
func (j *journal) enqueue(ctx context.Context, o *op) error {
	// A record larger than the whole budget takes all of it, rather than
	// waiting forever.
	n := min(int64(o.rec.size()), j.maxQueued)
	if err := j.queueBytes.Acquire(ctx, n); err != nil {
		return ErrClosed
	}
	o.held, o.queued = n, j.clock.Now()
	select {
	case j.queue <- o:
		return nil
	case <-ctx.Done():
		j.queueBytes.Release(n)
		return ErrClosed
	}
}

// finish answers one op with res: a connection's answer joins out, the
// other kinds are told at once.
func (j *journal) finish(o *op, res opResult, out *replies) {
	j.queueBytes.Release(o.held)
	if o.rec.kind == recAdd {
		j.m.bk.journalAdd.observe(j.clock.Since(o.queued), res.err == nil)
	}
	if o.conn != nil {
		out.add(o.conn, o.requestID, o.answer(res))
		return
	}
	o.done(res)
}

// failAll answers every op of a batch with err.
func (j *journal) failAll(batch []*op, err error) {
	var out replies
	for _, o := range batch {
		j.finish(o, opResult{err: err, lac: bkproto.NoEntry}, &out)
	}
	out.send()
}

// run is the journal goroutine. It returns when ctx is done or after a fatal
// error, failing whatever is still queued.
func (j *journal) run(ctx context.Context) {
	defer func() {
		j.drain(fmt.Errorf("%w: the bookie is stopping", bkproto.ErrInternal))
		// What is written is synced and answered (durable, so acking it is
		// right even when the bookie is stopping), and then nothing more
		// reaches syncLoop or applyq.
		j.drainSyncer()
		close(j.syncq)
		if j.file != nil {
			j.file.Close()
		}
		close(j.applyq)
	}()
	for {
		var first *op
		select {
		case first = <-j.queue:
		case <-ctx.Done():
			return
		}
		// A fresh slice per batch: applyLoop still holds the previous one.
		batch := make([]*op, 1, 64)
		batch[0] = first
		bytes := first.rec.size()
		start := j.clock.Now()
	collect:
		for bytes < j.maxBatchBytes {
			select {
			case o := <-j.queue:
				batch = append(batch, o)
				bytes += o.rec.size()
				// The cap, checked every few records: a queue that never
				// drains must not postpone the sync forever.
				if len(batch)%64 == 0 && j.clock.Now().Sub(start) >= j.maxWait {
					break collect
				}
			default:
				break collect // queue drained: commit now
			}
		}
		if !j.commit(batch) {
			return
		}
	}
}

func (j *journal) drain(err error) {
	for {
		select {
		case o := <-j.queue:
			j.failAll([]*op{o}, err)
		default:
			return
		}
	}
}

// commit writes one batch, then syncs it itself or passes it to syncLoop
// (see journal). It returns false after a fatal error.
func (j *journal) commit(batch []*op) bool {
	if j.failed.Load() {
		j.failAll(batch, errAfterFailedSync)
		return false
	}
	j.buf = j.buf[:0]
	for _, o := range batch {
		start := len(j.buf)
		j.buf = appendRecord(j.buf, &o.rec)
		o.rec.loc = entryLoc{file: j.fileNum, off: j.size + int64(start), size: uint32(len(j.buf) - start)}
	}
	start := j.clock.Now()
	if _, err := j.file.Write(j.buf); err != nil {
		// The batches written before it are answered first, in order.
		j.drainSyncer()
		if errors.Is(err, syscall.ENOSPC) {
			return j.diskFull(batch, err)
		}
		j.m.bk.journalSync.observe(j.clock.Since(start), false)
		return j.fatal(batch, fmt.Errorf("%w: write: %w", ErrJournalSync, err))
	}
	j.size += int64(len(j.buf))
	if cap(j.buf) > 2*j.maxBatchBytes {
		j.buf = nil // do not pin one oversized batch's buffer
	}
	if j.outstanding.Load() == 0 && len(j.queue) == 0 {
		if !j.syncAndAnswer(batch) {
			return false
		}
	} else {
		j.outstanding.Add(1)
		j.syncq <- batch
	}
	if j.size >= j.fileSize {
		return j.roll()
	}
	return true
}

// syncLoop syncs and answers the batches run passes it, one at a time, in
// journal order (see journal). It ends when run closes syncq.
func (j *journal) syncLoop() {
	for batch := range j.syncq {
		j.syncAndAnswer(batch)
		if j.outstanding.Add(-1) == 0 {
			select {
			case j.syncerIdle <- struct{}{}:
			default: // a token is there already
			}
		}
	}
}

// drainSyncer waits until syncLoop has answered or handed on every batch
// run passed it. Only run calls it, so no batch is passed meanwhile; a
// token left from an earlier idle moment only costs one more look.
func (j *journal) drainSyncer() {
	for j.outstanding.Load() > 0 {
		<-j.syncerIdle
	}
}

// syncAndAnswer makes one written batch durable, then applies and answers
// it at once when nothing waits, or hands it to applyLoop. It returns false
// after a failed sync, which is fatal, and fails every batch after one: a
// batch written behind a failed sync is never acknowledged, even if its own
// sync would succeed.
func (j *journal) syncAndAnswer(batch []*op) bool {
	if j.failed.Load() {
		j.failAll(batch, errAfterFailedSync)
		return false
	}
	bytes := int64(0)
	for _, o := range batch {
		bytes += int64(o.rec.loc.size)
	}
	start := j.clock.Now()
	deferSync := j.syncDeferred(batch, bytes)
	if !deferSync {
		j.m.bk.forceWriteQueue.Store(int64(len(batch)))
		err := j.file.Sync()
		j.m.bk.forceWriteQueue.Store(0)
		if err != nil {
			j.m.bk.journalSync.observe(j.clock.Since(start), false)
			return j.fatal(batch, fmt.Errorf("%w: %w", ErrJournalSync, err))
		}
		j.unsynced = 0
		j.m.journalSync.Observe(j.clock.Now().Sub(start).Seconds())
		j.m.bk.journalSync.observe(j.clock.Since(start), true)
	} else {
		j.unsynced += bytes
	}
	j.m.journalBatch.Observe(float64(len(batch)))
	if len(j.queue) == 0 && len(j.syncq) == 0 && j.applying.Load() == 0 {
		// Nobody waits for the disk, and every earlier batch is applied.
		j.applyAndAnswer(batch)
	} else {
		j.m.bk.callbackQueue.Add(int64(len(batch)))
		j.handOff(applyItem{ops: batch})
	}
	return true
}

// syncDeferred reports whether batch, written as bytes, may be answered
// without an fdatasync: when it holds explicit LACs alone, and the bytes
// left unsynced stay within one batch's worth.
//
// An explicit LAC is a hint for tailing readers, not data: a writer sends
// only a LAC it has confirmed, so the entries up to it are already durable
// on an ack quorum. Lost in a crash, the bookie's LAC is merely lower after
// the restart, which makes a reader wait for the next LAC and a recovery
// read forward from an earlier entry; neither loses or invents an entry.
// Its order against fences is the journal's, as before: it is applied,
// refused or not, in turn. Without this, each explicit LAC cost a sync of
// its own, a third of a bookie's syncs at 20,000 msg/s in 1 ms batches and
// half at a lower rate, and the adds that arrived meanwhile waited for it.
//
// The next synced batch makes the deferred bytes durable with it, and a roll
// syncs them first (see roll): replay takes damage at the end of the last
// file as a torn write only within maxTornTail of its end, and anywhere
// else as corruption.
func (j *journal) syncDeferred(batch []*op, bytes int64) bool {
	for _, o := range batch {
		if o.rec.kind != recLAC {
			return false
		}
	}
	return j.unsynced+bytes <= int64(j.maxBatchBytes)
}

// handOff passes an item to applyLoop. applyq is small: a store that cannot
// keep up slows the journal, and through its queue the writers.
func (j *journal) handOff(item applyItem) {
	j.applying.Add(1)
	j.applyq <- item
}

// applyLoop is the apply stage for the batches run and syncLoop hand off
// (see journal). It stops when run closes applyq, after answering every
// batch that was synced:
// those are durable, so acking them is right even when the bookie is
// stopping.
func (j *journal) applyLoop() {
	for item := range j.applyq {
		if item.ops == nil {
			if j.applyErr == nil {
				select {
				case <-j.rolled: // replace an older pending request
				default:
				}
				j.rolled <- item.rolledTo
			}
		} else {
			j.m.bk.callbackQueue.Add(-int64(len(item.ops)))
			j.applyAndAnswer(item.ops)
		}
		j.applying.Add(-1)
	}
}

// applyAndAnswer applies one synced batch to the store and answers its ops,
// each connection's answers in one write. After a store failure it fails
// this batch and every later one.
func (j *journal) applyAndAnswer(batch []*op) {
	if j.applyErr != nil {
		j.failAll(batch, j.applyErr)
		return
	}
	recs := j.recs[:0]
	for _, o := range batch {
		recs = append(recs, &o.rec)
	}
	if cap(j.results) < len(recs) {
		j.results = make([]opResult, len(recs))
	}
	results := j.results[:len(recs)]
	defer func() {
		clear(recs) // drop the records (and their payloads) until the next batch
		j.recs = recs[:0]
	}()
	if err := j.store.apply(recs, results); err != nil {
		j.applyErr = fmt.Errorf("%w: %v", bkproto.ErrInternal, err)
		j.failAll(batch, j.applyErr)
		j.onFatal(err)
		return
	}
	var out replies
	for i, o := range batch {
		j.finish(o, results[i], &out)
	}
	out.send()
}

// diskFull handles ENOSPC: the partial write is cut off (and that made
// durable, so that replay never meets a torn record followed by good ones),
// the batch is refused, and the bookie turns read-only.
func (j *journal) diskFull(batch []*op, werr error) bool {
	if err := j.file.Truncate(j.size); err != nil {
		return j.fatal(batch, fmt.Errorf("%w: truncate after %w: %w", ErrJournalSync, werr, err))
	}
	if err := j.file.Sync(); err != nil {
		return j.fatal(batch, fmt.Errorf("%w: sync after truncate: %w", ErrJournalSync, err))
	}
	j.unsynced = 0
	if !j.readOnly.Load() {
		j.log.Error("journal disk is full; the bookie is now read-only until a probe write succeeds", "err", werr)
		j.onReadOnly()
	}
	j.failAll(batch, fmt.Errorf("%w: journal disk full", bkproto.ErrReadOnly))
	return true
}

// fatal fails batch and stops the bookie; every later batch fails too.
func (j *journal) fatal(batch []*op, err error) bool {
	j.failed.Store(true)
	j.failAll(batch, fmt.Errorf("%w: %v", bkproto.ErrInternal, err))
	j.onFatal(err)
	return false
}

// errAfterFailedSync fails what reaches the journal after a fatal error.
var errAfterFailedSync = fmt.Errorf("%w: %w: an earlier write or sync failed", bkproto.ErrInternal, ErrJournalSync)

// roll starts a new journal file and asks the checkpointer to retire the
// old ones. ENOSPC keeps the current file and turns the bookie read-only.
func (j *journal) roll() bool {
	// The old file is synced and answered before it is left.
	j.drainSyncer()
	if j.failed.Load() {
		return false
	}
	if j.unsynced > 0 {
		// Only the last file may end in a torn write.
		if err := j.file.Sync(); err != nil {
			return j.fatal(nil, fmt.Errorf("%w: %w", ErrJournalSync, err))
		}
		j.unsynced = 0
	}
	next := j.fileNum + 1
	if err := j.openFile(next); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			if !j.readOnly.Load() {
				j.log.Error("no space for a new journal file; the bookie is now read-only", "err", err)
				j.onReadOnly()
			}
			return true
		}
		j.onFatal(err)
		return false
	}
	j.m.logFiles.Inc()
	// The checkpointer may retire the old files only once everything in
	// them is applied: the marker travels behind the batches (and counts
	// in applying, so that no later batch is applied before it).
	j.handOff(applyItem{rolledTo: next})
	return true
}

// checkpointLoop takes a checkpoint after each roll (see checkpoint).
func (j *journal) checkpointLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-j.rolled:
			if err := j.checkpoint(n); err != nil {
				j.onFatal(err)
				return
			}
		}
	}
}
