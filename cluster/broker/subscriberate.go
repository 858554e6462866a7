package broker

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// Subscribe rate: Pulsar's subscribeRate, at most so many SUBSCRIBEs per
// ratePeriodInSecond from one consumer to one topic (global.SubscribeRate
// says how it resolves). A consumer is Pulsar's ConsumerIdentifier: its
// client's address, without the port, its name and its id. pulsar-client-go
// numbers a client's consumers from 0, so the identity is stable across a
// process that crash-loops and comes back with the same consumer name,
// and across a consumer's reconnects, which is what the rate is for; a
// process that subscribes new consumers over one client gets a new
// identity each time, as on Pulsar.
//
// A SUBSCRIBE beyond the rate is refused with NotAllowed and Pulsar's
// words; the client's Subscribe returns the error, and a consumer that was
// reconnecting retries with its backoff. A SUBSCRIBE for a consumer the
// connection already holds (the client asking again after a timeout) is
// not counted: Pulsar answers it before its topic's limiter sees it.
//
// Each identity has a token bucket (golang.org/x/time/rate) that holds the
// rate's count and refills it over the period: the count passes at once,
// then one more each period/count. Pulsar's limiter instead starts a new
// window every period; the rate over any period is the same. The buckets
// run on the broker's clock.
//
// The map of buckets is bounded by what subscribed lately: at most once a
// period, the buckets that have refilled are dropped. A full bucket admits
// what a new one would, so dropping it changes no answer, and a bucket
// refills within one period of its last subscribe. Pulsar clears its map
// every period instead, which also forgets the spent buckets. A flood of
// new identities within one period (a client that subscribes under a new
// consumer id each time) is bounded by maxSubscribeIdentities: a new
// identity that finds the map full sweeps it at once, and when that frees
// nothing, the map starts afresh, as Pulsar's does each period. The
// memory stays bounded; the rate of the identities forgotten so restarts.

// maxSubscribeIdentities bounds the buckets a topic's subscribe rate
// holds, at about 200 bytes each.
const maxSubscribeIdentities = 1 << 16

// errSubscribeRate is the refusal, in Pulsar's words.
var errSubscribeRate = &wire.ServerError{Code: pb.ServerError_NotAllowedError, Message: "Subscribe limited by subscribe rate limit per consumer."}

// consumerIdentity is whom a subscribe rate counts: Pulsar's
// ConsumerIdentifier.
type consumerIdentity struct {
	host string // the client's address, without the port
	name string
	id   uint64
}

// subscribeLimiter is one topic's subscribe rate. The zero value limits
// nothing. It is safe for concurrent use: every connection's SUBSCRIBE to
// the topic takes from it.
type subscribeLimiter struct {
	mu sync.Mutex
	// rate is the rate in force; one that limits nothing is none.
	rate global.SubscribeRate
	// consumers are the buckets of the identities that subscribed lately.
	consumers map[consumerIdentity]*rate.Limiter
	// swept is when consumers were last rid of their full buckets.
	swept time.Time
}

// set makes r the rate (ok false: none). A change of rate starts every
// consumer afresh, as Pulsar's does; the rate in force keeps its buckets.
func (l *subscribeLimiter) set(r global.SubscribeRate, ok bool) {
	if !ok {
		r = global.SubscribeRate{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == l.rate {
		return
	}
	l.rate, l.consumers = r, nil
}

// allow takes one subscribe of id at now, and reports whether the rate
// admits it.
func (l *subscribeLimiter) allow(id consumerIdentity, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.rate.Limited() {
		return true
	}
	period := time.Duration(l.rate.RatePeriodInSecond) * time.Second
	if now.Sub(l.swept) >= period {
		l.sweepLocked(now)
		l.swept = now
	}
	lim := l.consumers[id]
	if lim == nil {
		if len(l.consumers) >= maxSubscribeIdentities {
			l.sweepLocked(now)
			if len(l.consumers) >= maxSubscribeIdentities {
				l.consumers = nil
			}
		}
		n := l.rate.SubscribeThrottlingRatePerConsumer
		lim = rate.NewLimiter(rate.Limit(float64(n)/period.Seconds()), n)
		if l.consumers == nil {
			l.consumers = make(map[consumerIdentity]*rate.Limiter)
		}
		l.consumers[id] = lim
	}
	return lim.AllowN(now, 1)
}

// sweepLocked drops the buckets that are full at now.
func (l *subscribeLimiter) sweepLocked(now time.Time) {
	for id, lim := range l.consumers {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.consumers, id)
		}
	}
}

// tracked is how many identities the limiter holds a bucket for.
func (l *subscribeLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.consumers)
}

// admitSubscribe takes a SUBSCRIBE of consumer id, named name, on this
// connection from t's subscribe rate: errSubscribeRate when it is spent.
// A non-persistent topic has no subscribe rate, as on Pulsar (only its
// persistent topics hold a SubscribeRateLimiter).
func (c *conn) admitSubscribe(t *Topic, name string, id uint64) error {
	if t.name.Domain == topology.NonPersistent {
		return nil
	}
	host := c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !t.subscribeRate.allow(consumerIdentity{host: host, name: name, id: id}, t.svc.clock.Now()) {
		return errSubscribeRate
	}
	return nil
}
