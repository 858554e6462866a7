package global

import (
	"sync"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/topology"
)

// testRegionNumbers: regions asking at once through two clients each get
// one number, distinct from every other region's, which later asks return
// unchanged; a region past the bound is refused and nothing is stored for
// it.
func testRegionNumbers(t *testing.T, e env) {
	ctx := ctxT(t)
	regions := []string{"east", "west", "south", "north"}
	got := make([][2]int, len(regions))
	var wg sync.WaitGroup
	for i, r := range regions {
		for j, s := range []*Store{e.a, e.b} {
			wg.Go(func() {
				n, err := s.RegionNumber(ctx, r)
				if err != nil {
					t.Errorf("region %s: %v", r, err)
				}
				got[i][j] = n
			})
		}
	}
	wg.Wait()
	seen := map[int]string{}
	for i, r := range regions {
		n := got[i][0]
		if got[i][1] != n || n < 1 || n > topology.MaxRegionNumber {
			t.Fatalf("region %s got numbers %v from its two clients", r, got[i])
		}
		if other, dup := seen[n]; dup {
			t.Fatalf("regions %s and %s share number %d", other, r, n)
		}
		seen[n] = r
		if again := must(e.b.RegionNumber(ctx, r)).ok(t); again != n {
			t.Fatalf("region %s's number changed from %d to %d", r, n, again)
		}
	}

	_, err := e.a.RegionNumber(ctx, "bad/name")
	wantErr(t, "bad region name", err, ErrInvalidName)

	// The counter at the bound: the next region cannot be numbered.
	counter := e.a.key(regionNumberCounterKey)
	kv := must(e.ma.Get(ctx, counter)).ok(t)
	full := must(meta.EncodeJSON(1, map[string]int64{"next": topology.MaxRegionNumber + 1})).ok(t)
	must(e.ma.Update(ctx, counter, full, kv.ModRevision)).ok(t)
	_, err = e.a.RegionNumber(ctx, "one-too-many")
	wantErr(t, "past the bound", err, ErrInvalidCluster)
	if _, err := e.ma.Get(ctx, e.a.key(kindRegionNumbers, "one-too-many")); err == nil {
		t.Fatal("a region past the bound has a number stored")
	}
}
