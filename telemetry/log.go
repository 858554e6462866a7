package telemetry

import (
	"fmt"
	"io"
	"log/slog"
)

// The stable keys of log records (STYLE rule 6). A record about one of these
// things names it under its key, so that a reader or a log pipeline can
// select, for example, every record of one ledger across all components.
const (
	KeyRegion = "region" // a region (cluster) name
	KeyTopic  = "topic"  // a full topic name, persistent://tenant/ns/topic
	KeyLedger = "ledger" // a ledger id
	KeyBookie = "bookie" // a bookie id
	KeyBroker = "broker" // a broker id
	KeyTask   = "task"   // a replication task, topic and remote region
)

// LogFormat is how log records are written: as logfmt-style text for people,
// or as one JSON object per line for log pipelines. Its zero value is
// LogText. It implements encoding.TextMarshaler and TextUnmarshaler, so it
// serves as a flag value through flag.TextVar or pflag's TextVar.
type LogFormat int

const (
	// LogText writes key=value text (slog.TextHandler).
	LogText LogFormat = iota
	// LogJSON writes one JSON object per record (slog.JSONHandler).
	LogJSON
)

// logFormatNames maps each format to its flag spelling.
var logFormatNames = map[LogFormat]string{LogText: "text", LogJSON: "json"}

// String returns the format's flag spelling, or LogFormat(n) for a value that
// is not a format.
func (f LogFormat) String() string {
	if s, ok := logFormatNames[f]; ok {
		return s
	}
	return fmt.Sprintf("LogFormat(%d)", int(f))
}

// MarshalText returns the format's flag spelling; a value that is not a
// format is an error.
func (f LogFormat) MarshalText() ([]byte, error) {
	s, ok := logFormatNames[f]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownLogFormat, int(f))
	}
	return []byte(s), nil
}

// UnmarshalText sets the format from its spelling, "text" or "json", exactly
// as written (flags are case-sensitive like every other flag value).
func (f *LogFormat) UnmarshalText(text []byte) error {
	for format, name := range logFormatNames {
		if string(text) == name {
			*f = format
			return nil
		}
	}
	return fmt.Errorf("%w %q: want text or json", ErrUnknownLogFormat, text)
}

// NewLogger returns a logger writing records at level and above to w in
// format; a record whose context holds a span carries its trace and span
// ids (KeyTraceID, KeySpanID). A format that is not LogText or LogJSON falls back to text, so a
// logger always exists; flags reach here only through UnmarshalText, which
// refuses any other spelling.
func NewLogger(w io.Writer, format LogFormat, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == LogJSON {
		return slog.New(traceHandler{slog.NewJSONHandler(w, opts)})
	}
	return slog.New(traceHandler{slog.NewTextHandler(w, opts)})
}
