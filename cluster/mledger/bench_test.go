package mledger

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

var flagBenchBookies = flag.String("mledger.bookies", "real", "bookies for BenchmarkAppend: real (TCP bookies with fsync, embedded etcd; needs -tags realbookies) or mem (ledgertest)")

// realBenchWorld starts real bookies; set by bench_real_test.go.
var realBenchWorld func(b *testing.B) *benchWorld

// benchWorld is what BenchmarkAppend writes through: a ledger client and a
// metadata store, on real or in-memory bookies.
type benchWorld struct {
	store  meta.Store
	client *ledger.Client
}

func benchLedgerConfig() ledger.Config {
	cfg := ledger.DefaultConfig(region, 1)
	cfg.MaxInFlightEntries = 2000
	cfg.MaxInFlightBytes = 256 << 20
	cfg.ExplicitLACInterval = 5 * time.Millisecond
	return cfg
}

func newBenchWorld(b *testing.B) *benchWorld {
	if *flagBenchBookies == "mem" {
		e := newEnv(b)
		c, err := ledger.New(benchLedgerConfig(), e.store, e.bookies.Client("bench"), testLogger(b), rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return &benchWorld{store: e.store, client: c}
	}
	if realBenchWorld == nil {
		b.Skip("real bookies need -tags realbookies (it keeps cluster/bookie out of the default build of these tests)")
	}
	return realBenchWorld(b)
}

func benchMessage(size int) []byte {
	md := pb.MessageMetadata_builder{ProducerName: new("bench"), SequenceId: new(uint64(1)), PublishTime: new(uint64(1))}.Build()
	payload := make([]byte, size)
	rand.NewChaCha8([32]byte{7}).Read(payload)
	msg, err := wire.AppendMessage(nil, md, payload)
	if err != nil {
		panic(err)
	}
	return msg[:size:size] // the whole entry is size bytes, as for the raw add
}

// BenchmarkAppend compares appends through the managed ledger with raw
// ledger adds, same client, same quorum, same entry size, 1,000 in flight.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 3s ./cluster/mledger/ [-mledger.bookies=mem]
func BenchmarkAppend(b *testing.B) {
	w := newBenchWorld(b)
	const inFlight = 1000
	for _, q := range [][3]int{{1, 1, 1}, {3, 3, 2}} {
		for _, size := range []int{1 << 10, 64 << 10} {
			msg := benchMessage(size)
			name := fmt.Sprintf("%d-%d-%d/%dKiB", q[0], q[1], q[2], size>>10)
			b.Run(name+"/raw", func(b *testing.B) {
				wr, err := w.client.Create(context.Background(), q[0], q[1], q[2], ledger.Groups{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer wr.Close(context.Background())
				b.SetBytes(int64(size))
				window := make([]*ledger.AddFuture, 0, inFlight)
				b.ResetTimer()
				for range b.N {
					if len(window) == inFlight {
						if _, err := window[0].Result(); err != nil {
							b.Fatal(err)
						}
						window = window[1:]
					}
					f, err := wr.Add(context.Background(), msg)
					if err != nil {
						b.Fatal(err)
					}
					window = append(window, f)
				}
				for _, f := range window {
					if _, err := f.Result(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
			b.Run(name+"/mledger", func(b *testing.B) {
				cfg := DefaultConfig(region)
				cfg.EnsembleSize, cfg.WriteQuorum, cfg.AckQuorum = q[0], q[1], q[2]
				cfg.HousekeepingInterval = time.Hour
				f, err := NewFactory(cfg, w.client, w.store, testLogger(b))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close(context.Background())
				ml, err := f.Open(context.Background(), fmt.Sprintf("bench-%s-%d", name, b.N))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				window := make([]*AppendFuture, 0, inFlight)
				b.ResetTimer()
				for range b.N {
					if len(window) == inFlight {
						if _, err := window[0].Result(); err != nil {
							b.Fatal(err)
						}
						window = window[1:]
					}
					fut, err := ml.AppendAsync(context.Background(), msg, 1, nil)
					if err != nil {
						b.Fatal(err)
					}
					window = append(window, fut)
				}
				for _, fut := range window {
					if _, err := fut.Result(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkAppendInterleaved measures the same pairs as BenchmarkAppend,
// but alternates rounds of raw adds and managed-ledger appends (each round
// 2,000 entries, 1,000 in flight) on the same client, so that a shared
// machine's drifting load hits both sides alike. It reports each side's
// entries/s over all rounds and, as ml/raw, the median over the pairs of
// back-to-back rounds of their ratio: a disk stall during one round skews
// one pair, not the figure. b.N counts rounds of each.
//
//	go test -run '^$' -bench 'BenchmarkAppendInterleaved$' -benchtime 10x ./cluster/mledger/ [-tags realbookies]
func BenchmarkAppendInterleaved(b *testing.B) { benchAppendInterleaved(b, DefaultConfig(region)) }

// BenchmarkAppendInterleavedRollover is BenchmarkAppendInterleaved with a
// rollover every 1,000 entries (two per round), no minimum ledger age, and
// Pulsar's default retention (0, and no cursor): each rollover also lets
// the ledger before go, so the managed side pays for ledger creation, the
// list writes and the deletions of retention as a busy topic does.
//
//	go test -run '^$' -bench BenchmarkAppendInterleavedRollover -benchtime 10x ./cluster/mledger/ [-tags realbookies]
func BenchmarkAppendInterleavedRollover(b *testing.B) {
	cfg := DefaultConfig(region)
	cfg.MaxEntriesPerLedger = 1000
	cfg.MinLedgerRolloverTime = 0
	benchAppendInterleaved(b, cfg)
}

// benchAppendInterleaved runs BenchmarkAppendInterleaved's rounds with the
// managed ledger configured by base (its quorum is set per sub-benchmark).
func benchAppendInterleaved(b *testing.B, base Config) {
	w := newBenchWorld(b)
	const inFlight, round = 1000, 2000
	for _, q := range [][3]int{{1, 1, 1}, {3, 3, 2}} {
		for _, size := range []int{1 << 10, 64 << 10} {
			msg := benchMessage(size)
			b.Run(fmt.Sprintf("%d-%d-%d/%dKiB", q[0], q[1], q[2], size>>10), func(b *testing.B) {
				ctx := context.Background()
				wr, err := w.client.Create(ctx, q[0], q[1], q[2], ledger.Groups{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer wr.Close(ctx)
				cfg := base
				cfg.EnsembleSize, cfg.WriteQuorum, cfg.AckQuorum = q[0], q[1], q[2]
				cfg.HousekeepingInterval = time.Hour
				f, err := NewFactory(cfg, w.client, w.store, testLogger(b))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close(ctx)
				ml, err := f.Open(ctx, fmt.Sprintf("interleaved-%d-%d-%d-%d-%d", q[0], q[1], q[2], size, b.N))
				if err != nil {
					b.Fatal(err)
				}
				var rawTime, mlTime time.Duration
				ratios := make([]float64, 0, b.N)
				raw := func() {
					start := time.Now()
					window := make([]*ledger.AddFuture, 0, inFlight)
					for range round {
						if len(window) == inFlight {
							if _, err := window[0].Result(); err != nil {
								b.Fatal(err)
							}
							window = window[1:]
						}
						fut, err := wr.Add(ctx, msg)
						if err != nil {
							b.Fatal(err)
						}
						window = append(window, fut)
					}
					for _, fut := range window {
						if _, err := fut.Result(); err != nil {
							b.Fatal(err)
						}
					}
					rawTime += time.Since(start)
				}
				managed := func() {
					start := time.Now()
					window := make([]*AppendFuture, 0, inFlight)
					for range round {
						if len(window) == inFlight {
							if _, err := window[0].Result(); err != nil {
								b.Fatal(err)
							}
							window = window[1:]
						}
						fut, err := ml.AppendAsync(ctx, msg, 1, nil)
						if err != nil {
							b.Fatal(err)
						}
						window = append(window, fut)
					}
					for _, fut := range window {
						if _, err := fut.Result(); err != nil {
							b.Fatal(err)
						}
					}
					mlTime += time.Since(start)
				}
				b.SetBytes(int64(2 * round * size))
				b.ResetTimer()
				for i := range b.N {
					raw0, ml0 := rawTime, mlTime
					// Alternate which side goes first, too.
					if i%2 == 0 {
						raw()
						managed()
					} else {
						managed()
						raw()
					}
					ratios = append(ratios, float64(rawTime-raw0)/float64(mlTime-ml0))
				}
				b.StopTimer()
				slices.Sort(ratios)
				b.ReportMetric(float64(b.N*round)/rawTime.Seconds(), "raw-entries/s")
				b.ReportMetric(float64(b.N*round)/mlTime.Seconds(), "ml-entries/s")
				b.ReportMetric(ratios[len(ratios)/2], "ml/raw")
			})
		}
	}
}
