package broker

import (
	"testing"
	"time"
)

// TestSyncGap: the next sync starts an Interval less the last sync's
// duration after it, so that a state is written about an Interval after
// the one before was taken, but never sooner than half an Interval.
func TestSyncGap(t *testing.T) {
	r := &replicatedSubs{cfg: ReplicatedSubscriptionsConfig{Interval: time.Second}}
	for _, c := range []struct{ took, want time.Duration }{
		{0, time.Second},
		{300 * time.Millisecond, 700 * time.Millisecond},
		{500 * time.Millisecond, 500 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond},
	} {
		if got := r.syncGap(c.took); got != c.want {
			t.Errorf("after a sync of %v: next in %v, want %v", c.took, got, c.want)
		}
	}
}
