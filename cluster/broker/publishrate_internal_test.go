package broker

import (
	"testing"
	"time"
)

// TestPublishLimiterReserve: the limiter admits a tenth of a second's worth
// at once and spaces the rest at the rate, a batch larger than its burst
// included; a rate set again as it was keeps what was admitted; no rate
// admits everything at once.
func TestPublishLimiterReserve(t *testing.T) {
	var l publishLimiter
	now := time.Unix(1000, 0)
	if d := l.reserve(now, 1000, 1<<20); d != 0 || l.limited() {
		t.Fatalf("no rate: waits %v (limited %v), want none", d, l.limited())
	}
	l.set(publishRate{msgs: 100})
	steps := []struct {
		messages int
		want     time.Duration
	}{
		{10, 0},                      // the burst: a tenth of a second's worth
		{25, 250 * time.Millisecond}, // a batch above the burst, at 100 msg/s
		{1, 260 * time.Millisecond},
	}
	for _, s := range steps {
		if d := l.reserve(now, s.messages, 0); d != s.want {
			t.Errorf("reserve %d messages: wait %v, want %v", s.messages, d, s.want)
		}
	}
	l.set(publishRate{msgs: 100}) // unchanged: what was admitted stays
	if d := l.reserve(now, 1, 0); d != 270*time.Millisecond {
		t.Errorf("after setting the same rate: wait %v, want 270ms", d)
	}
	l.set(publishRate{bytes: 1000})
	if d := l.reserve(now, 1, 1100); d != time.Second {
		t.Errorf("1100 bytes at 1000 B/s (burst 100): wait %v, want 1s", d)
	}
	l.set(publishRate{})
	if d := l.reserve(now, 1000, 1<<20); d != 0 || l.limited() {
		t.Errorf("rate removed: waits %v (limited %v), want none", d, l.limited())
	}
}
