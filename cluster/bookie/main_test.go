package bookie

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type testBookie struct {
	*Bookie
	cfg Config
	reg *prometheus.Registry
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("BOOKIE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func testConfig(t testing.TB, dir string, store meta.Store) Config {
	cfg := DefaultConfig()
	cfg.Region = "test-region"
	cfg.ID = "bookie-1"
	cfg.Rack = "rack-a"
	cfg.DataDir = dir
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.Meta = store
	cfg.GCInterval = 0         // tests call CollectGarbage themselves
	cfg.CompactionInterval = 0 // and compact themselves
	cfg.JournalFileSize = 1 << 20
	cfg.IndexCacheSize = 8 << 20
	cfg.Logger = testLogger(t)
	return cfg
}

func startBookie(t testing.TB, cfg Config) *testBookie {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start bookie: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return &testBookie{Bookie: b, cfg: cfg, reg: reg}
}

func dial(t testing.TB, addr string) *bkproto.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := bkproto.Dial(ctx, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func payloadOf(ledger, entry int64, size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(ledger*31 + entry*7 + int64(i))
	}
	return p
}

func mustAdd(t testing.TB, ctx context.Context, c *bkproto.Conn, ledger, entry int64, size int) {
	t.Helper()
	if err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: ledger, EntryID: entry, LastAddConfirmed: entry - 1,
		Payload: payloadOf(ledger, entry, size)}); err != nil {
		t.Fatalf("add %d:%d: %v", ledger, entry, err)
	}
}

func mustRead(t testing.TB, ctx context.Context, c *bkproto.Conn, ledger, entry int64, size int) bkproto.Entry {
	t.Helper()
	e, err := c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: ledger, EntryID: entry})
	if err != nil {
		t.Fatalf("read %d:%d: %v", ledger, entry, err)
	}
	if want := payloadOf(ledger, entry, size); string(e.Payload) != string(want) {
		t.Fatalf("read %d:%d: wrong payload (%d bytes)", ledger, entry, len(e.Payload))
	}
	return e
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

type atomicBool = atomic.Bool
type atomicInt = atomic.Int64

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	switch {
	case pb.Counter != nil:
		return pb.Counter.GetValue()
	case pb.Gauge != nil:
		return pb.Gauge.GetValue()
	}
	panic("not a counter or gauge")
}

type dtoMetric = dto.Metric
