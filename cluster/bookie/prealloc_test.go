package bookie

import (
	"os"
	"testing"
)

// zeroTail returns how many zero bytes end the file at path.
func zeroTail(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	end, err := dataEnd(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return st.Size() - end
}

// TestJournalPreallocation: the journal zero-fills ahead of its writes,
// cuts each file back to its records when it rolls, and a restart replays
// files that still end in zeros (a crash can come before the cut, and a
// file being written always does).
func TestJournalPreallocation(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil) // 1 MiB files, 256 KiB ahead, 64 KiB steps
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	mustAdd(t, ctx, c, 5, 0, 10<<10)
	files := journalFiles(t, dir)
	current := files[len(files)-1]
	waitFor(t, "zeros ahead of the first record", func() bool { return zeroTail(t, current) > 0 })

	const n = 60 // 60 × 40 KiB: the journal rolls twice
	for e := int64(1); e < n; e++ {
		mustAdd(t, ctx, c, 5, e, 40<<10)
	}
	files = journalFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("journal files %v: want at least 3 (two rolls)", files)
	}
	for _, f := range files[:len(files)-1] {
		if z := zeroTail(t, f); z != 0 {
			t.Fatalf("rolled file %s ends in %d zero bytes: not cut back", f, z)
		}
	}
	c.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// As if the cut of a rolled file was lost in a crash: zeros after its
	// records. The last file keeps the zeros it was written with.
	rolled := files[0]
	f, err := os.OpenFile(rolled, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 200<<10)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if zeroTail(t, files[len(files)-1]) == 0 {
		t.Fatal("the file being written has no preallocated zeros")
	}

	b2 := startBookie(t, cfg)
	c2 := dial(t, b2.Addr())
	mustRead(t, ctx, c2, 5, 0, 10<<10)
	for e := int64(1); e < n; e++ {
		mustRead(t, ctx, c2, 5, e, 40<<10)
	}
	mustAdd(t, ctx, c2, 5, n, 10)
}

// TestZeroedHeaderBeforeSyncedRecords: a record header of zeros with more
// than one batch of records after it is not preallocated space but damage
// to acknowledged data; the bookie refuses to start.
func TestZeroedHeaderBeforeSyncedRecords(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	cfg.JournalMaxBatchBytes = 64 << 10
	cfg.JournalFileSize = 64 << 20 // one file for the whole test
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	const n = 100 // more than maxTornTail after the first record
	for e := range int64(n) {
		mustAdd(t, ctx, c, 1, e, 100<<10)
	}
	c.Close()
	b.Close()
	files := journalFiles(t, dir)
	f, err := os.OpenFile(files[len(files)-1], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, recordHeaderSize), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Start(ctx, cfg)
	wantErr(t, "start with a zeroed header before synced records", err, ErrJournalCorrupt)
}
