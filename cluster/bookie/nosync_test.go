package bookie

import (
	"bytes"
	"log/slog"
	"strings"
	"syscall"
	"testing"
)

// TestNoSyncSkipsEverySync runs a bookie with NoSync on a filesystem whose
// every sync fails: were any sync still made (journal, checkpoint or
// directory), the bookie would fail to start or stop with ErrJournalSync.
// It acknowledges adds, warns that they are not durable, and after a clean
// restart replays them like a syncing bookie.
func TestNoSyncSkipsEverySync(t *testing.T) {
	ctx := testCtx(t)
	fs := NewFaultFS(OSFS{})
	fs.FailSyncs(syscall.EIO, 0)
	// The handler serializes its writes; the log is read once the bookie
	// is closed, when nothing writes it.
	var logs bytes.Buffer
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.FS, cfg.NoSync = fs, true
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := startBookie(t, cfg)
	c := dial(t, b.Addr())
	for e := range int64(50) {
		mustAdd(t, ctx, c, 1, e, 2000)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if log := logs.String(); !strings.Contains(log, "acknowledged entries are not durable") {
		t.Errorf("no warning that acknowledged data is not durable in the log:\n%s", log)
	}
	cfg.Logger = testLogger(t)

	b2 := startBookie(t, cfg)
	c2 := dial(t, b2.Addr())
	for e := range int64(50) {
		mustRead(t, ctx, c2, 1, e, 2000)
	}

	// Without NoSync the same filesystem stops the bookie: the test would
	// catch a NoSync that did nothing.
	if err := b2.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	cfg.NoSync = false
	if b3, err := Start(ctx, cfg); err == nil {
		b3.Close()
		t.Fatal("a syncing bookie started on a filesystem whose syncs fail")
	}
}
