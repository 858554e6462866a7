package loadmgr

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// testBroker is a broker's record for the shedder: bundles given as
// name → message rate (and the same figure in throughput, bytes/s).
func testBroker(id string, reported time.Time, bundles map[string]float64) LiveBroker {
	r := &LoadReport{LastUpdate: reported.UnixMilli(), LastStats: map[string]BundleStats{}}
	for name, rate := range bundles {
		r.Bundles = append(r.Bundles, name)
		r.LastStats[name] = BundleStats{MsgRateIn: rate, MsgThroughputIn: rate}
		r.MsgRateIn += rate
		r.MsgThroughputIn += rate
	}
	slices.Sort(r.Bundles)
	r.NumBundles = len(r.Bundles)
	return LiveBroker{BrokerRecord: BrokerRecord{Owner: Owner{BrokerID: id}, Load: r}}
}

// ratedBundles returns n bundles named prefix0.. with rate each.
func ratedBundles(prefix string, n int, rate float64) map[string]float64 {
	m := map[string]float64{}
	for i := range n {
		m[fmt.Sprintf("%s%02d", prefix, i)] = rate
	}
	return m
}

func testShedConfig() BalanceConfig {
	cfg := DefaultBalanceConfig()
	cfg.ReportInterval = time.Second
	cfg.SheddingInterval = time.Minute
	cfg.SheddingGracePeriod = 10 * time.Minute
	cfg.MinSheddingThroughput = 1
	return cfg
}

func TestShedderPlan(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	hot := ratedBundles("a/ns/small", 5, 10)
	hot["a/ns/hot"] = 1000
	for _, tc := range []struct {
		name    string
		brokers []LiveBroker
		// want checks the moves
		want func(t *testing.T, moves []bundleMove)
	}{
		{
			name: "balanced: nothing moves",
			brokers: []LiveBroker{
				testBroker("b1", now, ratedBundles("x", 4, 100)),
				testBroker("b2", now, ratedBundles("y", 4, 100)),
				testBroker("b3", now, ratedBundles("z", 4, 110)),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 0 {
					t.Fatalf("moves %v, want none", moves)
				}
			},
		},
		{
			name: "a broker with no bundles gets its share",
			brokers: []LiveBroker{
				testBroker("b1", now, ratedBundles("x", 4, 100)),
				testBroker("b2", now, ratedBundles("y", 4, 100)),
				testBroker("b3", now, ratedBundles("z", 4, 100)),
				testBroker("new", now, nil),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 3 {
					t.Fatalf("moves %v, want 3 (12 bundles over 4 brokers)", moves)
				}
				from := map[string]int{}
				for _, m := range moves {
					if m.To != "new" {
						t.Fatalf("move %v, want every move to the new broker", m)
					}
					from[m.From]++
				}
				if len(from) != 3 {
					t.Fatalf("moves %v, want one from each broker", moves)
				}
			},
		},
		{
			name: "idle bundles go to a new broker too",
			brokers: []LiveBroker{
				testBroker("b1", now, ratedBundles("x", 4, 0)),
				testBroker("new", now, nil),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 2 {
					t.Fatalf("moves %v, want 2", moves)
				}
			},
		},
		{
			name: "a donor keeps its busiest bundle",
			brokers: []LiveBroker{
				testBroker("b1", now, map[string]float64{"a/ns/big": 100, "a/ns/small": 10}),
				testBroker("new", now, nil),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 1 || moves[0].Bundle != "a/ns/small" {
					t.Fatalf("moves %v, want a/ns/small to the new broker", moves)
				}
			},
		},
		{
			name: "a hot bundle stays and the others leave its broker",
			brokers: []LiveBroker{
				testBroker("b1", now, hot),
				testBroker("b2", now, ratedBundles("y", 5, 10)),
				testBroker("b3", now, ratedBundles("z", 5, 10)),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) == 0 {
					t.Fatal("no moves off the overloaded broker")
				}
				for _, m := range moves {
					if m.From != "b1" || m.Bundle == "a/ns/hot" || m.To == "b1" {
						t.Fatalf("move %v: want small bundles off b1 only", m)
					}
				}
			},
		},
		{
			name: "an overloaded broker keeps its last bundle",
			brokers: []LiveBroker{
				testBroker("b1", now, map[string]float64{"a/ns/only": 1000}),
				testBroker("b2", now, ratedBundles("y", 3, 1)),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 0 {
					t.Fatalf("moves %v, want none", moves)
				}
			},
		},
		{
			name: "bundles under the minimum throughput stay",
			brokers: []LiveBroker{
				testBroker("b1", now, map[string]float64{"a/ns/hot": 1000, "a/ns/tiny1": 0.5, "a/ns/tiny2": 0.5}),
				testBroker("b2", now, ratedBundles("y", 3, 1)),
			},
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 0 {
					t.Fatalf("moves %v, want none", moves)
				}
			},
		},
		{
			name: "draining brokers take no part",
			brokers: func() []LiveBroker {
				d := testBroker("draining", now, nil)
				d.Draining = true
				return []LiveBroker{testBroker("b1", now, ratedBundles("x", 4, 100)), d}
			}(),
			want: func(t *testing.T, moves []bundleMove) {
				if len(moves) != 0 {
					t.Fatalf("moves %v, want none", moves)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := newShedder(testShedConfig(), func() time.Time { return now })
			tc.want(t, sh.plan(tc.brokers))
		})
	}
}

