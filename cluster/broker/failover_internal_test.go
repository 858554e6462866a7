package broker

import (
	"testing"
	"time"

	"github.com/meridian-mq/meridian/global"
	"github.com/meridian-mq/meridian/topology"
)

// TestUnreachableVotes: a region votes only when every one of its brokers
// has seen the active region unreachable since the cut-off at least, and
// for the active region it probes now.
func TestUnreachableVotes(t *testing.T) {
	by := time.UnixMilli(10_000)
	down := func(region, broker string, since int64) global.FailoverView {
		return global.FailoverView{Region: region, Broker: broker, Active: "r1", UnreachableSinceMillis: since}
	}
	for _, tc := range []struct {
		name  string
		views []global.FailoverView
		want  int
	}{
		{"none", nil, 0},
		{"two regions long enough", []global.FailoverView{down("r2", "a", 5_000), down("r3", "a", 10_000)}, 2},
		{"one too recent", []global.FailoverView{down("r2", "a", 5_000), down("r3", "a", 10_001)}, 1},
		{"a broker of r2 still sees it", []global.FailoverView{down("r2", "a", 5_000), down("r2", "b", 0), down("r3", "a", 1)}, 1},
		{"every broker of r2 sees it down", []global.FailoverView{down("r2", "a", 5_000), down("r2", "b", 9_000)}, 1},
		{"a view of another active region", []global.FailoverView{{Region: "r2", Broker: "a", Active: "r3", UnreachableSinceMillis: 1}}, 0},
		{"the active region's own view", []global.FailoverView{down("r1", "a", 1)}, 0},
	} {
		if got := unreachableVotes(tc.views, "r1", by); got != tc.want {
			t.Errorf("%s: %d votes, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFailoverGate: a gated namespace's replicated subscriptions dispatch
// only once confirmed, while the session is valid and after the switch's
// wait; an ungated one always does; a dispatcher that found its gate shut
// is woken by the pass that opens it.
func TestFailoverGate(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newRegionFailover(&Service{}, DefaultFailoverConfig())
	f.now = func() time.Time { return now }
	tn := topology.TopicName{Domain: topology.Persistent, Tenant: "t", Namespace: "ns", Local: "x"}
	other := topology.TopicName{Domain: topology.Persistent, Tenant: "t", Namespace: "other", Local: "x"}

	f.setGates(map[string]failoverGate{"t/ns": {}})
	if !f.mayDispatch(other) {
		t.Fatal("an ungated namespace may not dispatch")
	}
	opened := f.opened()
	if f.mayDispatch(tn) {
		t.Fatal("unconfirmed, without a session: dispatches")
	}
	f.mu.validUntil = now.Add(time.Second)
	f.setGates(map[string]failoverGate{"t/ns": {confirmed: true, notBefore: now.Add(500 * time.Millisecond)}})
	select {
	case <-opened:
		t.Fatal("woken while the wait still shuts the gate")
	default:
	}
	if f.mayDispatch(tn) {
		t.Fatal("dispatches before the switch's wait is over")
	}
	now = now.Add(500 * time.Millisecond)
	f.setGates(map[string]failoverGate{"t/ns": {confirmed: true, notBefore: now}})
	select {
	case <-opened:
	default:
		t.Fatal("the pass that opened the gate woke no one")
	}
	if !f.mayDispatch(tn) {
		t.Fatal("confirmed, in session, after the wait: does not dispatch")
	}
	now = now.Add(500 * time.Millisecond) // validUntil reached: the session lapsed
	if f.mayDispatch(tn) || !f.sessionLapsed() {
		t.Fatal("dispatches on a lapsed session")
	}
}
