package loadmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
)

// choose returns the broker that should own a bundle placed now: the
// least-loaded live broker that is not draining and whose id is not in
// exclude, as Pulsar's modular load manager ranks them:
//  1. fewest bundles owned now, counted from the region's ownership keys
//     (so a burst of placements sees its own earlier ones, which no load
//     report has shown yet);
//  2. then the lowest message rate in and out, from its load report (a
//     broker without one counts as idle);
//  3. then at random, so that brokers equal in both share new bundles.
//
// When no broker qualifies it fails with ErrNoBrokerAvailable, which is
// also ServiceNotReady (a lookup's answer).
func (o *ownership) choose(ctx context.Context, exclude ...string) (LiveBroker, error) {
	brokers, err := liveBrokers(ctx, o.store, o.region)
	if err != nil {
		return LiveBroker{}, fmt.Errorf("%w: %v", wire.ErrServiceNotReady, err)
	}
	owned, err := o.bundlesByOwner(ctx)
	if err != nil {
		return LiveBroker{}, err
	}
	var best []LiveBroker
	for _, b := range brokers {
		if b.Draining || slices.Contains(exclude, b.BrokerID) {
			continue
		}
		if len(best) > 0 {
			switch c := comparePlacement(b, best[0], owned); {
			case c > 0:
				continue
			case c < 0:
				best = best[:0]
			}
		}
		best = append(best, b)
	}
	if len(best) == 0 {
		return LiveBroker{}, fmt.Errorf("%w: %w in region %s (excluding %v)", wire.ErrServiceNotReady, ErrNoBrokerAvailable, o.region, exclude)
	}
	o.rand.Lock()
	i := o.rand.r.IntN(len(best))
	o.rand.Unlock()
	return best[i], nil
}

// comparePlacement orders a before b (negative) when a should rather take
// the next bundle: fewer bundles owned, then a lower message rate.
func comparePlacement(a, b LiveBroker, owned map[string]int) int {
	if c := owned[a.BrokerID] - owned[b.BrokerID]; c != 0 {
		return c
	}
	ra, rb := messageRate(a.Load), messageRate(b.Load)
	switch {
	case ra < rb:
		return -1
	case ra > rb:
		return 1
	}
	return 0
}

// messageRate is a load report's messages in and out per second; nil is
// idle.
func messageRate(r *LoadReport) float64 {
	if r == nil {
		return 0
	}
	return r.MsgRateIn + r.MsgRateOut
}

// bundlesByOwner counts the region's ownership keys by owner id. A key
// whose value does not decode counts for nobody.
func (o *ownership) bundlesByOwner(ctx context.Context) (map[string]int, error) {
	kvs, _, err := o.store.List(ctx, meta.Prefix(meta.RegionKey(o.region, "owners")))
	if err != nil {
		return nil, fmt.Errorf("%w: list the owners of region %s: %v", wire.ErrServiceNotReady, o.region, err)
	}
	owned := make(map[string]int)
	for _, kv := range kvs {
		var w Owner
		if _, err := meta.DecodeJSON(kv.Value, 1, &w); err == nil {
			owned[w.BrokerID]++
		}
	}
	return owned, nil
}

// placeLeastLoaded creates key, the ownership key of an unowned bundle, for
// the broker choose picks, under that broker's lease (self's is l). When
// that lease has just ended, it chooses again without that broker.
// Placements through this broker are serialised (o.place), so that each
// choose counts the ones before it. meta.ErrExists means another placement
// won the race.
func (o *ownership) placeLeastLoaded(ctx context.Context, key string, l meta.Lease) (Owner, error) {
	select {
	case o.place <- struct{}{}:
	case <-ctx.Done():
		return Owner{}, fmt.Errorf("%w: waiting to place a bundle: %v", wire.ErrServiceNotReady, ctx.Err())
	}
	defer func() { <-o.place }()
	// Lookups of one bundle that arrived together queue here: the first
	// places it, and the others need only read it.
	if _, err := o.store.Get(ctx, key); err == nil {
		return Owner{}, fmt.Errorf("placed meanwhile: %w", meta.ErrExists)
	} else if !errors.Is(err, meta.ErrNotFound) {
		return Owner{}, fmt.Errorf("%w: read owner of %s: %v", wire.ErrServiceNotReady, key, err)
	}
	var gone []string
	for {
		c, err := o.choose(ctx, gone...)
		if err != nil {
			return Owner{}, err
		}
		lease := c.Lease
		if c.BrokerID == o.self.BrokerID {
			lease = l.ID()
		}
		owner, err := o.createOwner(ctx, key, c.Owner, lease)
		if !errors.Is(err, meta.ErrLeaseNotFound) {
			return owner, err
		}
		if c.BrokerID == o.self.BrokerID {
			return Owner{}, fmt.Errorf("%w: this broker's session ended while placing a bundle", wire.ErrServiceNotReady)
		}
		gone = append(gone, c.BrokerID)
	}
}
