package bookie

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
)

// journalLedgers maps each journal file on disk to the ledgers that have an
// add record in it, read from the files themselves.
func journalLedgers(t *testing.T, b *testBookie) map[uint64]map[int64]bool {
	t.Helper()
	names, err := os.ReadDir(b.journal.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[uint64]map[int64]bool)
	for _, e := range names {
		n, ok := parseJournalFileName(e.Name())
		if !ok {
			continue
		}
		ledgers := make(map[int64]bool)
		if err := b.journal.forEachRecord(n, func(r record) error {
			if r.kind == recAdd {
				ledgers[r.ledgerID] = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out[n] = ledgers
	}
	return out
}

func createLedgerMeta(t *testing.T, ctx context.Context, store meta.Store, region string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if _, err := store.Create(ctx, bkproto.LedgerKey(region, id), []byte(`{"v":1}`), meta.NoLease); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteLedgerMeta(t *testing.T, ctx context.Context, store meta.Store, region string, id int64) {
	t.Helper()
	kv, err := store.Get(ctx, bkproto.LedgerKey(region, id))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, kv.Key, kv.ModRevision); err != nil {
		t.Fatal(err)
	}
}

// TestGCDeletesEmptiedJournalFiles: once GC has deleted every ledger with an
// entry in a checkpointed journal file, the file goes; files that still hold
// a live ledger's entries stay, and the deletion holds across a restart.
func TestGCDeletesEmptiedJournalFiles(t *testing.T) {
	ctx := testCtx(t)
	store := metatest.Memory(t)
	cfg := testConfig(t, t.TempDir(), store)
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	createLedgerMeta(t, ctx, store, cfg.Region, 1, 2)
	// Ledger 2 alone for about two files, then both ledgers interleaved.
	for e := range int64(50) {
		mustAdd(t, ctx, c, 2, e, 40<<10)
	}
	for e := range int64(30) {
		mustAdd(t, ctx, c, 1, e, 40<<10)
		mustAdd(t, ctx, c, 2, 50+e, 1<<10)
	}
	c.Close()
	b.Close()
	// The restart checkpoints every file written so far.
	b = startBookie(t, cfg)
	c = dial(t, b.Addr())
	before := journalLedgers(t, b)
	var only2, both []uint64
	for n, ls := range before {
		switch {
		case ls[2] && !ls[1]:
			only2 = append(only2, n)
		case ls[1] && ls[2]:
			both = append(both, n)
		}
	}
	if len(only2) == 0 || len(both) == 0 {
		t.Fatalf("layout does not exercise GC: files %v", before)
	}

	deleteLedgerMeta(t, ctx, store, cfg.Region, 2)
	if n, err := b.CollectGarbage(ctx); err != nil || n != 1 {
		t.Fatalf("GC deleted %d ledgers (%v), want 1", n, err)
	}
	after := journalLedgers(t, b)
	for _, n := range only2 {
		if _, ok := after[n]; ok {
			t.Errorf("file %d held only ledger 2's entries and survived its GC", n)
		}
	}
	for _, n := range both {
		if _, ok := after[n]; !ok {
			t.Errorf("file %d holds ledger 1's entries and was deleted", n)
		}
	}
	if got := metricValue(b.m.logFilesDeleted); got != float64(len(only2)) {
		t.Errorf("journal_files_deleted_total = %v, want %d", got, len(only2))
	}
	for e := range int64(30) {
		mustRead(t, ctx, c, 1, e, 40<<10)
	}

	// Durable: after a restart ledger 2 stays gone and ledger 1 is whole.
	c.Close()
	b.Close()
	b = startBookie(t, cfg)
	c = dial(t, b.Addr())
	_, err := c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 2, EntryID: 60})
	wantErr(t, "collected ledger after restart", err, bkproto.ErrNoSuchLedger)
	for e := range int64(30) {
		mustRead(t, ctx, c, 1, e, 40<<10)
	}

	// Ledger 1 goes too: every file that held entries goes with it.
	deleteLedgerMeta(t, ctx, store, cfg.Region, 1)
	if n, err := b.CollectGarbage(ctx); err != nil || n != 1 {
		t.Fatalf("GC deleted %d ledgers (%v), want 1", n, err)
	}
	for n, ls := range journalLedgers(t, b) {
		if len(ls) > 0 {
			t.Errorf("file %d still holds entries of %v after both ledgers were collected", n, ls)
		}
	}
}

// compactionLayout writes ledgers 1 (small entries, to keep) and 2 (large,
// to delete) interleaved, so that every file is mostly ledger 2's, restarts
// to checkpoint them and collects ledger 2: every file stays, mostly dead.
func compactionLayout(t *testing.T) (Config, meta.Store, *testBookie) {
	t.Helper()
	ctx := testCtx(t)
	store := metatest.Memory(t)
	cfg := testConfig(t, t.TempDir(), store)
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	createLedgerMeta(t, ctx, store, cfg.Region, 1, 2)
	for e := range int64(70) {
		mustAdd(t, ctx, c, 1, e, 8<<10+int(e))
		mustAdd(t, ctx, c, 2, e, 32<<10)
	}
	c.Close()
	b.Close()
	b = startBookie(t, cfg)
	files := len(journalFiles(t, cfg.DataDir))
	deleteLedgerMeta(t, ctx, store, cfg.Region, 2)
	if n, err := b.CollectGarbage(ctx); err != nil || n != 1 {
		t.Fatalf("GC deleted %d ledgers (%v), want 1", n, err)
	}
	if got := len(journalFiles(t, cfg.DataDir)); got != files {
		t.Fatalf("GC deleted journal files that hold ledger 1's entries: %d -> %d", files, got)
	}
	return cfg, store, b
}

func readLedger1(t *testing.T, ctx context.Context, b *testBookie) {
	t.Helper()
	c := dial(t, b.Addr())
	for e := range int64(70) {
		mustRead(t, ctx, c, 1, e, 8<<10+int(e))
	}
	c.Close()
}

// TestCompactionMovesLiveEntries: the compactor copies the live entries of a
// mostly dead file forward and deletes the file; reads return the same bytes
// throughout (also while it runs) and after a restart, where the index
// names the copies only through the journal's replay.
func TestCompactionMovesLiveEntries(t *testing.T) {
	ctx := testCtx(t)
	cfg, _, b := compactionLayout(t)
	cands := b.store.compactionCandidates(0.5)
	if len(cands) < 2 {
		t.Fatalf("compaction candidates %v: want the files of the layout", cands)
	}
	// Readers race with the copies and the deletions.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := bkproto.Dial(ctx, b.Addr(), nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for e := int64(0); ; e = (e + 1) % 70 {
				select {
				case <-stop:
					return
				default:
				}
				got, err := c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: e})
				if err != nil || string(got.Payload) != string(payloadOf(1, e, 8<<10+int(e))) {
					t.Errorf("read 1:%d during compaction: %v", e, err)
					return
				}
			}
		}()
	}
	n, err := b.journal.compact(ctx, 0.5)
	close(stop)
	wg.Wait()
	if err != nil || n != len(cands) {
		t.Fatalf("compacted %d files (%v), want %d", n, err, len(cands))
	}
	for _, f := range cands {
		if _, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(f))); !os.IsNotExist(err) {
			t.Fatalf("compacted file %d still exists: %v", f, err)
		}
	}
	if got := metricValue(b.m.compactedFiles); got != float64(len(cands)) {
		t.Fatalf("compacted_files_total %v, want %d", got, len(cands))
	}
	readLedger1(t, ctx, b)
	// Nothing is left to compact: the copies are all live.
	if again := b.store.compactionCandidates(0.5); len(again) != 0 {
		t.Fatalf("candidates after compaction: %v", again)
	}
	// Crash after the deletion: pebble's memtable (the index naming the
	// copies) is lost, so the index names deleted files until replay.
	b.Close()
	b = startBookie(t, cfg)
	readLedger1(t, ctx, b)
	for _, f := range cands {
		if _, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(f))); !os.IsNotExist(err) {
			t.Fatalf("compacted file %d came back: %v", f, err)
		}
	}
}

