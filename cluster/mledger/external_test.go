package mledger

import (
	"errors"
	"slices"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestCreateExternalCursorNeverMoves: the owner creates a replication
// cursor once; creating it again leaves it where its writer moved it; a
// writer opening WithoutCreate gets ErrNoCursor until it exists; and the
// listing names only the cursors of the prefix, of that topic.
func TestCreateExternalCursorNeverMoves(t *testing.T) {
	mem, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	ctx := t.Context()
	const topic, name = "t", "meridian.repl.west"
	if _, err := OpenExternalCursor(ctx, mem, region, topic, name, Position{}, WithoutCreate()); !errors.Is(err, ErrNoCursor) {
		t.Fatalf("open WithoutCreate of a missing cursor: %v, want ErrNoCursor", err)
	}
	if created, err := CreateExternalCursor(ctx, mem, region, topic, name, Position{3, 4}); err != nil || !created {
		t.Fatalf("create: %v, %v", created, err)
	}
	c, err := OpenExternalCursor(ctx, mem, region, topic, name, Position{}, WithoutCreate())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MarkDeletePosition(); got != (Position{3, 4}) {
		t.Fatalf("opened at %v, want 3:4", got)
	}
	if err := c.MarkDelete(ctx, Position{5, 0}); err != nil {
		t.Fatal(err)
	}
	if created, err := CreateExternalCursor(ctx, mem, region, topic, name, Position{}); err != nil || created {
		t.Fatalf("create again: %v, %v; want no error and nothing created", created, err)
	}
	if got := storedMarkDelete(t, mem, topic, name); got != (Position{5, 0}) {
		t.Fatalf("after a second create the cursor is at %v, want 5:0", got)
	}
	for _, other := range []struct{ topic, name string }{{topic, "sub"}, {"t2", "meridian.repl.east"}, {topic, "meridian.repl.south"}} {
		if _, err := CreateExternalCursor(ctx, mem, region, other.topic, other.name, Position{}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := ExternalCursorNames(ctx, mem, region, topic, "meridian.repl.")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"meridian.repl.south", "meridian.repl.west"}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want %v", names, want)
	}
}
