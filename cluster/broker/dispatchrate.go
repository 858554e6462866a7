package broker

import (
	"sync"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// Dispatch rates, as Pulsar throttles dispatch: a topic's dispatchRate
// limits what all its subscriptions deliver together, and its
// subscriptionDispatchRate what each subscription delivers; both apply. A
// rate counts messages and bytes per ratePeriodInSecond (a dimension of 0
// or less is not limited).
//
// A dispatch round takes, when it is planned, the messages it may read
// from every limiter (the least any of them holds, and no more than the
// consumers' permits), each limiter's in one step (reserve), and none
// while one of them is spent: the dispatcher then waits until it has
// refilled (dispatchState.throttledUntil). When the round ends, it gives
// back what it did not send and takes what it sent beyond that (the
// messages of a batch beyond the estimate), and the bytes it sent. Taking
// before the read, in one step, keeps the subscriptions that share a
// topic's limiter from reading the same tokens; a round may still
// overdraw a bucket (a batch, or bytes), and the next round waits until
// the overdraft is paid back. So the rate
// holds over any stretch longer than a period, and a burst of one period's
// worth passes at once.
//
// A rate relative to the publish rate (relativeToPublishRate, Pulsar's
// PIP-52) is raised by the topic's publish rate: each limited dimension
// allows its configured count plus what the topic stored in a period, at
// the rate measured between passes of the policy loop (publishRateMeter),
// every 5 s, as Pulsar raises it by the publish rate of its last stats
// update. A consumer so keeps up with the producers and drains its backlog
// at the configured rate at most.

// bucket is a token bucket that may go below zero and be given tokens
// back: golang.org/x/time/rate's Limiter does neither simply (its
// reservations can be cancelled, not partly returned).
type bucket struct {
	perSecond, size float64
	tokens          float64
	at              time.Time // when tokens was last brought up to date
}

// refill brings tokens up to now, at most to size.
func (b *bucket) refill(now time.Time) {
	if now.After(b.at) {
		b.tokens = min(b.size, b.tokens+now.Sub(b.at).Seconds()*b.perSecond)
		b.at = now
	}
}

// dispatchLimiter is one dispatch rate: a bucket for messages and one for
// bytes, each holding at most one period's worth; nil for a dimension not
// limited. Its zero value limits nothing. It is safe for concurrent use: a
// topic's limiter is shared by its subscriptions' dispatchers.
type dispatchLimiter struct {
	mu    sync.Mutex
	msgs  *bucket
	bytes *bucket
}

// set applies r from now; ok false (no rate) lifts the limits. A bucket
// starts full, and keeps its tokens across a change of its rate.
func (l *dispatchLimiter) set(r global.DispatchRate, ok bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := time.Duration(max(r.RatePeriodInSecond, 1)) * time.Second
	limit := func(b *bucket, perPeriod int64) *bucket {
		if !ok || perPeriod <= 0 {
			return nil
		}
		if b == nil {
			b = &bucket{tokens: float64(perPeriod), at: now}
		}
		b.refill(now)
		b.perSecond, b.size = float64(perPeriod)/period.Seconds(), float64(perPeriod)
		b.tokens = min(b.tokens, b.size)
		return b
	}
	l.msgs = limit(l.msgs, r.DispatchThrottlingRateInMsg)
	l.bytes = limit(l.bytes, r.DispatchThrottlingRateInByte)
}

// reserve takes up to want messages from the limiter at now (all it
// holds, if fewer; want itself if it limits no messages), in one step
// under its lock, so that the subscriptions sharing a topic's limiter never
// take the same tokens. When a bucket is spent it takes nothing and says
// how long until both hold a whole token again.
func (l *dispatchLimiter) reserve(now time.Time, want int64) (got int64, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	got = want
	for _, b := range []*bucket{l.msgs, l.bytes} {
		if b == nil {
			continue
		}
		b.refill(now)
		if b.tokens < 1 {
			wait = max(wait, time.Duration((1-b.tokens)/b.perSecond*float64(time.Second)))
			continue
		}
		if b == l.msgs {
			got = min(got, int64(b.tokens))
		}
	}
	if wait > 0 {
		return 0, wait
	}
	if l.msgs != nil {
		l.msgs.tokens -= float64(got)
	}
	return got, 0
}

// take counts msgs messages and bytes bytes dispatched at now; a negative
// count gives tokens back (never above a full bucket).
func (l *dispatchLimiter) take(now time.Time, msgs, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range []struct {
		b *bucket
		n int64
	}{{l.msgs, msgs}, {l.bytes, bytes}} {
		if t.b != nil {
			t.b.refill(now)
			t.b.tokens = min(t.b.size, t.b.tokens-float64(t.n))
		}
	}
}

// topicDispatchRates are a loaded topic's dispatch rates, set by
// applyPolicies: the topic's own, which its subscriptions' deliveries
// count against together, and the rate each subscription's own limiter
// follows.
type topicDispatchRates struct {
	topic dispatchLimiter

	mu                    sync.Mutex
	perSubscription       global.DispatchRate
	perSubscriptionLimits bool
}

// applyDispatchRates applies the topic's dispatch rates in this region,
// a relative one raised by the publish rate measured now. A subscription
// created meanwhile that missed the change gets it on the next pass of
// the policy loop.
func (t *Topic) applyDispatchRates(eff global.Effective) {
	now := t.svc.clock.Now()
	published := t.published.measure(now, t.in.msgs.Load(), t.in.bytes.Load())
	r, ok := eff.DispatchRateIn(t.svc.cfg.Region)
	t.dispatchRates.topic.set(published.raise(r), ok, now)
	r, ok = eff.SubscriptionDispatchRateIn(t.svc.cfg.Region)
	r = published.raise(r)
	t.dispatchRates.mu.Lock()
	t.dispatchRates.perSubscription, t.dispatchRates.perSubscriptionLimits = r, ok
	t.dispatchRates.mu.Unlock()
	for _, s := range t.subscriptions() {
		s.dispatchRate.set(r, ok, now)
	}
}

// measuredRate is a topic's publish rate as measured, in messages and
// bytes a second.
type measuredRate struct{ msgs, bytes float64 }

// raise returns r raised by the publish rate when r is relative to it
// (global.DispatchRate.PerPeriod).
func (p measuredRate) raise(r global.DispatchRate) global.DispatchRate {
	msgs, bytes := r.PerPeriod(p.msgs, p.bytes)
	r.DispatchThrottlingRateInMsg, r.DispatchThrottlingRateInByte = int64(msgs), int64(bytes)
	return r
}

// publishRateMeter measures a topic's publish rate from its stored
// counters, over windows of at least publishRateWindow: the policy loop's
// passes (every 5 s, and on each change of the global configuration,
// which may follow each other closely).
type publishRateMeter struct {
	mu          sync.Mutex
	at          time.Time // when msgs and bytes were read; zero before the first
	msgs, bytes int64
	last        measuredRate // over the last whole window
}

const publishRateWindow = time.Second

// measure returns the rate over the window that ends at now, given the
// counters then, or the last window's when less than publishRateWindow
// has passed.
func (m *publishRateMeter) measure(now time.Time, msgs, bytes int64) measuredRate {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() {
		m.at, m.msgs, m.bytes = now, msgs, bytes
		return m.last
	}
	if elapsed := now.Sub(m.at); elapsed >= publishRateWindow {
		m.last = measuredRate{msgs: float64(msgs-m.msgs) / elapsed.Seconds(), bytes: float64(bytes-m.bytes) / elapsed.Seconds()}
		m.at, m.msgs, m.bytes = now, msgs, bytes
	}
	return m.last
}

// subscriptionRates are the limiters a new subscription of t counts its
// deliveries against: the topic's, and its own, set to the topic's
// subscriptionDispatchRate.
func (t *Topic) subscriptionRates(own *dispatchLimiter) []*dispatchLimiter {
	t.dispatchRates.mu.Lock()
	r, ok := t.dispatchRates.perSubscription, t.dispatchRates.perSubscriptionLimits
	t.dispatchRates.mu.Unlock()
	own.set(r, ok, t.svc.clock.Now())
	return []*dispatchLimiter{&t.dispatchRates.topic, own}
}
