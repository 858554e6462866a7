package global

import (
	"context"
	"errors"
	"fmt"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// Region numbers (key region-numbers/<region>, and the counter
// region-number-counter) give each region a small number, once, that its
// ledger ids carry in their high bits so that message ids are unique
// across regions (see cluster/ledger's LedgerID). A number is assigned by
// the first process of the region that asks, and never changes or is
// reused: the key is created only if absent, and a number comes from a
// counter that only grows. Two processes of one region that race both
// take a number from the counter; the one whose create wins fixes the
// region's number, and the loser's number is skipped for good.
const (
	kindRegionNumbers      = "region-numbers"
	regionNumberCounterKey = "region-number-counter"
)

// regionNumberRecord is a region's number as stored, with "v":1.
type regionNumberRecord struct {
	Number int `json:"number"`
}

// RegionNumber returns region's number, assigning the next one if the
// region has none yet. A region past topology.MaxRegionNumber cannot be
// numbered: ErrInvalidCluster.
func (s *Store) RegionNumber(ctx context.Context, region string) (int, error) {
	if err := validName("region", region); err != nil {
		return 0, err
	}
	key := s.key(kindRegionNumbers, region)
	rec, _, err := getRecord[regionNumberRecord](ctx, s, key)
	if err == nil {
		return checkRegionNumber(region, rec.Number)
	}
	if !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	nctx, cancel := s.opCtx(ctx)
	next, err := meta.NextID(nctx, s.st, s.key(regionNumberCounterKey))
	cancel()
	if err != nil {
		return 0, fail("assign a region number", s.key(regionNumberCounterKey), err)
	}
	if _, err := checkRegionNumber(region, int(next)); err != nil {
		return 0, err
	}
	_, err = s.create(ctx, key, regionNumberRecord{Number: int(next)})
	if errors.Is(err, ErrExists) {
		rec, _, err = getRecord[regionNumberRecord](ctx, s, key)
		if err != nil {
			return 0, err
		}
		return checkRegionNumber(region, rec.Number)
	}
	if err != nil {
		return 0, err
	}
	return int(next), nil
}

func checkRegionNumber(region string, n int) (int, error) {
	if n < 1 || n > topology.MaxRegionNumber {
		return 0, fmt.Errorf("%w: region %s would be number %d; region numbers run from 1 to %d", ErrInvalidCluster, region, n, topology.MaxRegionNumber)
	}
	return n, nil
}
