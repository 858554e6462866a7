package bookie

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
)

// Benchmarks run on t.TempDir() unless MERIDIAN_BENCH_DIR names a directory
// on the disk to measure. Every figure is with fdatasync on.
//
//	go test -run '^$' -bench . -benchtime 5s ./cluster/bookie/
func benchDir(b *testing.B) string {
	if d := os.Getenv("MERIDIAN_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bookie-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// processWriteBytes is the bytes this process has caused to be written to
// storage (/proc/self/io write_bytes), or -1 where that is unavailable.
func processWriteBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// randomPayload is incompressible, as compressed or encrypted messages are:
// a compressible one would flatter pebble, which compresses its blocks.
func randomPayload(size int) []byte {
	p := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(p)
	return p
}

func reportLatencies(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds())
	}
	b.ReportMetric(pct(0.50), prefix+"p50-µs")
	b.ReportMetric(pct(0.99), prefix+"p99-µs")
	b.ReportMetric(pct(0.999), prefix+"p999-µs")
}

// BenchmarkAdd measures adds through a real bookie over loopback: one
// pipelined connection with `inflight` adds outstanding, as a ledger writer
// keeps them. It reports throughput, add latency percentiles, how many
// adds one journal sync carried, and the disk bytes written per payload
// byte (the journal, which holds the entries, plus pebble's index flushes).
func BenchmarkAdd(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, inflight := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("size=%dKiB/inflight=%d", size>>10, inflight), func(b *testing.B) {
				benchAdd(b, size, inflight)
			})
		}
	}
}

// BenchmarkAddFailpointEndpoint is BenchmarkAdd's 1 KiB cases on a bookie
// whose failpoint endpoint is on and has nothing armed: the journal runs on
// a FaultFS, which must cost nothing measurable.
func BenchmarkAddFailpointEndpoint(b *testing.B) {
	for _, inflight := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("size=1KiB/inflight=%d", inflight), func(b *testing.B) {
			cfg := testConfig(b, benchDir(b), nil)
			cfg.FailpointEndpoint = "127.0.0.1:0"
			benchAddConfig(b, cfg, 1<<10, inflight)
		})
	}
}

func benchAdd(b *testing.B, size, inflight int) {
	benchAddConfig(b, testConfig(b, benchDir(b), nil), size, inflight)
}

func benchAddConfig(b *testing.B, cfg Config, size, inflight int) {
	cfg.JournalFileSize = 256 << 20
	bk := startBookie(b, cfg)
	c := dial(b, bk.Addr())
	ctx := context.Background()
	payload := randomPayload(size)
	var next atomic.Int64
	lat := make([][]time.Duration, inflight)
	syncsBefore := histCount(bk.m.journalBatch)
	writtenBefore := processWriteBytes()
	b.SetBytes(int64(size))
	b.ResetTimer()
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e := next.Add(1) - 1
				if e >= int64(b.N) {
					return
				}
				start := time.Now()
				err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: e, LastAddConfirmed: e - 1, Payload: payload})
				if err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	elapsed := b.Elapsed()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "adds/s")
	reportLatencies(b, "", slices.Concat(lat...))
	if syncs := histCount(bk.m.journalBatch) - syncsBefore; syncs > 0 {
		b.ReportMetric(float64(b.N)/float64(syncs), "adds/sync")
	}
	if w := processWriteBytes(); w >= 0 && writtenBefore >= 0 {
		b.ReportMetric(float64(w-writtenBefore)/float64(int64(b.N)*int64(size)), "disk-B/payload-B")
	}
}

// BenchmarkAddVsCeiling measures the ratio BenchmarkAdd and
// BenchmarkDiskCeiling are compared by, on a disk shared with other work
// whose speed drifts within minutes: each iteration is one slice of the
// ceiling (64 MiB appended in 4 MiB fdatasynced writes) and then one slice
// of 64 KiB adds through a bookie (64 MiB, 256 in flight) on the same disk,
// so the two see the same conditions; it reports each one's MB/s over all
// slices and their ratio. Run it with -benchtime Nx (N slices of each).
func BenchmarkAddVsCeiling(b *testing.B) {
	const (
		slice    = 64 << 20
		perSync  = 4 << 20
		size     = 64 << 10
		inflight = 256
	)
	dir := benchDir(b)
	f, err := OSFS{}.OpenFile(filepath.Join(dir, "ceiling.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cfg := testConfig(b, filepath.Join(dir, "bookie"), nil)
	cfg.JournalFileSize = 256 << 20
	bk := startBookie(b, cfg)
	c := dial(b, bk.Addr())
	ctx := context.Background()
	buf := randomPayload(perSync)
	payload := buf[:size]
	var ceilingTime, addTime time.Duration
	var entry atomic.Int64
	b.SetBytes(2 * slice)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		for range slice / perSync {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		ceilingTime += time.Since(start)

		start = time.Now()
		first := entry.Load()
		entry.Add(slice / size)
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		for range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= slice/size {
						return
					}
					e := first + i
					if err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: e, LastAddConfirmed: e - 1, Payload: payload}); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err := failed.Load(); err != nil {
			b.Fatal(err)
		}
		addTime += time.Since(start)
	}
	b.StopTimer()
	ceiling := float64(b.N) * slice / 1e6 / ceilingTime.Seconds()
	add := float64(b.N) * slice / 1e6 / addTime.Seconds()
	b.ReportMetric(ceiling, "ceiling-MB/s")
	b.ReportMetric(add, "add-MB/s")
	b.ReportMetric(add/ceiling, "add/ceiling")
}

