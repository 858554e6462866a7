package replicator

import (
	"context"
	"math"
	"time"

	"github.com/jonboulle/clockwork"
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
//
// A rate relative to the publish rate (Pulsar's PIP-52) is raised by the
// topic's publish rate at every refresh, keeping the tokens the buckets
// hold. Pulsar's broker reads that rate off the topic it serves; the
// replicator runs apart from the broker, so it measures the rate at which
// the entries it reads were published (published): the current publish
// rate when the task keeps up, and while it catches up the rate its
// backlog was written at, which it then gains on by the configured rate.
type dispatchLimiter struct {
	policy  func() (global.DispatchRate, bool) // the current rate; false: none
	refresh time.Duration
	clock   clockwork.Clock

	checked   time.Time // when policy was last read
	current   global.DispatchRate
	limited   bool
	msgs      *rate.Limiter // nil: messages are not limited
	bytes     *rate.Limiter // nil: bytes are not limited
	published publishRate
}

// dispatchLimiter is the limiter of t's sends, reading t's topic's rate out
// of the worker's region.
func (t *task) dispatchLimiter() *dispatchLimiter {
	w := t.w
	return newDispatchLimiter(w.cfg.Clock, w.cfg.ScanInterval, func() (global.DispatchRate, bool) {
		eff, ok := w.effective(t.id.Topic)
		if !ok {
			// The namespace is gone: the worker stops the task soon.
			return global.DispatchRate{}, false
		}
		return eff.ReplicatorDispatchRateFrom(w.cfg.Region)
	})
}

func newDispatchLimiter(clock clockwork.Clock, refresh time.Duration, policy func() (global.DispatchRate, bool)) *dispatchLimiter {
	return &dispatchLimiter{policy: policy, refresh: refresh, clock: clock}
}

// relative reports whether the rate last read is relative to the publish
// rate: the task observes its entries' publish times only then, so the
// measured window starts when such a rate is first read.
func (l *dispatchLimiter) relative() bool { return l.limited && l.current.RelativeToPublishRate }

// observe counts an entry read from the topic, sent or not, published at
// publishedMs (unix milliseconds; 0, unknown, is not counted) with msgs
// messages in size bytes: the publish rate a relative rate adds is
// measured from these.
func (l *dispatchLimiter) observe(publishedMs int64, msgs, size int) {
	if publishedMs > 0 {
		l.published.add(publishedMs, msgs, size)
	}
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
		now := l.clock.Now()
		r := lim.ReserveN(now, chunk)
		delay := r.DelayFrom(now)
		if delay > l.refresh {
			// Give the tokens back and look at the rate again after
			// refresh: it may have changed meanwhile.
			r.CancelAt(now)
			delay, chunk = l.refresh, 0
		}
		if err := sleep(ctx, l.clock, delay); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// read reads the rate when refresh has passed since the last read,
// rebuilds the buckets when it changed, and otherwise sets them to the rate
// now (a relative rate follows the publish rate measured now).
func (l *dispatchLimiter) read() {
	now := l.clock.Now()
	if !l.checked.IsZero() && now.Sub(l.checked) < l.refresh {
		return
	}
	l.checked = now
	r, limited := l.policy()
	var msgsPerSecond, bytesPerSecond float64
	if limited && r.RelativeToPublishRate {
		msgsPerSecond, bytesPerSecond = l.published.perSecond()
	}
	period := float64(r.RatePeriodInSecond)
	msgs, bytes := r.PerPeriod(msgsPerSecond, bytesPerSecond)
	if limited == l.limited && r == l.current {
		if r.RelativeToPublishRate { // an absolute rate stays as it was built
			retune(l.msgs, now, msgs, period)
			retune(l.bytes, now, bytes, period)
		}
		return
	}
	l.current, l.limited = r, limited
	l.msgs, l.bytes = nil, nil
	if limited && r.DispatchThrottlingRateInMsg > 0 {
		l.msgs = bucketOf(msgs, period)
	}
	if limited && r.DispatchThrottlingRateInByte > 0 {
		l.bytes = bucketOf(bytes, period)
	}
}

// bucketOf is a full bucket of perPeriod tokens refilled at perPeriod per
// period seconds.
func bucketOf(perPeriod, period float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perPeriod/period), burstOf(perPeriod))
}

// retune sets bucket b (if any) to hold perPeriod tokens, refilled at
// perPeriod per period seconds, keeping the tokens it holds.
func retune(b *rate.Limiter, now time.Time, perPeriod, period float64) {
	if b == nil {
		return
	}
	b.SetLimitAt(now, rate.Limit(perPeriod/period))
	b.SetBurstAt(now, burstOf(perPeriod))
}

func burstOf(perPeriod float64) int { return int(min(perPeriod, math.MaxInt32)) }

// publishWindow is how much publish time publishRate averages over.
const publishWindow = 10 // seconds

// publishRate is the rate at which a topic's entries were published, from
// the publish times and sizes of the entries read: their messages and
// bytes per second of publish time over the newest publishWindow seconds
// of it (fewer while fewer have been seen), in one-second buckets.
type publishRate struct {
	buckets       [publishWindow]publishBucket
	first, newest int64 // the publish seconds of the first and newest entry; first 0: none yet
}

type publishBucket struct {
	second       int64 // the unix second it counts, or 0
	msgs, nbytes int64
}

// add counts an entry of msgs messages in size bytes published at
// publishedMs (unix milliseconds). An entry older than the window is left
// out; publish times only grow per topic, but a new owner's clock may lag.
func (p *publishRate) add(publishedMs int64, msgs, size int) {
	sec := publishedMs / 1000
	if p.first == 0 {
		p.first, p.newest = sec, sec
	}
	if sec <= p.newest-publishWindow {
		return
	}
	p.newest = max(p.newest, sec)
	b := &p.buckets[sec%publishWindow]
	if b.second != sec {
		*b = publishBucket{second: sec}
	}
	b.msgs += int64(msgs)
	b.nbytes += int64(size)
}

// perSecond is the publish rate over the window, in messages and bytes
// per second: 0 before any entry.
func (p *publishRate) perSecond() (msgs, bytes float64) {
	if p.first == 0 {
		return 0, 0
	}
	var m, b int64
	for _, k := range p.buckets {
		if k.second > p.newest-publishWindow {
			m, b = m+k.msgs, b+k.nbytes
		}
	}
	span := float64(min(publishWindow, p.newest-p.first+1))
	return float64(m) / span, float64(b) / span
}

// sleep waits d on clock, or until ctx ends.
func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.Chan():
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