// TestShedderNoPingPong checks the grace period and that a round after
// moves waits for reports made after them.
func TestShedderNoPingPong(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	cfg := testShedConfig()
	sh := newShedder(cfg, clock)
	hot := ratedBundles("a/ns/small", 5, 10)
	hot["a/ns/hot"] = 1000
	brokers := []LiveBroker{
		testBroker("b1", now, hot),
		testBroker("b2", now, ratedBundles("y", 5, 10)),
	}
	first := sh.plan(brokers)
	if len(first) == 0 {
		t.Fatal("no moves in the first round")
	}
	sh.finished(brokers)

	// The same reports, and then one more from each broker (it may cover
	// the moves): the rounds wait.
	now = now.Add(cfg.SheddingInterval)
	if moves := sh.plan(brokers); len(moves) != 0 {
		t.Fatalf("moves %v on the reports from before the last moves", moves)
	}
	for i := range brokers {
		brokers[i].Load.LastUpdate += cfg.ReportInterval.Milliseconds()
	}
	if moves := sh.plan(brokers); len(moves) != 0 {
		t.Fatalf("moves %v on the first reports after the last moves", moves)
	}

	// The second reports, where the moved bundles made their destination
	// the busiest: they stay, within the grace period.
	moved := map[string]float64{"a/ns/other": 1}
	for _, m := range first {
		moved[m.Bundle] = 500
	}
	brokers = []LiveBroker{
		testBroker("b1", now.Add(2*cfg.ReportInterval), map[string]float64{"a/ns/hot": 100, "a/ns/cold": 1}),
		testBroker("b2", now.Add(2*cfg.ReportInterval), moved),
	}
	second := sh.plan(brokers)
	if len(second) == 0 {
		t.Fatal("no round on the second reports after the moves")
	}
	for _, m := range second {
		if slices.ContainsFunc(first, func(f bundleMove) bool { return f.Bundle == m.Bundle }) {
			t.Fatalf("bundle %s moved again within the grace period", m.Bundle)
		}
	}
	// Reports are compared with the broker's own earlier ones: b2's clock
	// runs an hour behind the leader's and still counts.
	skewed := testBroker("b2", now.Add(-time.Hour), moved)
	sh.finished([]LiveBroker{brokers[0], skewed})
	skewed.Load.LastUpdate += 2 * cfg.ReportInterval.Milliseconds()
	brokers[0].Load.LastUpdate += 2 * cfg.ReportInterval.Milliseconds()
	brokers[1] = skewed

	// Past the grace period the first round's bundles may move again.
	now = now.Add(cfg.SheddingGracePeriod + time.Second)
	if moves := sh.plan(brokers); len(moves) == 0 {
		t.Fatal("no moves after the grace period")
	}
}