// BenchmarkAddPaced offers adds of a fixed size at a fixed rate (open loop, as
// producers do) instead of as fast as the bookie acknowledges them, and
// reports the latency at that rate, measured from when each add was due, so
// that a stall delays the adds behind it in the figures too. Beside each
// rate's bookie figures (bookie-p50-µs...) are the floor's (disk-p50-µs...):
// the same offered load on a bare file with the ideal group commit (each
// round writes everything due so far in one write and fdatasyncs it),
// measured the same way. The two take turns, pacedRound writes at a time,
// and each one's percentiles are over all its turns: a shared disk's
// stalls, which set the tail, then fall on both alike (run back to back,
// one or the other took the tail of the disk's worse minute). The rates,
// in MB/s, come from MERIDIAN_BENCH_RATES (comma-separated), default
// 10,20,30: set them around half of BenchmarkAdd's best 64 KiB figure on
// the disk measured. The size, in KiB, comes from MERIDIAN_BENCH_SIZE,
// default 64: 20 is what a producer batching 1 KiB messages every
// millisecond at 20,000 msg/s sends. b.N is the writes of each side.
func BenchmarkAddPaced(b *testing.B) {
	size := 64
	if env := os.Getenv("MERIDIAN_BENCH_SIZE"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil || n < 1 || n > 8<<10 {
			b.Fatalf("MERIDIAN_BENCH_SIZE: want KiB in 1..8192, got %q", env)
		}
		size = n
	}
	rates := []float64{10, 20, 30}
	if env := os.Getenv("MERIDIAN_BENCH_RATES"); env != "" {
		rates = rates[:0]
		for f := range strings.SplitSeq(env, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || r <= 0 {
				b.Fatalf("MERIDIAN_BENCH_RATES: bad rate %q", f)
			}
			rates = append(rates, r)
		}
	}
	for _, rate := range rates {
		b.Run(fmt.Sprintf("size=%dKiB/rate=%gMBps", size, rate), func(b *testing.B) {
			benchPaced(b, size<<10, rate)
		})
	}
}

// pacedRound is how many writes one side of BenchmarkAddPaced makes in a
// turn: a second or two at the rates it is run at.
const pacedRound = 1000

func benchPaced(b *testing.B, size int, rateMBps float64) {
	interval := time.Duration(float64(time.Second) * float64(size) / (rateMBps * 1e6))
	payload := randomPayload(size)
	disk := newPacedDisk(b, payload)
	bookie := newPacedBookie(b, payload)
	var diskLat, bookieLat []time.Duration
	var diskCPU, bookieCPU time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += pacedRound {
		n := min(pacedRound, b.N-done)
		cpu := processCPU()
		diskLat = append(diskLat, disk.run(b, n, interval)...)
		diskCPU += processCPU() - cpu
		cpu = processCPU()
		bookieLat = append(bookieLat, bookie.run(b, n, interval)...)
		bookieCPU += processCPU() - cpu
	}
	b.StopTimer()
	reportLatencies(b, "disk-", diskLat)
	reportLatencies(b, "bookie-", bookieLat)
	// The process's CPU time per write in each side's turns. The bookie's
	// includes its client's (the same code in every run), so compare it
	// across runs, not with the disk's.
	b.ReportMetric(float64(diskCPU.Microseconds())/float64(b.N), "disk-cpu-µs/op")
	b.ReportMetric(float64(bookieCPU.Microseconds())/float64(b.N), "bookie-cpu-µs/op")
	// The journal's own write+fdatasync time, to tell the disk's share of
	// the bookie's latency from the rest (queueing behind a sync, the
	// network, the scheduler): an upper bound, from the histogram's buckets.
	b.ReportMetric(histQuantile(bookie.bk.m.journalSync, 0.99)*1e6, "sync-p99-µs")
}

