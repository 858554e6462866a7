package replicator

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
				l := newDispatchLimiter(time.Second, p.get)
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
		l := newDispatchLimiter(time.Second, p.get)
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
