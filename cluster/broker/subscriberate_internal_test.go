package broker

import (
	"testing"
	"time"

	"github.com/meridian-mq/meridian/global"
)

// TestSubscribeLimiter: a consumer has the rate's count at once, then one
// more each period/count; another consumer (another address, name or id)
// has its own; a full bucket is forgotten at the next sweep, and a spent
// one is kept; a changed rate starts afresh; no rate admits everything.
func TestSubscribeLimiter(t *testing.T) {
	var l subscribeLimiter
	now := time.Unix(1000, 0)
	a := consumerIdentity{host: "10.0.0.1", name: "c", id: 0}
	for range 100 {
		if !l.allow(a, now) {
			t.Fatal("no rate: a subscribe refused")
		}
	}
	if n := l.tracked(); n != 0 {
		t.Fatalf("no rate: %d consumers tracked, want 0", n)
	}

	l.set(global.SubscribeRate{SubscribeThrottlingRatePerConsumer: 3, RatePeriodInSecond: 30}, true)
	for i := range 3 {
		if !l.allow(a, now) {
			t.Fatalf("subscribe %d of 3 in the period refused", i+1)
		}
	}
	if l.allow(a, now) {
		t.Fatal("a 4th subscribe in the period admitted")
	}
	for _, other := range []consumerIdentity{{"10.0.0.2", "c", 0}, {"10.0.0.1", "d", 0}, {"10.0.0.1", "c", 1}} {
		if !l.allow(other, now) {
			t.Errorf("%+v refused: it has a rate of its own", other)
		}
	}
	// One more each 10 s, and not a millisecond before.
	if l.allow(a, now.Add(10*time.Second-time.Millisecond)) {
		t.Error("admitted before the bucket held a token again")
	}
	if !l.allow(a, now.Add(10*time.Second)) {
		t.Error("refused once the bucket held a token again")
	}

	// At the next sweep, a period on: the three others have refilled and
	// go; a, spent again at 10 s, is kept.
	l.allow(a, now.Add(10*time.Second))
	if n := l.tracked(); n != 4 {
		t.Fatalf("%d consumers tracked, want 4", n)
	}
	if l.allow(a, now.Add(30*time.Second)) != true {
		t.Fatal("a refused two periods' refill later")
	}
	if n := l.tracked(); n != 1 {
		t.Errorf("after the sweep: %d consumers tracked, want 1 (a, which just subscribed)", n)
	}
	if !l.allow(a, now.Add(30*time.Second)) || l.allow(a, now.Add(30*time.Second)) {
		t.Error("a: want what its bucket refilled to (2 of 3 left), then a refusal")
	}

	// A new rate starts every consumer afresh; the same rate keeps them.
	l.set(global.SubscribeRate{SubscribeThrottlingRatePerConsumer: 3, RatePeriodInSecond: 30}, true)
	if l.allow(a, now.Add(30*time.Second)) {
		t.Error("setting the rate in force again refilled a's bucket")
	}
	l.set(global.SubscribeRate{SubscribeThrottlingRatePerConsumer: 1, RatePeriodInSecond: 1}, true)
	if !l.allow(a, now.Add(30*time.Second)) || l.allow(a, now.Add(30*time.Second)) {
		t.Error("rate 1 per second: want one subscribe, then a refusal")
	}
	l.set(global.SubscribeRate{}, false)
	if !l.allow(a, now.Add(30*time.Second)) || l.tracked() != 0 {
		t.Error("rate removed: a refused, or still tracked")
	}
}

// TestSubscribeLimiterBound: a flood of new identities within one period
// never holds more than maxSubscribeIdentities buckets; a spent identity
// is still refused until the map has to start afresh.
func TestSubscribeLimiterBound(t *testing.T) {
	var l subscribeLimiter
	now := time.Unix(1000, 0)
	l.set(global.SubscribeRate{SubscribeThrottlingRatePerConsumer: 1, RatePeriodInSecond: 60}, true)
	spent := consumerIdentity{host: "10.0.0.1", name: "spent"}
	l.allow(spent, now)
	for i := range maxSubscribeIdentities - 1 {
		l.allow(consumerIdentity{host: "10.0.0.2", id: uint64(i)}, now)
	}
	if n := l.tracked(); n != maxSubscribeIdentities {
		t.Fatalf("%d identities tracked, want %d", n, maxSubscribeIdentities)
	}
	if l.allow(spent, now) {
		t.Fatal("a spent identity admitted while the map has room for it")
	}
	l.allow(consumerIdentity{host: "10.0.0.3"}, now)
	if n := l.tracked(); n != 1 {
		t.Fatalf("a new identity on a full map of spent buckets: %d tracked, want 1 (a fresh map)", n)
	}
}