// pacedBookie is BenchmarkAddPaced's bookie side: adds to one ledger of a
// bookie on the disk measured, over loopback TCP.
type pacedBookie struct {
	bk      *testBookie
	c       *bkproto.Conn
	payload []byte
	next    int64 // the next entry id
}

func newPacedBookie(b *testing.B, payload []byte) *pacedBookie {
	cfg := testConfig(b, benchDir(b), nil)
	cfg.JournalFileSize = 256 << 20
	bk := startBookie(b, cfg)
	return &pacedBookie{bk: bk, c: dial(b, bk.Addr()), payload: payload}
}

// run offers n adds, one every interval from now, and returns their
// latencies from when each was due.
func (p *pacedBookie) run(b *testing.B, n int, interval time.Duration) []time.Duration {
	var (
		mu     sync.Mutex
		lat    = make([]time.Duration, 0, n)
		wg     sync.WaitGroup
		failed atomic.Value
	)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the offered load, not waiting for a condition
		}
		e := p.next
		p.next++
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.c.AddEntry(context.Background(), bkproto.AddRequest{LedgerID: 1, EntryID: e, LastAddConfirmed: e - 1, Payload: p.payload}); err != nil {
				failed.Store(err)
				return
			}
			d := time.Since(due)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	return lat
}

// histQuantile is the upper bound of the bucket holding quantile q.
func histQuantile(h interface{ Write(*dtoMetric) error }, q float64) float64 {
	var m dtoMetric
	if err := h.Write(&m); err != nil {
		panic(err)
	}
	hist := m.GetHistogram()
	want := uint64(math.Ceil(q * float64(hist.GetSampleCount())))
	for _, bkt := range hist.GetBucket() {
		if bkt.GetCumulativeCount() >= want {
			return bkt.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// pacedDisk is BenchmarkAddPaced's floor: a bare file on the disk
// measured, written with the ideal group commit.
type pacedDisk struct {
	f       File
	payload []byte
	buf     []byte
}

func newPacedDisk(b *testing.B, payload []byte) *pacedDisk {
	f, err := OSFS{}.OpenFile(filepath.Join(benchDir(b), "paced.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return &pacedDisk{f: f, payload: payload}
}

// run writes n payloads, one due every interval from now, each round
// writing everything due so far in one write and one fdatasync, and
// returns their latencies from when each was due.
func (p *pacedDisk) run(b *testing.B, n int, interval time.Duration) []time.Duration {
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for next := 0; next < n; {
		due := start.Add(time.Duration(next) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // pacing the offered load
		}
		// Everything due by now goes in this round.
		k := min(n-next, max(1, int(time.Since(start)/interval)+1-next))
		p.buf = p.buf[:0]
		for range k {
			p.buf = append(p.buf, p.payload...)
		}
		if _, err := p.f.Write(p.buf); err != nil {
			b.Fatal(err)
		}
		if err := p.f.Sync(); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		for i := next; i < next+k; i++ {
			lat = append(lat, now.Sub(start.Add(time.Duration(i)*interval)))
		}
		next += k
	}
	return lat
}

func histCount(h interface{ Write(*dtoMetric) error }) uint64 {
	var m dtoMetric
	if err := h.Write(&m); err != nil {
		panic(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// BenchmarkDiskCeiling is the ceiling BenchmarkAdd is measured against: a
// plain append + fdatasync loop on the same disk, one sync per `perSync`
// bytes, with nothing else in the way.
func BenchmarkDiskCeiling(b *testing.B) {
	for _, perSync := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("perSync=%dKiB", perSync>>10), func(b *testing.B) {
			f, err := OSFS{}.OpenFile(filepath.Join(benchDir(b), "ceiling.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := randomPayload(perSync)
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(perSync))
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
			reportLatencies(b, "", lat)
		})
	}
}

// BenchmarkStoreApply measures the pebble side of the ack path alone: the
// index insert that follows each journal sync. Only the index goes to
// pebble, so its cost no longer grows with the entry size.
func BenchmarkStoreApply(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			m, _ := newMetrics(nil)
			dir := benchDir(b)
			st, err := openStore(filepath.Join(dir, "index"), 8<<20, testLogger(b), m, &failpointSwitch{}, OSFS{}, filepath.Join(dir, "journal"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.close()
			payload := randomPayload(size)
			const batch = 64
			recs := make([]*record, batch)
			results := make([]opResult, batch)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for j := range n {
					e := int64(i + j)
					recs[j] = &record{kind: recAdd, ledgerID: 1, entryID: e, lac: e - 1, payload: payload,
						loc: entryLoc{file: 1, off: e * int64(size+64), size: uint32(size + 64)}}
				}
				if err := st.apply(recs[:n], results[:n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
