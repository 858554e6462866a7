package bookie

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mq/meridian/cluster/bookie/bkproto"
	"github.com/meridian-mq/meridian/cluster/meta/metatest"
	"github.com/meridian-mq/meridian/testkit"
)

func TestParseFailpointsRoundTrip(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", ""},
		{"journal-fsync=delay:20ms", "journal-fsync=delay:20ms"},
		{" journal-fsync=delay:1.5s@7 ; journal-fsync=error@3", "journal-fsync=error@3;journal-fsync=delay:1.5s@7"},
		{"entry-corrupt=4:5;journal-write=enospc;entry-corrupt=2:9;entry-corrupt=all", "journal-write=enospc;entry-corrupt=all;entry-corrupt=2:9;entry-corrupt=4:5"},
	} {
		fp, err := ParseFailpoints(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if got := fp.String(); got != tc.want {
			t.Errorf("%q: String() = %q, want %q", tc.spec, got, tc.want)
		}
		again, err := ParseFailpoints(fp.String())
		if err != nil || again.String() != tc.want {
			t.Errorf("%q: String() does not parse back: %q, %v", tc.spec, again, err)
		}
	}
	fp, _ := ParseFailpoints("journal-fsync=delay:20ms@2")
	if fp.JournalSyncDelay != 20*time.Millisecond || fp.JournalSyncDelayAfter != 2 || !fp.fsActive() || fp.JournalSyncAfter != -1 {
		t.Fatalf("%+v", fp)
	}
	for _, bad := range []string{"journal-fsync=delay", "journal-fsync=delay:", "journal-fsync=delay:fast",
		"journal-fsync=delay:0s", "journal-fsync=delay:-1ms", "journal-fsync=delay:11s", "journal-fsync=delay:5ms@x"} {
		if _, err := ParseFailpoints(bad); !errors.Is(err, ErrFailpoint) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if NoFailpoints().fsActive() || NoFailpoints().String() != "" {
		t.Fatal("NoFailpoints arms something")
	}
}

// addLoad keeps `writers` adds in flight against a bookie, each writer on a
// ledger of its own, and records every add's start, latency and error, so a
// test can look at the adds that started after a switch.
type addLoad struct {
	mu   sync.Mutex
	adds []loadAdd
	wg   sync.WaitGroup
}

type loadAdd struct {
	start time.Time
	took  time.Duration
	err   error
}

func startAddLoad(t *testing.T, c *bkproto.Conn, writers int) *addLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &addLoad{}
	for w := range writers {
		l.wg.Go(func() {
			ledger := int64(100 + w)
			for e := int64(0); ctx.Err() == nil; e++ {
				start := time.Now()
				err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: ledger, EntryID: e, LastAddConfirmed: e - 1, Payload: payloadOf(ledger, e, 512)})
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.adds = append(l.adds, loadAdd{start: start, took: time.Since(start), err: err})
				l.mu.Unlock()
				if err != nil && !errors.Is(err, bkproto.ErrReadOnly) {
					return // the bookie is gone
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); l.wg.Wait() })
	return l
}

// since is the adds that started at or after from and have completed.
func (l *addLoad) since(from time.Time) []loadAdd {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loadAdd
	for _, a := range l.adds {
		if !a.start.Before(from) {
			out = append(out, a)
		}
	}
	return out
}

func startFailpointBookie(t *testing.T) *testBookie {
	cfg := testConfig(t, t.TempDir(), metatest.Memory(t))
	cfg.FailpointEndpoint = "127.0.0.1:0"
	cfg.ReadOnlyProbeInterval = time.Second
	return startBookie(t, cfg)
}

// failpointRequest sends one request to the bookie's endpoint and returns
// the status and body.
func failpointRequest(t *testing.T, b *testBookie, method, body string) (int, string) {
	t.Helper()
	return failpointCall(t, testCtx(t), b.FailpointAddr(), method, body)
}

// failpointCall sends one request to the failpoint endpoint at endpoint
// (host:port) and returns the status and body.
func failpointCall(t *testing.T, ctx context.Context, endpoint, method, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+endpoint+"/failpoints", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(out)
}

