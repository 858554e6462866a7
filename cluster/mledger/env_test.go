package mledger

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mq/meridian/cluster/ledger"
	"github.com/meridian-mq/meridian/cluster/ledger/ledgertest"
	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/cluster/wire"
	"github.com/meridian-mq/meridian/cluster/wire/pb"
)

const region = "test-region"

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("MLEDGER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// countingStore counts the writes (Create, Update) that reach a store and
// their bytes.
type countingStore struct {
	meta.Store
	writes, bytes atomic.Int64
}

func (s *countingStore) Create(ctx context.Context, key string, value []byte, lease meta.LeaseID) (int64, error) {
	s.writes.Add(1)
	s.bytes.Add(int64(len(key) + len(value)))
	return s.Store.Create(ctx, key, value, lease)
}

func (s *countingStore) Update(ctx context.Context, key string, value []byte, modRev int64) (int64, error) {
	s.writes.Add(1)
	s.bytes.Add(int64(len(key) + len(value)))
	return s.Store.Update(ctx, key, value, modRev)
}

// env is one in-memory world: a metadata store, bookies, a clock, and the
// factories made on them. Everything it starts is stopped by t.Cleanup.
type env struct {
	t       testing.TB
	store   meta.Store
	bookies *ledgertest.Cluster
	// clock is the factories' clock: it moves only when a test advances
	// it, and with it the housekeeping tickers and the cursors'
	// persistence timers.
	clock *clockwork.FakeClock
}

func newEnv(t testing.TB) *env {
	t.Helper()
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return newEnvOn(t, mem, 3)
}

func newEnvOn(t testing.TB, store meta.Store, nBookies int) *env {
	e := &env{t: t, store: store, bookies: ledgertest.NewCluster(), clock: clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	for i := range nBookies {
		id := "bk" + string(rune('a'+i))
		e.bookies.AddBookie(id)
		if err := ledgertest.Register(context.Background(), store, region, id, "", false); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func ledgerTestConfig() ledger.Config {
	cfg := ledger.DefaultConfig(region, 1)
	cfg.AddTimeout = time.Second
	cfg.ReadTimeout = time.Second
	cfg.MetaTimeout = 5 * time.Second
	cfg.RetryInterval = 20 * time.Millisecond
	cfg.ExplicitLACInterval = 5 * time.Millisecond
	cfg.LACPollWait = 200 * time.Millisecond
	cfg.MaxInFlightEntries = 2000
	cfg.MaxInFlightBytes = 256 << 20
	return cfg
}

func testConfig() Config {
	cfg := DefaultConfig(region)
	cfg.EnsembleSize, cfg.WriteQuorum, cfg.AckQuorum = 3, 2, 2
	cfg.MinLedgerRolloverTime = 0
	cfg.CursorPersistInterval = 5 * time.Millisecond
	cfg.HousekeepingInterval = time.Hour // tests trim and roll by hand
	cfg.MetaTimeout = 5 * time.Second
	// Keep everything unless a test is about retention: with no cursor,
	// Pulsar's default (0) deletes every consumed ledger at rollover.
	cfg.RetentionTime, cfg.RetentionSize = -1, -1
	return cfg
}

// ledgerClient makes a ledger client that sees the bookies as the named
// client (one per simulated process).
func (e *env) ledgerClient(name string) *ledger.Client {
	e.t.Helper()
	c, err := ledger.New(ledgerTestConfig(), e.store, e.bookies.Client(name), testLogger(e.t).With("client", name), rand.New(rand.NewPCG(1, uint64(len(name)))))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// factory makes a factory as the named process.
func (e *env) factory(name string, cfg Config) *Factory {
	e.t.Helper()
	cfg.Clock = e.clock
	f, err := NewFactory(cfg, e.ledgerClient(name), e.store, testLogger(e.t).With("process", name))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.Close(ctx)
	})
	return f
}

func (e *env) open(f *Factory, topic string) *ManagedLedger {
	e.t.Helper()
	ml, err := f.Open(e.t.Context(), topic)
	if err != nil {
		e.t.Fatalf("open %s: %v", topic, err)
	}
	return ml
}

// testMessage is a Pulsar message (0x0e01 magic, checksum, metadata)
// whose payload records who wrote it, its sequence number and how many
// messages its entry claims to hold.
func testMessage(t testing.TB, writer byte, seq uint64, n int, pad int) []byte {
	t.Helper()
	md := pb.MessageMetadata_builder{
		ProducerName: proto.String("p"),
		SequenceId:   proto.Uint64(seq),
		PublishTime:  proto.Uint64(seq),
	}.Build()
	payload := make([]byte, 13+pad)
	payload[0] = writer
	binary.BigEndian.PutUint64(payload[1:], seq)
	binary.BigEndian.PutUint32(payload[9:], uint32(n))
	msg, err := wire.AppendMessage(nil, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// decoded is what a test reads back from a stored entry.
type decoded struct {
	writer byte
	seq    uint64
	n      int
	index  int64
	ts     int64
}

func decode(t testing.TB, e Entry) decoded {
	t.Helper()
	_, msg, err := e.Split()
	if err != nil {
		t.Fatalf("entry %v: %v", e.Position, err)
	}
	md, err := e.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	_, payload, err := wire.SplitMessage(msg)
	if err != nil {
		t.Fatalf("entry %v: message: %v", e.Position, err)
	}
	return decoded{
		writer: payload[0],
		seq:    binary.BigEndian.Uint64(payload[1:]),
		n:      int(binary.BigEndian.Uint32(payload[9:])),
		index:  int64(md.GetIndex()),
		ts:     int64(md.GetBrokerTimestamp()),
	}
}

// readAll reads every entry of the topic through a fresh non-durable cursor.
func readAll(t testing.TB, ml *ManagedLedger) []Entry {
	t.Helper()
	c, err := ml.OpenNonDurableCursor("readall-"+time.Now().String(), Earliest)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var out []Entry
	for {
		es, err := c.Read(t.Context(), 100)
		if err != nil {
			t.Fatalf("read all: %v", err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
	}
}

// appendInBackground appends total entries of one message each (with pad
// bytes of padding), one at a time, on a goroutine of its own, and reports
// the first error, or nil once all are confirmed.
func appendInBackground(ctx context.Context, t testing.TB, ml *ManagedLedger, total, pad int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range total {
			if _, err := ml.Append(ctx, testMessage(t, 'A', uint64(i), 1, pad), 1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}
