package bookie

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/testkit"
)

// TestWriteOverlapsTheSyncInProgress: under load, the journal writes the
// next batch while the one before it syncs, and still answers every add
// once it is durable. The filesystem holds each journal write and sync at
// a gate the test opens one pass at a time:
//   - e0 alone: run writes it and syncs it itself (nobody waits);
//   - e1 and e2 queue behind that sync, and run writes them as one batch;
//   - e3 arrives during that write, so run passes the batch to the syncer
//     and goes on to write e3 while the batch's sync is still held.
//
// A journal that syncs before it writes the next batch never lets e3's
// write through while a sync is held.
func TestWriteOverlapsTheSyncInProgress(t *testing.T) {
	ctx := testCtx(t)
	b, c, fs, added := overlapped(t, ctx)
	defer fs.open()
	fs.pass(t, "write")
	testkit.WaitFor(t, "e3's write while e1 and e2 sync", func() bool { return fs.overlapped() == 1 })
	select {
	case err := <-added:
		t.Fatalf("an add was answered while its sync was held: %v", err)
	default:
	}
	fs.open()
	for range 3 {
		if err := <-added; err != nil {
			t.Fatal(err)
		}
	}
	for e := range int64(4) {
		mustRead(t, ctx, c, 1, e, 100)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailedSyncFailsTheBatchWrittenBehindIt: when the syncer's fdatasync
// fails, the batch it held fails, and so does the one run wrote meanwhile,
// although a later sync of it would succeed: after a failed fsync no sync
// can say whether the earlier data is on disk. The bookie stops.
func TestFailedSyncFailsTheBatchWrittenBehindIt(t *testing.T) {
	ctx := testCtx(t)
	b, _, fs, added := overlapped(t, ctx)
	defer fs.open()
	fs.failNextSync()
	fs.pass(t, "sync") // e1 and e2's, which fails
	fs.pass(t, "write")
	for range 3 {
		if err := <-added; err == nil {
			t.Fatal("an add was acknowledged after a failed sync")
		}
	}
	// The connection closes as the bookie stops, so the client's errors
	// say little: the journal's own count of the adds it acknowledged does.
	fs.open()
	if err := b.Close(); !errors.Is(err, ErrJournalSync) {
		t.Fatalf("close after a failed sync: %v, want ErrJournalSync", err)
	}
	if acked := gatherAll(t, b)[`bookie_journal_JOURNAL_ADD_ENTRY_count{success="true"}`]; acked != 1 {
		t.Fatalf("the journal acknowledged %v adds, want 1 (e0, before the failed sync)", acked)
	}
}

// overlapped starts a bookie on a gatedFS and brings its journal to where
// the syncer holds a batch (e1 and e2) at the sync gate while run holds the
// next (e3) at the write gate. It returns the answers of e1, e2 and e3 as
// they come, in any order; e0's is taken.
//   - e0 alone: run writes it and syncs it itself (nobody waits);
//   - e1 and e2 queue behind that sync, and run writes them as one batch;
//   - e3 arrives during that write, so run passes the batch to the syncer
//     and goes on to write e3.
//
// A journal that syncs before it writes the next batch never brings e3 to
// the write gate while a sync is held.
func overlapped(t *testing.T, ctx context.Context) (*testBookie, *bkproto.Conn, *gatedFS, chan error) {
	fs := newGatedFS()
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.FS = fs
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	fs.gate()

	added := make(chan error, 4)
	add := func(e int64) {
		go func() {
			added <- c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: e, LastAddConfirmed: e - 1, Payload: payloadOf(1, e, 100)})
		}()
	}
	queued := func(n int) {
		t.Helper()
		testkit.WaitFor(t, "adds queued for the journal", func() bool { return len(b.journal.queue) == n })
	}
	add(0)
	fs.expect(t, "write")
	fs.pass(t, "write")
	fs.expect(t, "sync") // run syncs e0 itself
	add(1)
	add(2)
	queued(2)
	fs.pass(t, "sync")
	fs.expect(t, "write") // e1 and e2
	if err := <-added; err != nil {
		t.Fatalf("e0: %v", err)
	}
	add(3)
	queued(1)
	fs.pass(t, "write")
	// The syncer brings e1 and e2 to the sync gate, and run brings e3 to
	// the write gate, in either order.
	fs.expect(t, "sync", "write")
	return b, c, fs, added
}