func mustSetFailpoints(t *testing.T, b *testBookie, method, spec string) {
	t.Helper()
	if code, body := failpointRequest(t, b, method, spec); code != http.StatusOK {
		t.Fatalf("%s %q: %d %s", method, spec, code, body)
	}
}

func TestFailpointEndpoint(t *testing.T) {
	ctx := testCtx(t)
	b := startFailpointBookie(t)
	c := dial(t, b.Addr())
	if code, body := failpointRequest(t, b, http.MethodGet, ""); code != http.StatusOK || body != "\n" {
		t.Fatalf("GET on a fresh bookie: %d %q", code, body)
	}
	if code, body := failpointRequest(t, b, http.MethodPut, "journal-fsync=sometimes"); code != http.StatusBadRequest || !strings.Contains(body, "unknown failpoint") {
		t.Fatalf("PUT of a bad spec: %d %q", code, body)
	}
	if code, _ := failpointRequest(t, b, http.MethodPatch, ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("PATCH: %d", code)
	}
	// A counted fault counts down as the journal syncs; GET shows what is
	// left, in the syntax PUT takes.
	mustSetFailpoints(t, b, http.MethodPut, "journal-fsync=error@1000000;entry-corrupt=1:0")
	mustAdd(t, ctx, c, 1, 0, 100)
	mustAdd(t, ctx, c, 1, 1, 100)
	_, body := failpointRequest(t, b, http.MethodGet, "")
	fp, err := ParseFailpoints(body)
	if err != nil || fp.JournalSyncAfter < 0 || fp.JournalSyncAfter > 1000000-2 || !fp.corrupts(1, 0) {
		t.Fatalf("GET after two adds: %q (%v)", body, err)
	}
	// Corruption switches with the rest.
	_, err = c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: 0})
	wantErr(t, "read of a corrupted entry", err, bkproto.ErrChecksumMismatch)
	mustRead(t, ctx, c, 1, 1, 100)
	mustSetFailpoints(t, b, http.MethodPost, "entry-corrupt=1:1")
	mustRead(t, ctx, c, 1, 0, 100)
	_, err = c.ReadEntry(ctx, bkproto.ReadRequest{LedgerID: 1, EntryID: 1})
	wantErr(t, "read of the entry corrupted by POST", err, bkproto.ErrChecksumMismatch)
	if code, body := failpointRequest(t, b, http.MethodDelete, ""); code != http.StatusOK || body != "\n" {
		t.Fatalf("DELETE: %d %q", code, body)
	}
	mustRead(t, ctx, c, 1, 1, 100)
	if s := b.Failpoints().String(); s != "" {
		t.Fatalf("armed after DELETE: %q", s)
	}
}

func TestFailpointsFixedWithoutEndpoint(t *testing.T) {
	b := startBookie(t, testConfig(t, t.TempDir(), nil))
	if b.FailpointAddr() != "" {
		t.Fatalf("a bookie without FailpointEndpoint serves one on %s", b.FailpointAddr())
	}
	fp, _ := ParseFailpoints("journal-fsync=delay:1ms")
	wantErr(t, "SetFailpoints without an endpoint", b.SetFailpoints(fp), ErrFailpointsFixed)
	// Failpoints armed at start show, although they cannot be switched;
	// opening the journal has used some of the count.
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.Failpoints, _ = ParseFailpoints("journal-write=enospc@50;entry-corrupt=3:4")
	got := startBookie(t, cfg).Failpoints()
	if got.JournalWriteAfter <= 0 || got.JournalWriteAfter > 50 || got.JournalSyncAfter != -1 || !got.corrupts(3, 4) || got.corrupts(3, 5) {
		t.Fatalf("fixed failpoints read back as %q", got)
	}
}

