package broker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// TestRelativeDispatchRate: a dispatch rate relative to the publish rate
// allows, in each limited dimension, its configured count plus what the
// topic published in one of its periods, at the rate measured over the
// last window of at least a second; an absolute rate, and a dimension not
// limited, stay as configured.
func TestRelativeDispatchRate(t *testing.T) {
	var m publishRateMeter
	t0 := time.Unix(1000, 0)
	if got := m.measure(t0, 100, 10_000); got != (measuredRate{}) {
		t.Fatalf("the first read measured %+v, want nothing yet", got)
	}
	if got := m.measure(t0.Add(500*time.Millisecond), 150, 15_000); got != (measuredRate{}) {
		t.Fatalf("half a second on measured %+v, want nothing yet: the window is too short", got)
	}
	published := m.measure(t0.Add(2*time.Second), 400, 40_000)
	if want := (measuredRate{msgs: 150, bytes: 15_000}); published != want {
		t.Fatalf("300 messages and 30,000 bytes in 2s measured %+v, want %+v", published, want)
	}
	if got := m.measure(t0.Add(2500*time.Millisecond), 500, 50_000); got != published {
		t.Fatalf("half a second later %+v, want the last window's %+v", got, published)
	}

	relative := global.DispatchRate{DispatchThrottlingRateInMsg: 10, DispatchThrottlingRateInByte: -1,
		RatePeriodInSecond: 2, RelativeToPublishRate: true}
	raised := published.raise(relative)
	if raised.DispatchThrottlingRateInMsg != 10+2*150 || raised.DispatchThrottlingRateInByte != -1 {
		t.Fatalf("raised to %+v, want 310 messages a period and bytes still not limited", raised)
	}
	absolute := relative
	absolute.RelativeToPublishRate = false
	if got := published.raise(absolute); got != absolute {
		t.Fatalf("an absolute rate became %+v", got)
	}
}

// TestDispatchLimiterReservesEachTokenOnce: the subscriptions that share a
// topic's limiter reserve from it at once; each token goes to one of them.
// (Reading what the bucket holds and taking it in two steps let two
// dispatchers take the same tokens, and the topic overshot its rate.)
func TestDispatchLimiterReservesEachTokenOnce(t *testing.T) {
	const tokens = 1000
	now := time.Unix(1000, 0) // one instant: nothing refills
	var l dispatchLimiter
	l.set(global.DispatchRate{DispatchThrottlingRateInMsg: tokens, DispatchThrottlingRateInByte: -1, RatePeriodInSecond: 1}, true, now)
	var (
		wg    sync.WaitGroup
		total atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for {
				got, wait := l.reserve(now, 3)
				if wait > 0 || got == 0 {
					return
				}
				total.Add(got)
			}
		})
	}
	wg.Wait()
	if got := total.Load(); got != tokens {
		t.Fatalf("the dispatchers reserved %d messages of a bucket of %d", got, tokens)
	}
}
