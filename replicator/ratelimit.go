package replicator

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/meridian-mq/meridian/global"
)

// dispatchLimiter holds one task's sends to its topic's replicator dispatch
// rate (Pulsar's replicatorDispatchRate: messages and bytes per period, the
// topic's policy over the namespace's for the source region). It is owned
// by the task's send goroutine.
//
// Each limited dimension is a token bucket that refills at its rate per
// period and holds one period's worth, so a task that was idle sends a
// period's worth at once and then keeps to the rate, as Pulsar's dispatch
// limiter does. An entry larger than a period's worth (a big batch) takes
// its tokens in period-sized chunks, so it waits as long as its size asks
// rather than passing unlimited or never.
//
// The rate is read again every refresh (the worker's ScanInterval) from the
// watched global cache, and a wait never sleeps longer than refresh before
// reading it again: a new, removed or changed rate applies within refresh
// without restarting the task. A changed rate starts with a full bucket.
type dispatchLimiter struct {
	policy  func() (global.DispatchRate, bool) // the current rate; false: none
	refresh time.Duration

	checked time.Time // when policy was last read
	current global.DispatchRate
	limited bool
	msgs    *rate.Limiter // nil: messages are not limited
	bytes   *rate.Limiter // nil: bytes are not limited
}

// dispatchLimiter is the limiter of t's sends, reading t's topic's rate out
// of the worker's region.
func (t *task) dispatchLimiter() *dispatchLimiter {
	w := t.w
	return newDispatchLimiter(w.cfg.ScanInterval, func() (global.DispatchRate, bool) {
		eff, ok := w.effective(t.id.Topic)
		if !ok {
			// The namespace is gone: the worker stops the task soon.
			return global.DispatchRate{}, false
		}
		return eff.ReplicatorDispatchRateFrom(w.cfg.Region)
	})
}

func newDispatchLimiter(refresh time.Duration, policy func() (global.DispatchRate, bool)) *dispatchLimiter {
	return &dispatchLimiter{policy: policy, refresh: refresh}
}

// wait blocks until msgs messages of size bytes in all may be sent, or ctx
// ends.
func (l *dispatchLimiter) wait(ctx context.Context, msgs, bytes int) error {
	if err := l.take(ctx, func() *rate.Limiter { return l.msgs }, msgs); err != nil {
		return err
	}
	return l.take(ctx, func() *rate.Limiter { return l.bytes }, bytes)
}

// take takes n tokens from the bucket bucket returns (after each read of
// the rate, which may replace it), in chunks of at most a period's worth.
func (l *dispatchLimiter) take(ctx context.Context, bucket func() *rate.Limiter, n int) error {
	for n > 0 {
		l.read()
		lim := bucket()
		if lim == nil {
			return nil
		}
		chunk := min(n, lim.Burst())
		now := time.Now()
		r := lim.ReserveN(now, chunk)
		delay := r.DelayFrom(now)
		if delay > l.refresh {
			// Give the tokens back and look at the rate again after
			// refresh: it may have changed meanwhile.
			r.CancelAt(now)
			delay, chunk = l.refresh, 0
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// read reads the rate when refresh has passed since the last read, and
// rebuilds the buckets when it changed.
func (l *dispatchLimiter) read() {
	now := time.Now()
	if !l.checked.IsZero() && now.Sub(l.checked) < l.refresh {
		return
	}
	l.checked = now
	r, limited := l.policy()
	if limited == l.limited && r == l.current {
		return
	}
	l.current, l.limited = r, limited
	l.msgs, l.bytes = nil, nil
	if !limited {
		return
	}
	period := float64(r.RatePeriodInSecond)
	if r.DispatchThrottlingRateInMsg > 0 {
		l.msgs = bucketOf(r.DispatchThrottlingRateInMsg, period)
	}
	if r.DispatchThrottlingRateInByte > 0 {
		l.bytes = bucketOf(r.DispatchThrottlingRateInByte, period)
	}
}

// bucketOf is a full bucket of perPeriod tokens refilled at perPeriod per
// period seconds.
func bucketOf(perPeriod int64, period float64) *rate.Limiter {
	burst := int(min(perPeriod, math.MaxInt32))
	return rate.NewLimiter(rate.Limit(float64(perPeriod)/period), burst)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// messagesIn is how many messages an entry counts for: its batch's size,
// at least one.
func messagesIn(numMessagesInBatch int32) int {
	return max(1, int(numMessagesInBatch))
}
