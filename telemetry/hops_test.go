package telemetry

import (
	"testing"
	"time"
)

func TestTrail(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	for _, tc := range []struct {
		name   string
		trail  Trail
		header string
	}{
		{"replicated", NewTrail(at(100), "us-east", at(102), "eu-west", at(131)),
			"producer=1700000000100, us-east=1700000000102, eu-west=1700000000131"},
		{"local", NewTrail(at(100), "", at(999), "us-east", at(102)), "producer=1700000000100, us-east=1700000000102"},
		{"origin time unknown", NewTrail(at(100), "us-east", time.Time{}, "eu-west", at(131)),
			"producer=1700000000100, eu-west=1700000000131"},
		{"no broker entry metadata", NewTrail(at(100), "", time.Time{}, "us-east", time.Time{}), "producer=1700000000100"},
	} {
		if got := tc.trail.Header(); got != tc.header {
			t.Errorf("%s: header %q, want %q", tc.name, got, tc.header)
		}
	}
	base := NewTrail(at(100), "", time.Time{}, "us-east", at(102))
	got := base.Received(at(105))
	// Received leaves the trail it extends as it was.
	if len(base) != 2 || len(got) != 3 || got[2] != (Hop{Place: HopConsumer, At: at(105)}) {
		t.Fatalf("Received: %v from %v", got, base)
	}
	want := "producer 2023-11-14T22:13:20.100Z -> us-east 2023-11-14T22:13:20.102Z (+2ms) -> consumer 2023-11-14T22:13:20.105Z (+3ms)"
	if got.String() != want {
		t.Errorf("String:\n%q\nwant\n%q", got.String(), want)
	}
}

func TestParseMillis(t *testing.T) {
	if at, ok := ParseMillis("1700000000102"); !ok || at.UnixMilli() != 1700000000102 {
		t.Errorf("ParseMillis = %v, %v", at, ok)
	}
	for _, bad := range []string{"", "0", "-5", "12.5", "x"} {
		if _, ok := ParseMillis(bad); ok {
			t.Errorf("ParseMillis(%q) ok", bad)
		}
	}
}