// TestCompactionCrashBeforeDelete: a crash after the copies are durable but
// before the file is deleted leaves two copies of each entry; reads are
// unaffected, and the next pass finds nothing live in the old file and
// deletes it without copying anything again.
func TestCompactionCrashBeforeDelete(t *testing.T) {
	ctx := testCtx(t)
	cfg, _, b := compactionLayout(t)
	cands := b.store.compactionCandidates(0.5)
	if len(cands) == 0 {
		t.Fatal("no compaction candidate")
	}
	victim := cands[0]
	b.store.maint.Lock()
	moved, err := b.journal.relocateInMaint(ctx, victim)
	b.store.maint.Unlock()
	if err != nil || moved == 0 {
		t.Fatalf("relocate file %d: moved %d bytes, %v", victim, moved, err)
	}
	readLedger1(t, ctx, b)
	b.Close() // the crash: the file is still there
	b = startBookie(t, cfg)
	readLedger1(t, ctx, b)
	if _, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(victim))); err != nil {
		t.Fatalf("file %d: %v", victim, err)
	}
	if !slices.Contains(b.store.compactionCandidates(0.5), victim) {
		t.Fatalf("file %d is no longer a candidate after the restart", victim)
	}
	before := metricValue(b.m.compactedBytes)
	b.store.maint.Lock()
	moved, err = b.journal.relocateInMaint(ctx, victim)
	if err == nil {
		b.store.retireInMaint(victim)
	}
	b.store.maint.Unlock()
	if err != nil || moved != 0 {
		t.Fatalf("second pass over file %d moved %d bytes (%v); its entries were already copied", victim, moved, err)
	}
	if _, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(victim))); !os.IsNotExist(err) {
		t.Fatalf("file %d survived its compaction: %v", victim, err)
	}
	if metricValue(b.m.compactedBytes) != before {
		t.Fatal("the second pass copied bytes")
	}
	readLedger1(t, ctx, b)
	b.Close()
	readLedger1(t, ctx, startBookie(t, cfg))
}

