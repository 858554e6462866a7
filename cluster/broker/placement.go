package broker

import (
	"context"
	"fmt"
	"slices"
)

// choose returns the least-loaded live broker of the region that is not
// draining and whose id is not in exclude, or ErrNoBrokerAvailable. Load
// is the bundle count of the broker's last load report (none yet counts as
// empty); ties go to the first in key order, so every broker that reads
// the same registrations chooses alike.
func (o *ownership) choose(ctx context.Context, exclude ...string) (LiveBroker, error) {
	brokers, err := liveBrokers(ctx, o.store, o.region)
	if err != nil {
		return LiveBroker{}, err
	}
	best := -1
	for i, b := range brokers {
		if b.Draining || slices.Contains(exclude, b.BrokerID) {
			continue
		}
		if best < 0 || bundleLoad(b) < bundleLoad(brokers[best]) {
			best = i
		}
	}
	if best < 0 {
		return LiveBroker{}, fmt.Errorf("%w in region %s (excluding %v)", ErrNoBrokerAvailable, o.region, exclude)
	}
	return brokers[best], nil
}

// bundleLoad is the bundle count b last reported.
func bundleLoad(b LiveBroker) int {
	if b.Load == nil {
		return 0
	}
	return b.Load.NumBundles
}
