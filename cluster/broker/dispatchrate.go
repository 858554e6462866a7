package broker

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/meridian-mq/meridian/global"
)

// Dispatch rates, as Pulsar throttles dispatch: a topic's dispatchRate
// limits what all its subscriptions deliver together, and its
// subscriptionDispatchRate what each subscription delivers; both apply. A
// rate counts messages and bytes per ratePeriodInSecond (a dimension of 0
// or less is not limited).
//
// A dispatch round reads no more messages than every limiter allows, and
// none while one of them is spent: the dispatcher then waits until it has
// refilled (dispatchState.throttledUntil). What a round sends is taken
// from every limiter afterwards, whole, so a round may overdraw a limiter
// (a batch, or bytes beyond what was left); the next round waits until
// the overdraft is paid back. So the rate holds over any stretch longer
// than a period, as with Pulsar's token buckets, and a burst of one
// period's worth passes at once.

// dispatchLimiter is one dispatch rate: a token bucket for messages and
// one for bytes, each holding at most one period's worth; nil for a
// dimension not limited. Its zero value limits nothing. It is safe for
// concurrent use: a topic's limiter is shared by its subscriptions'
// dispatchers.
type dispatchLimiter struct {
	mu    sync.Mutex
	msgs  *rate.Limiter
	bytes *rate.Limiter
}

// set applies r from now; ok false (no rate) lifts the limits. A bucket
// keeps its tokens across a change of its rate, and starts full.
func (l *dispatchLimiter) set(r global.DispatchRate, ok bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	period := time.Duration(max(r.RatePeriodInSecond, 1)) * time.Second
	limit := func(lim *rate.Limiter, perPeriod int64) *rate.Limiter {
		if !ok || perPeriod <= 0 {
			return nil
		}
		every, burst := rate.Limit(float64(perPeriod)/period.Seconds()), int(min(perPeriod, math.MaxInt32))
		if lim == nil {
			return rate.NewLimiter(every, burst)
		}
		lim.SetLimitAt(now, every)
		lim.SetBurstAt(now, burst)
		return lim
	}
	l.msgs = limit(l.msgs, r.DispatchThrottlingRateInMsg)
	l.bytes = limit(l.bytes, r.DispatchThrottlingRateInByte)
}

// allowance is how many messages may be dispatched at now (math.MaxInt64:
// no limit), or, when a bucket is spent, how long until both have a whole
// token again.
func (l *dispatchLimiter) allowance(now time.Time) (msgs int64, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	msgs = math.MaxInt64
	for _, lim := range []*rate.Limiter{l.msgs, l.bytes} {
		if lim == nil {
			continue
		}
		tokens := lim.TokensAt(now)
		if tokens < 1 {
			wait = max(wait, time.Duration((1-tokens)/float64(lim.Limit())*float64(time.Second)))
			continue
		}
		if lim == l.msgs {
			msgs = int64(tokens)
		}
	}
	if wait > 0 {
		return 0, wait
	}
	return msgs, 0
}

// take counts msgs messages and bytes bytes dispatched at now. A take
// larger than what a bucket holds empties it and more: the bucket goes
// below zero, and refills from there.
func (l *dispatchLimiter) take(now time.Time, msgs, bytes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range []struct {
		lim *rate.Limiter
		n   int
	}{{l.msgs, msgs}, {l.bytes, bytes}} {
		if t.lim == nil {
			continue
		}
		// ReserveN refuses more than the burst at once: take it in pieces.
		for n := t.n; n > 0; n -= t.lim.Burst() {
			t.lim.ReserveN(now, min(n, t.lim.Burst()))
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

// applyDispatchRates applies the topic's dispatch rates in this region. A
// subscription created meanwhile that missed the change gets it on the
// next pass of the policy loop.
func (t *Topic) applyDispatchRates(eff global.Effective) {
	now := t.svc.clock.Now()
	r, ok := eff.DispatchRateIn(t.svc.cfg.Region)
	t.dispatchRates.topic.set(r, ok, now)
	r, ok = eff.SubscriptionDispatchRateIn(t.svc.cfg.Region)
	t.dispatchRates.mu.Lock()
	t.dispatchRates.perSubscription, t.dispatchRates.perSubscriptionLimits = r, ok
	t.dispatchRates.mu.Unlock()
	for _, s := range t.subscriptions() {
		s.dispatchRate.set(r, ok, now)
	}
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
