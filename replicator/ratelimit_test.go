package replicator

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/meridian-mq/meridian/global"
)

// policyVar is a rate a test changes while a limiter reads it.
type policyVar struct {
	mu      sync.Mutex
	rate    global.DispatchRate
	limited bool
}

func (p *policyVar) set(r global.DispatchRate, limited bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.limited = r, limited
}

func (p *policyVar) get() (global.DispatchRate, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate, p.limited
}

func msgRate(perPeriod int64, period int) global.DispatchRate {
	return global.DispatchRate{DispatchThrottlingRateInMsg: perPeriod, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: period}
}

// timeToSend is how long, in the bubble's time, sending entries (each of
// msgs messages and size bytes) takes through l.
func timeToSend(t *testing.T, l *dispatchLimiter, entries, msgs, size int) time.Duration {
	t.Helper()
	start := time.Now()
	for range entries {
		if err := l.wait(t.Context(), msgs, size); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start)
}

func TestDispatchLimiter(t *testing.T) {
	for _, tc := range []struct {
		name              string
		rate              global.DispatchRate
		limited           bool
		entries, msgs, sz int
		want              time.Duration // at least, and less than want+100ms
	}{
		{"no rate", global.DispatchRate{}, false, 1000, 10, 1000, 0},
		// A full bucket of 50 first, then 50 per second: 150 more take 3s.
		{"50 msg/s", msgRate(50, 1), true, 200, 1, 100, 3 * time.Second},
		{"batches count their messages", msgRate(50, 1), true, 20, 10, 100, 3 * time.Second},
		{"a batch larger than a period's worth waits its size", msgRate(50, 1), true, 2, 100, 100, 3 * time.Second},
		{"the period spreads the rate", msgRate(100, 10), true, 200, 1, 100, 10 * time.Second},
		{"bytes", global.DispatchRate{DispatchThrottlingRateInMsg: -1, DispatchThrottlingRateInByte: 1000, RatePeriodInSecond: 1}, true,
			30, 1, 100, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &policyVar{}
				p.set(tc.rate, tc.limited)
				l := newDispatchLimiter(clockwork.NewRealClock(), time.Second, p.get)
				got := timeToSend(t, l, tc.entries, tc.msgs, tc.sz)
				if got < tc.want || got >= tc.want+100*time.Millisecond {
					t.Fatalf("took %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestDispatchLimiterFollowsPolicy changes the rate while a send waits: the
// change applies within the refresh interval, not after the old wait.
func TestDispatchLimiterFollowsPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &policyVar{}
		p.set(msgRate(1, 60), true) // one message a minute
		l := newDispatchLimiter(clockwork.NewRealClock(), time.Second, p.get)
		if got := timeToSend(t, l, 1, 1, 10); got != 0 {
			t.Fatalf("first message waited %v", got)
		}
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			if err := l.wait(context.Background(), 1, 10); err != nil {
				t.Error(err)
			}
			done <- time.Since(start)
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case d := <-done:
			t.Fatalf("second message sent after %v under a rate of one a minute", d)
		default:
		}
		p.set(global.DispatchRate{}, false) // the rate is removed
		if d := <-done; d > 6*time.Second+time.Millisecond {
			t.Fatalf("second message sent %v after the first; want within a refresh of the removal at 5s", d)
		}

		// A lower rate set while sending at will applies within a refresh.
		p.set(msgRate(10, 1), true)
		time.Sleep(time.Second)
		if got := timeToSend(t, l, 30, 1, 10); got < 2*time.Second {
			t.Fatalf("30 messages at 10/s took %v, want at least 2s", got)
		}
	})
}

// TestDispatchLimiterRelativeToPublishRate: a relative rate adds the
// publish rate measured from the entries read, in messages and in bytes,
// and follows it when it changes; with nothing read it is the configured
// rate alone.
func TestDispatchLimiterRelativeToPublishRate(t *testing.T) {
	relative := func(msgs, bytes int64) global.DispatchRate {
		return global.DispatchRate{DispatchThrottlingRateInMsg: msgs, DispatchThrottlingRateInByte: bytes, RatePeriodInSecond: 1, RelativeToPublishRate: true}
	}
	// published observes entries of one message and size bytes, perSecond
	// of them a second over the 10 s of publish time before now.
	published := func(l *dispatchLimiter, perSecond, size int) {
		end := time.Now().UnixMilli()
		for i := range 10 * perSecond {
			l.observe(end-10_000+int64(i)*1000/int64(perSecond), 1, size)
		}
	}
	for _, tc := range []struct {
		name              string
		rate              global.DispatchRate
		perSecond, size   int // the publish rate observed first
		entries, msgs, sz int // then sent
		want              time.Duration
	}{
		// 50 + 100 = 150 a second: a full bucket of 150, then 450 more in 3 s.
		{"messages", relative(50, -1), 100, 10, 600, 1, 10, 3 * time.Second},
		// Nothing observed: 50 a second, 150 after the first 50 take 3 s.
		{"nothing read yet", relative(50, -1), 0, 0, 200, 1, 10, 3 * time.Second},
		// 1,000 + 100 × 90 = 10,000 bytes a second: 40,000 bytes in 3 s.
		{"bytes", relative(-1, 1000), 100, 90, 400, 1, 100, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &policyVar{}
				p.set(tc.rate, true)
				l := newDispatchLimiter(clockwork.NewRealClock(), time.Second, p.get)
				if tc.perSecond > 0 {
					published(l, tc.perSecond, tc.size)
				}
				// A millisecond under: the rate's float arithmetic.
				got := timeToSend(t, l, tc.entries, tc.msgs, tc.sz)
				if got < tc.want-time.Millisecond || got >= tc.want+100*time.Millisecond {
					t.Fatalf("took %v, want %v", got, tc.want)
				}
			})
		})
	}

	// The publish rate doubling raises the rate within a refresh.
	synctest.Test(t, func(t *testing.T) {
		p := &policyVar{}
		p.set(relative(10, -1), true)
		l := newDispatchLimiter(clockwork.NewRealClock(), time.Second, p.get)
		published(l, 40, 10) // 10 + 40 = 50 a second
		if got := timeToSend(t, l, 150, 1, 10); got < 2*time.Second-time.Millisecond || got >= 2100*time.Millisecond {
			t.Fatalf("150 at 50 a second took %v, want 2s", got)
		}
		// 10 s later (the bucket full at 50), entries published at 100 a
		// second over those 10 s: 110 a second, the 50 tokens kept, so 330
		// take (330 - 50) / 110 s.
		time.Sleep(10 * time.Second)
		published(l, 100, 10)
		want := 280 * time.Second / 110
		if got := timeToSend(t, l, 330, 1, 10); got < want-time.Millisecond || got >= want+100*time.Millisecond {
			t.Fatalf("330 at 110 a second took %v, want %v", got, want)
		}
	})
}

// TestPublishRate: the rate over the newest 10 s of publish time, over
// fewer seconds while fewer have been seen, leaving out what is older.
func TestPublishRate(t *testing.T) {
	var p publishRate
	if m, b := p.perSecond(); m != 0 || b != 0 {
		t.Fatalf("empty: %v, %v", m, b)
	}
	base := int64(1_700_000_000_000)
	for i := range 4 { // 4 s of 10 entries of 3 messages, 100 bytes
		for j := range 10 {
			p.add(base+int64(i)*1000+int64(j)*100, 3, 100)
		}
	}
	if m, b := p.perSecond(); m != 30 || b != 1000 {
		t.Fatalf("after 4 s: %v msg/s, %v B/s; want 30, 1000", m, b)
	}
	p.add(base+20_000, 1, 10)  // 20 s later: the 4 s before fall out
	p.add(base+1000, 100, 100) // older than the window: left out
	if m, b := p.perSecond(); m != 0.1 || b != 1 {
		t.Fatalf("after a gap: %v msg/s, %v B/s; want 0.1, 1", m, b)
	}
}
