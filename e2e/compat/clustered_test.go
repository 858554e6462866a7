package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-mq/meridian/cluster/meta"
)

// TestRewriteHosts: the suites' host:port pairs become the region's, and a
// pair the runner does not know is an error rather than a test that
// dials docker's DNS names.
func TestRewriteHosts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(clusteredFiles[0], `const broker1URL = "pulsar://broker-1:6650"; const broker2LookupURL = "broker-2:8080"`)
	write(clusteredFiles[1], `URL: "pulsar://broker-1:6600,broker-1:6650"`)
	write(clusteredFiles[2], `adminURL: "http://broker-1:8080"`)
	if err := rewriteHosts(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		clusteredFiles[0]: `const broker1URL = "pulsar://localhost:6650"; const broker2LookupURL = "localhost:8082"`,
		clusteredFiles[1]: `URL: "pulsar://localhost:6600,localhost:6650"`,
		clusteredFiles[2]: `adminURL: "http://localhost:8080"`,
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s: %s, want %s", name, b, want)
		}
	}
	write(clusteredFiles[2], `adminURL: "http://broker-2:9090"`)
	if err := rewriteHosts(dir); err == nil || !strings.Contains(err.Error(), "broker-2:9090") {
		t.Errorf("an unknown host:port: %v, want an error naming it", err)
	}
}

func TestClusteredRunExpr(t *testing.T) {
	c := clusteredTest{test: "TestSuite", sub: []string{"TestTopicUnload", "direct.Connection"}}
	if got, want := c.runExpr(), `^TestSuite$/^TestTopicUnload$/^direct\.Connection$`; got != want {
		t.Errorf("runExpr = %s, want %s", got, want)
	}
	if got := (clusteredTest{test: "TestA"}).runExpr(); got != "^TestA$" {
		t.Errorf("runExpr = %s", got)
	}
	if got := c.name(); got != "TestSuite/TestTopicUnload/direct.Connection" {
		t.Errorf("name = %s", got)
	}
}

// TestWatchMoves: a passing unload test whose bundle never changed broker
// is turned into a failure; one whose bundle moved keeps its pass.
func TestWatchMoves(t *testing.T) {
	ctx := t.Context()
	store, err := meta.NewMemory(meta.DefaultMemoryConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	key := meta.RegionKey(clusteredRegion, "owners", "public", "default", "0x00000000_0x40000000")
	owner := func(id string) []byte {
		v, err := meta.EncodeJSON(1, map[string]string{"brokerId": id})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rev, err := store.Create(ctx, key, owner("localhost:6650"), meta.NoLease)
	if err != nil {
		t.Fatal(err)
	}
	stays := watchMoves(ctx, store, func() result { return result{Result: "pass"} })
	if stays.Result != "fail" || !strings.Contains(stays.Reason, "moved no bundle") {
		t.Errorf("no move: %+v, want a failure", stays)
	}
	moves := watchMoves(ctx, store, func() result {
		if _, err := store.Update(ctx, key, owner("localhost:6652"), rev); err != nil {
			t.Error(err)
		}
		return result{Result: "pass"}
	})
	if moves.Result != "pass" {
		t.Errorf("a move: %+v, want the pass kept", moves)
	}
	failed := watchMoves(ctx, store, func() result { return result{Result: "fail", Reason: "its own"} })
	if failed.Reason != "its own" {
		t.Errorf("a failed test: %+v, want its own reason kept", failed)
	}
}
