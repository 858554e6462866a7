package telemetry

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestLogFormatText(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    LogFormat
		wantErr bool
	}{
		{in: "text", want: LogText},
		{in: "json", want: LogJSON},
		{in: "", wantErr: true},
		{in: "JSON", wantErr: true},
		{in: " json", wantErr: true},
		{in: "logfmt", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := LogFormat(-1)
			err := got.UnmarshalText([]byte(tc.in))
			if tc.wantErr {
				if !errors.Is(err, ErrUnknownLogFormat) {
					t.Fatalf("UnmarshalText(%q) = %v, want ErrUnknownLogFormat", tc.in, err)
				}
				if got != LogFormat(-1) {
					t.Errorf("UnmarshalText(%q) failed but changed the value to %v", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			back, err := got.MarshalText()
			if err != nil || string(back) != tc.in || got.String() != tc.in {
				t.Errorf("%v marshals to %q, %v and prints %q; want %q", got, back, err, got.String(), tc.in)
			}
		})
	}
	if _, err := LogFormat(7).MarshalText(); !errors.Is(err, ErrUnknownLogFormat) {
		t.Errorf("MarshalText of LogFormat(7) = %v, want ErrUnknownLogFormat", err)
	}
	if s := LogFormat(7).String(); s != "LogFormat(7)" {
		t.Errorf("LogFormat(7).String() = %q", s)
	}
}

// LogFormat works as a flag value the way slog.Level does: the default shows
// its spelling, a good value is taken, a bad one is a parse error naming the
// choices.
func TestLogFormatFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    LogFormat
		wantErr string
	}{
		{args: nil, want: LogText},
		{args: []string{"--log-format", "json"}, want: LogJSON},
		{args: []string{"--log-format=text"}, want: LogText},
		{args: []string{"--log-format", "xml"}, wantErr: "want text or json"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("meridian", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var format LogFormat
			fs.TextVar(&format, "log-format", LogText, "log format (text or json)")
			if def := fs.Lookup("log-format").DefValue; def != "text" {
				t.Errorf("default shown as %q, want text", def)
			}
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil || format != tc.want {
				t.Fatalf("Parse(%q) gave %v, %v; want %v", tc.args, format, err, tc.want)
			}
		})
	}
}

// Every JSON line is a JSON object that carries the stable keys as written,
// and records below the level are not written.
func TestNewLoggerJSON(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, LogJSON, slog.LevelInfo)
	log.Debug("below the level")
	log.With(KeyRegion, "us-east", KeyBroker, "broker-1").Info("topic loaded",
		KeyTopic, "persistent://public/default/t", KeyLedger, int64(42), KeyBookie, "bookie-0",
		KeyTask, "persistent://public/default/t->eu-west")
	log.Warn("second record", KeyRegion, "eu-west")

	var records []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, sc.Bytes())
		}
		records = append(records, rec)
	}
	if len(records) != 2 {
		t.Fatalf("got %d records, want 2 (the debug record is below the level):\n%s", len(records), buf.String())
	}
	want := map[string]any{
		"level":   "INFO",
		"msg":     "topic loaded",
		KeyRegion: "us-east",
		KeyBroker: "broker-1",
		KeyTopic:  "persistent://public/default/t",
		KeyLedger: float64(42),
		KeyBookie: "bookie-0",
		KeyTask:   "persistent://public/default/t->eu-west",
	}
	for k, v := range want {
		if records[0][k] != v {
			t.Errorf("record 0: %s = %#v, want %#v", k, records[0][k], v)
		}
	}
	if _, ok := records[0]["time"]; !ok {
		t.Errorf("record 0 has no time: %v", records[0])
	}
	if records[1]["level"] != "WARN" || records[1][KeyRegion] != "eu-west" {
		t.Errorf("record 1 = %v", records[1])
	}
}

func TestNewLoggerText(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, LogText, slog.LevelWarn).Warn("slow add", KeyLedger, 7)
	if got, want := buf.String(), `level=WARN msg="slow add" ledger=7`; !strings.Contains(got, want) {
		t.Errorf("text output %q lacks %q", got, want)
	}
	if json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Errorf("text output is JSON: %s", buf.String())
	}
}

// The strings are the contract of STYLE rule 6: log pipelines select on them.
func TestStableKeys(t *testing.T) {
	got := []string{KeyRegion, KeyTopic, KeyLedger, KeyBookie, KeyBroker, KeyTask}
	want := []string{"region", "topic", "ledger", "bookie", "broker", "task"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d = %q, want %q", i, got[i], want[i])
		}
	}
}