// TestSlowSyncSwitchedUnderLoad: a slow sync switched on shows in every add
// that starts after the switch, and clearing it brings fast adds back, with
// adds running throughout.
func TestSlowSyncSwitchedUnderLoad(t *testing.T) {
	const delay = 400 * time.Millisecond
	b := startFailpointBookie(t)
	load := startAddLoad(t, dial(t, b.Addr()), 4)
	began := time.Now()
	testkit.WaitFor(t, "adds before the switch", func() bool { return len(load.since(began)) >= 50 })

	mustSetFailpoints(t, b, http.MethodPut, "journal-fsync=delay:"+delay.String())
	slowFrom := time.Now()
	testkit.WaitFor(t, "adds under the slow sync", func() bool { return len(load.since(slowFrom)) >= 8 })
	mustSetFailpoints(t, b, http.MethodDelete, "")
	fastFrom := time.Now()
	// Every add that started while the delay was armed, and completed
	// before the clear, waited at least one delayed sync: its record was
	// queued after the switch, so its batch's sync came after it too.
	slow := 0
	for _, a := range load.since(slowFrom) {
		if a.start.Before(fastFrom) && a.start.Add(a.took).Before(fastFrom) {
			if a.err != nil {
				t.Fatalf("add under a slow sync failed: %v", a.err)
			}
			if a.took < delay {
				t.Fatalf("an add under a %s sync delay took %s", delay, a.took)
			}
			slow++
		}
	}
	if slow == 0 {
		t.Fatal("no add completed under the slow sync")
	}
	var fastest time.Duration
	testkit.WaitFor(t, "an add faster than the delay after the clear", func() bool {
		for _, a := range load.since(fastFrom) {
			if a.err != nil {
				t.Fatalf("add after the clear failed: %v", a.err)
			}
			if a.took < delay/2 {
				fastest = a.took
				return true
			}
		}
		return false
	})
	t.Logf("%d adds under a %s sync delay, each at least that long; after the clear an add took %s", slow, delay, fastest)
}

// TestFsyncErrorSwitchedUnderLoad: a failed fsync switched on while adds
// run is as fatal as the fixed failpoint: the bookie stops with
// ErrJournalSync, and no add that started after the switch is acknowledged.
func TestFsyncErrorSwitchedUnderLoad(t *testing.T) {
	b := startFailpointBookie(t)
	load := startAddLoad(t, dial(t, b.Addr()), 4)
	began := time.Now()
	testkit.WaitFor(t, "adds before the switch", func() bool { return len(load.since(began)) >= 50 })
	fp, _ := ParseFailpoints("journal-fsync=error")
	if err := b.SetFailpoints(fp); err != nil {
		t.Fatal(err)
	}
	switched := time.Now()
	select {
	case <-b.Done():
	case <-testCtx(t).Done():
		t.Fatal("the bookie did not stop after its fsync failed")
	}
	wantErr(t, "bookie error", b.Err(), ErrJournalSync)
	load.wg.Wait()
	for _, a := range load.since(switched) {
		if a.err == nil {
			t.Fatalf("an add that started after the fsync failpoint was acknowledged (after %s)", a.took)
		}
	}
}

// TestDiskFullSwitchedUnderLoad: ENOSPC switched on turns the bookie
// read-only, as the fixed failpoint does; cleared, the probe finds room and
// adds are taken again.
func TestDiskFullSwitchedUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	b := startFailpointBookie(t)
	c := dial(t, b.Addr())
	load := startAddLoad(t, c, 4)
	began := time.Now()
	testkit.WaitFor(t, "adds before the switch", func() bool { return len(load.since(began)) >= 50 })
	mustSetFailpoints(t, b, http.MethodPut, "journal-write=enospc")
	testkit.WaitFor(t, "the bookie to turn read-only", b.ReadOnly)
	readOnlyFrom := time.Now()
	err := c.AddEntry(ctx, bkproto.AddRequest{LedgerID: 1, EntryID: 0, LastAddConfirmed: -1, Payload: []byte("x")})
	wantErr(t, "add on a full disk", err, bkproto.ErrReadOnly)
	mustSetFailpoints(t, b, http.MethodDelete, "")
	testkit.WaitFor(t, "the probe to find room", func() bool { return !b.ReadOnly() })
	mustAdd(t, ctx, c, 1, 0, 100)
	// Between the two switches adds were refused, never acknowledged.
	refused := 0
	for _, a := range load.since(readOnlyFrom) {
		if a.err != nil {
			wantErr(t, "add while read-only", a.err, bkproto.ErrReadOnly)
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no add of the load was refused while the disk was full")
	}
	select {
	case <-b.Done():
		t.Fatalf("a full disk stopped the bookie: %v", b.Err())
	default:
	}
}
