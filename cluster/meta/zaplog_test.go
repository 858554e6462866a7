package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/soheilhy/cmux"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

// recorder is a slog handler that keeps every record it is given (without
// the attributes added through With, which no test here looks at).
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// atLeast returns the records at level or above, each as "LEVEL msg attrs".
func (r *recorder) atLeast(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if rec.Level < level {
			continue
		}
		line := rec.Level.String() + " " + rec.Message
		rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		out = append(out, line)
	}
	return out
}

// memberNoise lowers exactly the records it documents: closed listeners once
// the member is stopping, and the first "missing term" storage-version record.
// Every other record keeps its level.
func TestMemberNoise(t *testing.T) {
	closedAccept := &net.OpError{Op: "accept", Net: "tcp", Err: net.ErrClosed}
	missingTerm := fmt.Errorf("cannot detect storage schema version: %w", errors.New("missing term information"))
	const serving = "setting up serving from embedded etcd failed."
	type record struct {
		level  zapcore.Level
		msg    string
		fields []zap.Field
		want   slog.Level
	}
	for _, tc := range []struct {
		name     string
		stopping bool
		records  []record
	}{
		{"serving fails before Close", false, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.Error(closedAccept)}, slog.LevelError}}},
		{"closed listener during Close", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.Error(closedAccept)}, slog.LevelDebug}}},
		{"closed http server during Close", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.Error(http.ErrServerClosed)}, slog.LevelDebug}}},
		{"closed cmux during Close", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.Error(cmux.ErrServerClosed)}, slog.LevelDebug}}},
		{"grpc warning with a wrapped closed error during Close", true, []record{
			{zapcore.WarnLevel, "stopping insecure grpc server due to error", []zap.Field{zap.Error(fmt.Errorf("grpc: %w", closedAccept))}, slog.LevelDebug}}},
		{"named error field during Close", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.NamedError("cause", net.ErrClosed)}, slog.LevelDebug}}},
		{"another error during Close", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.Error(errors.New("fdatasync: input/output error"))}, slog.LevelError}}},
		{"closed-listener text that is no error field", true, []record{
			{zapcore.ErrorLevel, serving, []zap.Field{zap.String("error", "use of closed network connection")}, slog.LevelError}}},
		{"warning without error during Close", true, []record{
			{zapcore.WarnLevel, "slow fdatasync", nil, slog.LevelWarn}}},
		{"missing term: the first is the new member's race, the second is real", false, []record{
			{zapcore.ErrorLevel, "failed to update storage version", []zap.Field{zap.String("cluster-version", "3.7.0"), zap.Error(missingTerm)}, slog.LevelInfo},
			{zapcore.ErrorLevel, "failed to update storage version", []zap.Field{zap.Error(missingTerm)}, slog.LevelError}}},
		{"another storage-version failure", false, []record{
			{zapcore.ErrorLevel, "failed to update storage version", []zap.Field{zap.Error(errors.New("cannot create migration plan"))}, slog.LevelError},
			{zapcore.ErrorLevel, "failed to update storage version", []zap.Field{zap.Error(missingTerm)}, slog.LevelInfo}}},
		{"missing term in another record", false, []record{
			{zapcore.ErrorLevel, "failed to recover", []zap.Field{zap.Error(missingTerm)}, slog.LevelError}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			var noise memberNoise
			noise.stopping.Store(tc.stopping)
			z := quietMember(zapToSlog(slog.New(&rec), slog.LevelDebug), &noise).Named("embed").With(zap.String("member", "m1"))
			var want []string
			for _, r := range tc.records {
				if ce := z.Check(r.level, r.msg); ce != nil {
					ce.Write(r.fields...)
				}
				want = append(want, r.want.String()+" "+r.msg)
			}
			got := rec.atLeast(slog.LevelDebug)
			if len(got) != len(want) {
				t.Fatalf("records %q, want %q", got, want)
			}
			for i := range want {
				if !strings.HasPrefix(got[i], want[i]+" ") {
					t.Errorf("record %d = %q, want %q...", i, got[i], want[i])
				}
			}
		})
	}

	// A lowered record below the bridge's level is dropped, not written at
	// its old level.
	var rec recorder
	var noise memberNoise
	noise.stopping.Store(true)
	z := quietMember(zapToSlog(slog.New(&rec), slog.LevelWarn), &noise)
	z.Error("setting up serving from embedded etcd failed.", zap.Error(http.ErrServerClosed))
	if got := rec.atLeast(slog.LevelDebug); len(got) != 0 {
		t.Errorf("records %q, want none at a warn filter", got)
	}
}
