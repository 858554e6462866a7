package ledger_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
)

const region = "test-region"

// env is one in-memory world: a metadata store, a set of bookies and the
// clients made on them. Everything it starts is stopped by t.Cleanup.
type env struct {
	t       testing.TB
	store   *meta.Memory
	bookies *ledgertest.Cluster
	seed    uint64
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("LEDGER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newEnv makes a store and the named bookies, registered with no rack.
func newEnv(t testing.TB, seed uint64, bookieIDs ...string) *env {
	t.Helper()
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{t: t, store: store, bookies: ledgertest.NewCluster(), seed: seed}
	for _, id := range bookieIDs {
		e.addBookie(id)
	}
	return e
}

func (e *env) addBookie(id string) {
	e.t.Helper()
	e.bookies.AddBookie(id)
	if err := ledgertest.Register(context.Background(), e.store, region, id, "", false); err != nil {
		e.t.Fatal(err)
	}
}

func testConfig() ledger.Config {
	cfg := ledger.DefaultConfig(region, 1)
	cfg.AddTimeout = 200 * time.Millisecond
	cfg.ReadTimeout = 200 * time.Millisecond
	cfg.MetaTimeout = time.Second
	cfg.RetryInterval = 50 * time.Millisecond
	cfg.ExplicitLACInterval = 10 * time.Millisecond
	cfg.LACPollWait = 100 * time.Millisecond
	cfg.MaxInFlightEntries = 64
	return cfg
}

// client makes a ledger client that sees the bookies as the named client.
func (e *env) client(name string, cfg ledger.Config) *ledger.Client {
	e.t.Helper()
	c, err := ledger.New(cfg, e.store, e.bookies.Client(name), testLogger(e.t).With("client", name), rand.New(rand.NewPCG(e.seed, uint64(len(name)))))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func payload(i int) []byte {
	b := make([]byte, 8+i%97)
	for j := range b {
		b[j] = byte(i*31 + j)
	}
	copy(b, []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
	return b
}
