package mledger

import "testing"

// TestNoCacheWithoutCursors: entries appended while no cursor is open are
// not cached, since nobody tails them (a later reader starts from the
// bookies, as on Pulsar, which caches on add only with active cursors);
// with a cursor open they are. A topic that was only written to kept up
// to CacheMaxBytes on the heap until it was unloaded: TestAbuse's deaf
// sender's topic held some 3 MiB after the sender had gone.
func TestNoCacheWithoutCursors(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.CacheMaxBytes = 1 << 20
	ml := e.open(e.factory("a", cfg), "uncached")
	cached := func() int {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		return len(ml.cache.entries)
	}
	for i := range 10 {
		if _, err := ml.Append(t.Context(), testMessage(t, 'A', uint64(i), 1, 100), 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := cached(); n != 0 {
		t.Fatalf("%d entries cached with no cursor open, want 0", n)
	}
	if _, err := ml.OpenNonDurableCursor("tail", Latest); err != nil {
		t.Fatal(err)
	}
	if _, err := ml.Append(t.Context(), testMessage(t, 'A', 10, 1, 100), 1); err != nil {
		t.Fatal(err)
	}
	if n := cached(); n != 1 {
		t.Fatalf("%d entries cached with a tailing cursor open, want 1", n)
	}
}