// TestCompactionCopyOfDeletedLedger: a copy whose ledger GC deleted meanwhile
// has no effect, on apply and on replay: it never brings the ledger back.
func TestCompactionCopyOfDeletedLedger(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, t.TempDir(), nil)
	b := startBookie(t, cfg)
	payload := []byte("copied")
	res := make(chan opResult, 1)
	copyRec := record{kind: recAdd, relocated: true, ledgerID: 42, entryID: 0, lac: bkproto.NoEntry,
		checksum: bkproto.EntryChecksum(42, 0, payload), payload: payload}
	if err := b.journal.enqueue(ctx, &op{rec: copyRec, done: func(r opResult) { res <- r }}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	}
	if _, _, ok := b.store.ledger(42); ok {
		t.Fatal("a relocated copy created an unknown ledger")
	}
	b.Close()
	b = startBookie(t, cfg)
	if _, _, ok := b.store.ledger(42); ok {
		t.Fatal("replaying a relocated copy created an unknown ledger")
	}
}

// TestDamagedEntryOnDisk: a read verifies the record it preads from the
// journal file; a byte flipped on disk fails that read alone, with
// ChecksumMismatch, and counts.
func TestDamagedEntryOnDisk(t *testing.T) {
	ctx := testCtx(t)
	cfg := testConfig(t, t.TempDir(), nil)
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	for e := range int64(5) {
		mustAdd(t, ctx, c, 7, e, 3000)
	}
	loc, err := b.store.location(7, 2)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(b.journal.dir, journalFileName(loc.file)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := loc.off + int64(loc.size) - 100 // in the payload
	var one [1]byte
	if _, err := f.ReadAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x10
	if _, err := f.WriteAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 7, EntryID: 2})
	wantErr(t, "read of the damaged entry", err, bkproto.ErrChecksumMismatch)
	for _, e := range []int64{0, 1, 3, 4} {
		mustRead(t, ctx, c, 7, e, 3000)
	}
	if got := metricValue(b.m.checksumErrors); got != 1 {
		t.Fatalf("checksum_errors_total = %v, want 1", got)
	}
}

// TestLostAccountingIsRecounted: checkpointed files whose persisted
// accounting is missing are recounted from the index at start, so that they
// are neither kept forever nor deleted while they hold live entries.
func TestLostAccountingIsRecounted(t *testing.T) {
	ctx := testCtx(t)
	store := metatest.Memory(t)
	cfg := testConfig(t, t.TempDir(), store)
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	createLedgerMeta(t, ctx, store, cfg.Region, 1, 2)
	for e := range int64(40) {
		mustAdd(t, ctx, c, 2, e, 40<<10)
	}
	for e := range int64(40) {
		mustAdd(t, ctx, c, 1, e, 40<<10)
	}
	c.Close()
	b.Close()
	b = startBookie(t, cfg) // checkpoints every file
	files := journalLedgers(t, b)
	b.Close()

	// Drop every file's accounting, as if it had never been written.
	m, _ := newMetrics(nil)
	st, err := openStore(filepath.Join(cfg.DataDir, "index"), 1<<20, testLogger(t), m, &failpointSwitch{}, OSFS{}, b.journal.dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := range files {
		if err := st.db.Delete(fileKey(n), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.flush(); err != nil {
		t.Fatal(err)
	}
	st.close()

	b = startBookie(t, cfg)
	c = dial(t, b.Addr())
	for n, ls := range files {
		_, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(n)))
		if len(ls) > 0 && err != nil {
			t.Fatalf("file %d holds entries of %v and is gone after the recount: %v", n, ls, err)
		}
		if len(ls) == 0 && !os.IsNotExist(err) {
			t.Fatalf("file %d holds no entry and survived the recount: %v", n, err)
		}
	}
	for e := range int64(40) {
		mustRead(t, ctx, c, 1, e, 40<<10)
	}
	// The recounted accounting drives GC like the persisted one.
	deleteLedgerMeta(t, ctx, store, cfg.Region, 2)
	if _, err := b.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	for n, ls := range files {
		_, err := os.Stat(filepath.Join(b.journal.dir, journalFileName(n)))
		if ls[2] && !ls[1] && !os.IsNotExist(err) {
			t.Fatalf("file %d held only ledger 2 and survived its GC: %v", n, err)
		}
		if ls[1] && err != nil {
			t.Fatalf("file %d holds ledger 1: %v", n, err)
		}
	}
	for e := range int64(40) {
		mustRead(t, ctx, c, 1, e, 40<<10)
	}
}
