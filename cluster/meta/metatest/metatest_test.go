package metatest

import (
	"errors"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
	"github.com/meridian-mq/meridian/testkit"
)

// The leak check fails this package's run if Shared's member is not closed
// before it.
func TestMain(m *testing.M) { testkit.Main(m) }

func TestSharedIsOneMember(t *testing.T) {
	e := Shared(t)
	if Shared(t) != e {
		t.Fatal("a second Shared started a second member")
	}
	a, b := Dial(t, e.Endpoints()), Dial(t, e.Endpoints())
	key := Prefix(t) + meta.Key("k")
	if _, err := a.Create(t.Context(), key, []byte("v"), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	if kv, err := b.Get(t.Context(), key); err != nil || string(kv.Value) != "v" {
		t.Fatalf("the other client reads %q, %v", kv.Value, err)
	}
}

func TestPrefixIsUniqueAndOneKey(t *testing.T) {
	a, b := Prefix(t), Prefix(t)
	if a == b {
		t.Fatalf("Prefix returned %q twice", a)
	}
	for _, p := range []string{a, b} {
		if !strings.HasPrefix(p, "/test/") || strings.HasSuffix(p, "/") || !strings.HasSuffix(p, "/TestPrefixIsUniqueAndOneKey") {
			t.Fatalf("Prefix = %q, want /test/<n>/<the test's name>", p)
		}
	}
	t.Run("sub", func(t *testing.T) {
		if p := Prefix(t); strings.Count(p, "/") != 3 {
			t.Fatalf("a subtest's prefix %q is more than /test/<n>/<name>", p)
		}
	})
}

// A test may close its own member and client before its cleanups do.
func TestStartClosedEarly(t *testing.T) {
	e := Start(t, FastEmbedConfig())
	s := Dial(t, e.Endpoints())
	if _, err := s.Create(t.Context(), Prefix(t), []byte("v"), meta.NoLease); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), Prefix(t)); !errors.Is(err, meta.ErrClosed) {
		t.Fatalf("Get on a closed client: %v", err)
	}
}
