package meta

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/soheilhy/cmux"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog returns a zap logger that hands etcd's log records (client and
// embedded server log through zap) to a *slog.Logger, dropping those below
// level. It lets the caller decide where etcd's chatter goes and how much of
// it, with no second logging configuration.
func zapToSlog(log *slog.Logger, level slog.Level) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{h: log.Handler(), level: level})
}

// slogCore is a zapcore.Core writing to a slog.Handler.
type slogCore struct {
	h     slog.Handler
	level slog.Level
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	sl := slogLevel(l)
	return sl >= c.level && c.h.Enabled(context.Background(), sl)
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h.WithAttrs(attrs(fields)), level: c.level}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// memberNoise tells the records of an embedded member that report no fault
// but would otherwise go out at ERROR or WARN on every run, so that a clean
// run logs no ERROR while etcd's level stays as configured. It knows exactly
// two such records; any other record keeps its level.
//
//  1. The stop. Each of etcd's serving goroutines (the cmux listener, the
//     HTTP server, the gRPC server, the peer listener) returns an error when
//     Embed.Close closes its listener, and etcd's embed.Etcd.errHandler logs
//     every such return at ERROR as "setting up serving from embedded etcd
//     failed." before it looks at whether the server is stopping; the gRPC
//     server also warns that it stops "due to error". Those errors are the
//     stop itself: cmux.ErrServerClosed, http.ErrServerClosed, net.ErrClosed.
//     Rule: once stopping is set (Close has begun), a record whose error is
//     one of those goes out at Debug. Before Close, a listener that fails is
//     an ERROR, and so is any other failure during the stop.
//  2. The first storage-version check of a new member. etcd's storage
//     version monitor runs as soon as the cluster version is set, which on a
//     new data directory can be before the backend's first commit (its batch
//     interval, 100ms) has stored the raft term; it then logs "failed to
//     update storage version ... missing term information" at ERROR and
//     succeeds at its next check, 4s later. The term is stored by every
//     commit, so this can only happen before the first one. Rule: the first
//     such record of a member goes out at Info; a second one means the term
//     is really missing and stays an ERROR.
type memberNoise struct {
	// stopping is set when the member is being closed.
	stopping atomic.Bool
	// termMissingSeen is set by the first "missing term information" record.
	termMissingSeen atomic.Bool
}

const (
	msgStorageVersionFailed = "failed to update storage version"
	errMissingTerm          = "missing term information"
)

// level returns the level a record should go out at: its own, or a lower one
// for the records described on memberNoise.
func (n *memberNoise) level(e zapcore.Entry, fields []zapcore.Field) zapcore.Level {
	if e.Level <= zapcore.InfoLevel {
		return e.Level
	}
	err := errorField(fields)
	if err == nil {
		return e.Level
	}
	if n.stopping.Load() && (errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, cmux.ErrServerClosed)) {
		return zapcore.DebugLevel
	}
	if e.Message == msgStorageVersionFailed && strings.Contains(err.Error(), errMissingTerm) &&
		n.termMissingSeen.CompareAndSwap(false, true) {
		return zapcore.InfoLevel
	}
	return e.Level
}

// errorField returns the first error among a record's fields, or nil.
func errorField(fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType {
			return err
		}
	}
	return nil
}

// quietCore is a zapcore.Core that writes a record at the level noise gives
// it, and drops it when the wrapped core does not take that level.
type quietCore struct {
	zapcore.Core
	noise *memberNoise
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), noise: c.noise}
}

// Check admits the record at its own level; Write decides whether to lower
// it, because only Write sees the record's fields.
func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c quietCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if l := c.noise.level(e, fields); l != e.Level {
		if !c.Core.Enabled(l) {
			return nil
		}
		e.Level = l
	}
	return c.Core.Write(e, fields)
}

// quietMember returns a logger for an embedded member: z, with the records
// that noise knows lowered.
func quietMember(z *zap.Logger, noise *memberNoise) *zap.Logger {
	return z.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return quietCore{Core: c, noise: noise}
	}))
}
