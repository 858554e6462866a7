package ledger_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestLedgerIDsUniqueAcrossRegions: two regions create ledgers on one
// metadata store (each under its own prefix, as in production) and never
// hand out the same id, so a message id (ledger, entry) names one entry
// across regions. Each id carries its region's number; a region whose
// counter already handed out ids (ledgers from before region numbers) goes
// on above every one of them. With per-region counters alone, both regions'
// first ledger is 1.
func TestLedgerIDsUniqueAcrossRegions(t *testing.T) {
	e := newEnv(t, 31)
	regions := []struct {
		name   string
		number int
		legacy int64 // ids the region's counter gave out before region numbers
	}{{"east", 1, 5}, {"west", 2, 0}, {"south", ledger.MaxRegionNumber, 0}}
	owner := map[int64]string{}
	for _, r := range regions {
		for _, b := range []string{"b1", "b2", "b3"} {
			e.bookies.AddBookie(r.name + "-" + b)
			if err := ledgertest.Register(t.Context(), e.store, r.name, r.name+"-"+b, "", false); err != nil {
				t.Fatal(err)
			}
		}
		for range r.legacy {
			if _, err := meta.NextID(t.Context(), e.store, ledger.LedgerIDCounterKey(r.name)); err != nil {
				t.Fatal(err)
			}
		}
		cfg := testConfig()
		cfg.Region, cfg.RegionNumber = r.name, r.number
		c, err := ledger.New(cfg, e.store, e.bookies.Client(r.name), testLogger(t), rand.New(rand.NewPCG(31, uint64(r.number))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		prev := r.legacy
		for range 3 {
			w := create(t, c, 3, 3, 2)
			id := w.ID()
			if other, taken := owner[id]; taken {
				t.Fatalf("region %s created ledger %d, which region %s already has", r.name, id, other)
			}
			owner[id] = r.name
			if got := ledger.RegionNumberOf(id); got != r.number {
				t.Errorf("ledger %d of region %s carries region number %d, want %d", id, r.name, got, r.number)
			}
			if id <= prev {
				t.Errorf("region %s: ledger %d after %d: ids must grow within a region", r.name, id, prev)
			}
			if id >= 1<<53 {
				t.Errorf("ledger %d is not exact as a JSON double", id)
			}
			prev = id
		}
	}
}

func TestLedgerIDLayout(t *testing.T) {
	for _, c := range []struct {
		region  int
		counter int64
		want    int64
		err     error
	}{
		{1, 1, 1<<44 | 1, nil},
		{2, 7, 2<<44 | 7, nil},
		{ledger.MaxRegionNumber, 1<<44 - 1, 1<<53 - 1, nil},
		{1, 1 << 44, 0, ledger.ErrLedgerIDsExhausted},
		{1, 0, 0, ledger.ErrLedgerIDsExhausted},
		{0, 1, 0, ledger.ErrInvalidConfig},
		{ledger.MaxRegionNumber + 1, 1, 0, ledger.ErrInvalidConfig},
	} {
		got, err := ledger.LedgerID(c.region, c.counter)
		wrongErr := err != nil
		if c.err != nil {
			wrongErr = !errors.Is(err, c.err)
		}
		if got != c.want || wrongErr {
			t.Errorf("LedgerID(%d, %d) = %d, %v; want %d, %v", c.region, c.counter, got, err, c.want, c.err)
		}
		if err == nil && ledger.RegionNumberOf(got) != c.region {
			t.Errorf("RegionNumberOf(%d) = %d, want %d", got, ledger.RegionNumberOf(got), c.region)
		}
	}
	if ledger.RegionNumberOf(5) != 0 {
		t.Errorf("a legacy id carries region number %d", ledger.RegionNumberOf(5))
	}
}
