package mledger

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig("r").Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"no region", func(c *Config) { c.Region = "" }},
		{"no clock", func(c *Config) { c.Clock = nil }},
		{"Qa above Qw", func(c *Config) { c.AckQuorum = 3 }},
		{"Qw above E", func(c *Config) { c.WriteQuorum, c.AckQuorum = 3, 2 }},
		{"no entries", func(c *Config) { c.MaxEntriesPerLedger = 0 }},
		{"tiny ledgers", func(c *Config) { c.MaxSizePerLedger = 100 }},
		{"min age above max", func(c *Config) { c.MinLedgerRolloverTime = 5 * time.Hour }},
		{"negative persist interval", func(c *Config) { c.CursorPersistInterval = -1 }},
		{"no ranges", func(c *Config) { c.MaxPersistedAckRanges = 0 }},
		{"negative cache", func(c *Config) { c.CacheMaxBytes = -1 }},
		{"no housekeeping", func(c *Config) { c.HousekeepingInterval = 0 }},
		{"empty foreign prefix", func(c *Config) { c.ForeignCursorPrefixes = []string{""} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig("r")
			tc.mut(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestOpenTwiceAndCursorNames(t *testing.T) {
	e := newEnv(t)
	f := e.factory("a", testConfig())
	ml := e.open(f, "twice")
	if _, err := f.Open(t.Context(), "twice"); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second open in one factory: %v", err)
	}
	if _, err := ml.OpenCursor(t.Context(), "sub", Latest); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.OpenCursor(t.Context(), "sub", Latest); !errors.Is(err, ErrCursorExists) {
		t.Fatalf("second cursor of one name: %v", err)
	}
	if _, err := ml.OpenNonDurableCursor("sub", Latest); !errors.Is(err, ErrCursorExists) {
		t.Fatalf("non-durable cursor with a durable one's name: %v", err)
	}
	if err := ml.DeleteCursor(t.Context(), "meridian.repl.x"); !errors.Is(err, ErrCursorOwnedElsewhere) {
		t.Fatalf("deleting a foreign cursor: %v", err)
	}
	if err := ml.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 0, 1, 0), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	// Closing forgot the topic: it opens again.
	e.open(f, "twice")
}

// TestRedeliveryAndSkip drives a real cursor through the operations the
// model test checks on the bare state: individual acks leave holes, Rewind
// redelivers exactly the unacked, Skip consumes without delivering.
func TestRedeliveryAndSkip(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.MaxEntriesPerLedger = 4
	ml := e.open(e.factory("a", cfg), "redeliver")
	c, err := ml.OpenCursor(t.Context(), "sub", Earliest)
	if err != nil {
		t.Fatal(err)
	}
	var ps []Position
	for i := range 12 {
		p, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 0), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	es, err := c.Read(t.Context(), 8)
	if err != nil || len(es) != 8 {
		t.Fatalf("read %d, %v", len(es), err)
	}
	if err := c.Ack(ps[0], ps[1], ps[3], ps[4], ps[6]); err != nil {
		t.Fatal(err)
	}
	if c.MarkDeletePosition() != ps[1] {
		t.Fatalf("mark-delete %v, want %v", c.MarkDeletePosition(), ps[1])
	}
	if err := c.Rewind(); err != nil {
		t.Fatal(err)
	}
	es, err = c.Read(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []Position
	for _, en := range es {
		got = append(got, en.Position)
	}
	want := []Position{ps[2], ps[5], ps[7], ps[8], ps[9], ps[10], ps[11]}
	if !slices.Equal(got, want) {
		t.Fatalf("redelivered %v, want %v", got, want)
	}
	if n, err := c.Skip(2); err != nil || n != 2 {
		t.Fatalf("skip: %d %v", n, err)
	}
	// Skipping 2 and 5 joins the acked 3, 4 and 6: mark-delete at 6.
	if c.MarkDeletePosition() != ps[6] || c.Backlog() != 5 {
		t.Fatalf("after skip: mark-delete %v backlog %d", c.MarkDeletePosition(), c.Backlog())
	}
}