// gatedFS, once gated, holds every write and sync of a journal file (*.log)
// until the test passes it, and tells the test of each as it arrives.
type gatedFS struct {
	FS
	arrived chan string // "write" or "sync", as each reaches its gate
	passes  map[string]chan struct{}

	mu       sync.Mutex
	gated    bool
	opened   chan struct{} // closed by open: every gate passes from then on
	syncing  int           // syncs at their gate or running
	overlap  int           // writes that ran while a sync was in progress
	failNext bool          // the next sync fails with EIO (failNextSync)
}

func newGatedFS() *gatedFS {
	return &gatedFS{FS: OSFS{}, arrived: make(chan string, 16),
		passes: map[string]chan struct{}{"write": make(chan struct{}), "sync": make(chan struct{})},
		opened: make(chan struct{})}
}

func (fs *gatedFS) gate() { fs.mu.Lock(); fs.gated = true; fs.mu.Unlock() }

// open lets every write and sync through from now on.
func (fs *gatedFS) open() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.gated {
		fs.gated = false
		close(fs.opened)
	}
}

// expect waits until each of kinds has arrived at its gate, in any order.
func (fs *gatedFS) expect(t *testing.T, kinds ...string) {
	t.Helper()
	want := map[string]int{}
	for _, k := range kinds {
		want[k]++
	}
	for range kinds {
		select {
		case k := <-fs.arrived:
			if want[k] == 0 {
				t.Fatalf("a %s arrived at its gate, want %v", k, kinds)
			}
			want[k]--
		case <-time.After(10 * time.Second):
			t.Fatalf("no %v arrived at the gates in 10s (still waiting for %v)", kinds, want)
		}
	}
}

// pass lets one held write or sync through.
func (fs *gatedFS) pass(t *testing.T, kind string) {
	t.Helper()
	select {
	case fs.passes[kind] <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s waits at its gate", kind)
	}
}

// failNextSync makes the next sync fail with EIO; the ones after it
// succeed.
func (fs *gatedFS) failNextSync() { fs.mu.Lock(); fs.failNext = true; fs.mu.Unlock() }

func (fs *gatedFS) overlapped() int { fs.mu.Lock(); defer fs.mu.Unlock(); return fs.overlap }

// wait holds a journal file's write or sync at its gate while gated.
func (fs *gatedFS) wait(kind string) {
	fs.mu.Lock()
	gated, opened := fs.gated, fs.opened
	fs.mu.Unlock()
	if !gated {
		return
	}
	fs.arrived <- kind
	select {
	case <-fs.passes[kind]:
	case <-opened:
	}
}

func (fs *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, fs: fs}, nil
}

type gatedFile struct {
	File
	fs *gatedFS
}

func (f *gatedFile) Write(p []byte) (int, error) {
	f.fs.wait("write")
	f.fs.mu.Lock()
	if f.fs.syncing > 0 {
		f.fs.overlap++
	}
	f.fs.mu.Unlock()
	return f.File.Write(p)
}

func (f *gatedFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncing++
	f.fs.mu.Unlock()
	defer func() { f.fs.mu.Lock(); f.fs.syncing--; f.fs.mu.Unlock() }()
	f.fs.wait("sync")
	f.fs.mu.Lock()
	failing := f.fs.failNext
	f.fs.failNext = false
	f.fs.mu.Unlock()
	if failing {
		return &os.PathError{Op: "fdatasync", Path: "journal", Err: syscall.EIO}
	}
	return f.File.Sync()
}
