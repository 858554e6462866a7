package meta

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// etcd's zap records reach slog with their fields, and only from the chosen
// level up.
func TestZapToSlog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	z := zapToSlog(log, slog.LevelWarn).Named("raft").With(zap.String("member", "m1"))
	z.Info("chatter", zap.Int("term", 3))
	z.Warn("slow fdatasync", zap.Duration("took", 2e9), zap.Int("term", 4))
	z.Error("lost leader")
	out := buf.String()
	if strings.Contains(out, "chatter") {
		t.Errorf("info record passed a warn filter:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="slow fdatasync" member=m1 logger=raft term=4 took=2s`,
		`level=ERROR msg="lost leader" member=m1 logger=raft`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// No logger: records go nowhere, without failing.
	zapToSlog(nil, slog.LevelDebug).Error("dropped")
}
