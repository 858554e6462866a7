package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// harness adapts one Store implementation to the contract suite.
type harness struct {
	// newStore returns a store for one test; the harness closes it when the
	// test ends. Stores may share data (the etcd harness shares one server),
	// so every test writes under its own prefix.
	newStore func(t *testing.T) Store
	// ttl is the lease TTL the suite grants.
	ttl time.Duration
	// elapse lets d pass for leases whose keep-alive has stopped: the memory
	// harness advances its manual clock, the etcd harness does nothing
	// because the server's own clock runs.
	elapse func(d time.Duration)
	// compact compacts the store's history before rev.
	compact func(t *testing.T, s Store, rev int64)
}

// runs numbers the suite's test runs in this process.
var runs atomic.Int64

// waitFor bounds every wait in the suite. The etcd harness needs a TTL (at
// least etcd's minimum, about 2s) for expiry; nothing else comes close.
const waitFor = 20 * time.Second

// runContract checks the Store contract. Every implementation must pass it.
func runContract(t *testing.T, h harness) {
	tests := []struct {
		name string
		run  func(t *testing.T, h harness, s Store, p string)
	}{
		{"GetListOrder", testGetListOrder},
		{"CreateIfAbsent", testCreateIfAbsent},
		{"CASConflicts", testCASConflicts},
		{"UpdateGuarded", testUpdateGuarded},
		{"UpdateIfNone", testUpdateIfNone},
		{"PrefixIsolation", testPrefixIsolation},
		{"WatchFromRevision", testWatchFromRevision},
		{"WatchCompacted", testWatchCompacted},
		{"LeaseRevokeDeletesKeys", testLeaseRevoke},
		{"MoveToLease", testMoveToLease},
		{"LeaseExpiryDeletes", testLeaseExpiry},
		{"LeaseTimeToLive", testLeaseTimeToLive},
		{"ElectionOrderAndFailover", testElection},
		{"CampaignCancelled", testCampaignCancelled},
		{"RevokeStale", testRevokeStale},
		{"NextID", testNextID},
		{"AfterClose", testAfterClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := h.newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			// Unique per run, too: with -count=N the shared etcd keeps the
			// keys of earlier runs.
			tc.run(t, h, s, fmt.Sprintf("/test/%d/%s/", runs.Add(1), t.Name()))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s Store, key, val string, lease LeaseID) int64 {
	t.Helper()
	rev, err := s.Create(ctxT(t), key, []byte(val), lease)
	if err != nil {
		t.Fatalf("Create(%s): %v", key, err)
	}
	return rev
}

func mustGet(t *testing.T, s Store, key string) KV {
	t.Helper()
	kv, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return kv
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// nextResp returns the next watch response, failing after waitFor.
func nextResp(t *testing.T, ch <-chan WatchResponse) WatchResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return r
	case <-time.After(waitFor):
		t.Fatal("no watch response")
	}
	return WatchResponse{}
}

// nextEvents reads watch responses until n events have arrived, checking
// that each response is one revision.
func nextEvents(t *testing.T, ch <-chan WatchResponse, n int) []Event {
	t.Helper()
	var evs []Event
	for len(evs) < n {
		r := nextResp(t, ch)
		if r.Err != nil {
			t.Fatalf("watch error: %v", r.Err)
		}
		for _, ev := range r.Events {
			if ev.KV.ModRevision != r.Revision {
				t.Fatalf("event %+v in response at revision %d", ev, r.Revision)
			}
		}
		evs = append(evs, r.Events...)
	}
	if len(evs) != n {
		t.Fatalf("got %d events, want %d: %+v", len(evs), n, evs)
	}
	return evs
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("%s not closed", what)
	}
}

func testGetListOrder(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	for _, k := range []string{"b", "a", "c/x", "c"} {
		mustCreate(t, s, p+k, "v-"+k, NoLease)
	}
	_, err := s.Get(ctx, p+"missing")
	wantErr(t, "Get missing", err, ErrNotFound)

	kvs, rev, err := s.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var maxMod int64
	for _, kv := range kvs {
		keys = append(keys, strings.TrimPrefix(kv.Key, p)+"="+string(kv.Value))
		maxMod = max(maxMod, kv.ModRevision)
	}
	if got, want := strings.Join(keys, " "), "a=v-a b=v-b c=v-c c/x=v-c/x"; got != want {
		t.Fatalf("List = %q, want %q", got, want)
	}
	if rev < maxMod {
		t.Fatalf("List revision %d below a listed ModRevision %d", rev, maxMod)
	}
	empty, _, err := s.List(ctx, p+"nothing/")
	if err != nil || len(empty) != 0 {
		t.Fatalf("List of empty prefix = %v, %v", empty, err)
	}
}

func testCreateIfAbsent(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	rev := mustCreate(t, s, p+"k", "one", NoLease)
	kv := mustGet(t, s, p+"k")
	if kv.CreateRevision != rev || kv.ModRevision != rev || string(kv.Value) != "one" || kv.Lease != NoLease {
		t.Fatalf("after Create at %d: %+v", rev, kv)
	}
	_, err := s.Create(ctx, p+"k", []byte("two"), NoLease)
	wantErr(t, "second Create", err, ErrExists)
	if kv := mustGet(t, s, p+"k"); string(kv.Value) != "one" {
		t.Fatalf("failed Create changed the value to %q", kv.Value)
	}

	rev2, err := s.Update(ctx, p+"k", []byte("two"), rev)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev {
		t.Fatalf("Update revision %d not after %d", rev2, rev)
	}
	kv = mustGet(t, s, p+"k")
	if kv.CreateRevision != rev || kv.ModRevision != rev2 || string(kv.Value) != "two" {
		t.Fatalf("after Update: %+v (created %d, updated %d)", kv, rev, rev2)
	}
	// A deleted key can be created again, with a new CreateRevision.
	if err := s.Delete(ctx, p+"k", rev2); err != nil {
		t.Fatal(err)
	}
	rev3 := mustCreate(t, s, p+"k", "three", NoLease)
	if rev3 <= rev2 {
		t.Fatalf("re-Create revision %d not after %d", rev3, rev2)
	}
}

func testCASConflicts(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	rev := mustCreate(t, s, p+"k", "a", NoLease)
	rev2, err := s.Update(ctx, p+"k", []byte("b"), rev)
	if err != nil {
		t.Fatal(err)
	}
	// The loser of a race holds the old revision.
	_, err = s.Update(ctx, p+"k", []byte("stale"), rev)
	wantErr(t, "Update at stale revision", err, ErrConflict)
	wantErr(t, "Delete at stale revision", s.Delete(ctx, p+"k", rev), ErrConflict)
	if kv := mustGet(t, s, p+"k"); string(kv.Value) != "b" || kv.ModRevision != rev2 {
		t.Fatalf("failed CAS changed the key: %+v", kv)
	}
	_, err = s.Update(ctx, p+"absent", []byte("x"), rev)
	wantErr(t, "Update of absent key", err, ErrConflict)
	_, err = s.Update(ctx, p+"absent", []byte("x"), 0)
	wantErr(t, "Update of absent key at revision 0", err, ErrConflict)
	if _, err := s.Get(ctx, p+"absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Update at revision 0 created the key: %v", err)
	}

	if err := s.Delete(ctx, p+"k", rev2); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(ctx, p+"k")
	wantErr(t, "Get after Delete", err, ErrNotFound)
	wantErr(t, "second Delete", s.Delete(ctx, p+"k", rev2), ErrConflict)
	_, err = s.Update(ctx, p+"k", []byte("c"), rev2)
	wantErr(t, "Update after Delete", err, ErrConflict)
}

// testUpdateIfNone: a write that requires an empty prefix lands only while
// no key is under it and the key is where the writer read it, as a
// region's takeover of a namespace must (the prefix holds the sessions of
// the region it replaces).
func testUpdateIfNone(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	k, sessions := p+"policy", p+"sessions/"
	rev := mustCreate(t, s, k, "a", NoLease)
	srev := mustCreate(t, s, sessions+"b1", "alive", NoLease)
	mustCreate(t, s, p+"sessionsX", "a sibling, not under the prefix", NoLease)

	_, err := s.UpdateIfNone(ctx, k, []byte("taken over"), rev, sessions)
	wantErr(t, "UpdateIfNone with a key under the prefix", err, ErrConflict)
	if kv := mustGet(t, s, k); string(kv.Value) != "a" || kv.ModRevision != rev {
		t.Fatalf("a refused UpdateIfNone wrote: %q at %d", kv.Value, kv.ModRevision)
	}
	if err := s.Delete(ctx, sessions+"b1", srev); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateIfNone(ctx, k, []byte("stale"), rev-1, sessions)
	wantErr(t, "UpdateIfNone at a stale revision", err, ErrConflict)
	rev2, err := s.UpdateIfNone(ctx, k, []byte("taken over"), rev, sessions)
	if err != nil {
		t.Fatal(err)
	}
	if kv := mustGet(t, s, k); string(kv.Value) != "taken over" || kv.ModRevision != rev2 || rev2 <= rev {
		t.Fatalf("after UpdateIfNone: %q at %d (returned %d, was %d)", kv.Value, kv.ModRevision, rev2, rev)
	}
	_, err = s.UpdateIfNone(ctx, p+"absent", []byte("x"), 1, sessions)
	wantErr(t, "UpdateIfNone of an absent key", err, ErrConflict)
}

// testUpdateGuarded: a write guarded by another key's revision lands only
// while both keys are where the writer read them, as a task holder's
// cursor write must (the guard is the task key).
func testUpdateGuarded(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	k, g := p+"cursor", p+"task"
	rev := mustCreate(t, s, k, "a", NoLease)
	grev := mustCreate(t, s, g, "worker-1", NoLease)
	unchanged := func(what, val string, modRev int64) {
		t.Helper()
		if kv := mustGet(t, s, k); string(kv.Value) != val || kv.ModRevision != modRev {
			t.Fatalf("%s: the key is %q at %d, want %q at %d", what, kv.Value, kv.ModRevision, val, modRev)
		}
	}

	rev2, err := s.UpdateGuarded(ctx, k, []byte("b"), rev, g, grev)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev {
		t.Fatalf("UpdateGuarded revision %d not after %d", rev2, rev)
	}
	unchanged("after UpdateGuarded", "b", rev2)
	if kv := mustGet(t, s, g); kv.ModRevision != grev {
		t.Fatalf("UpdateGuarded moved the guard to %d", kv.ModRevision)
	}

	_, err = s.UpdateGuarded(ctx, k, []byte("stale"), rev, g, grev)
	wantErr(t, "UpdateGuarded at a stale key revision", err, ErrConflict)
	unchanged("stale key revision", "b", rev2)

	// The holder was frozen; its task key was deleted and created again by
	// another holder. The old holder's write is refused, the new one's
	// lands.
	if err := s.Delete(ctx, g, grev); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateGuarded(ctx, k, []byte("gone"), rev2, g, grev)
	wantErr(t, "UpdateGuarded with its guard deleted", err, ErrConflict)
	grev2 := mustCreate(t, s, g, "worker-2", NoLease)
	_, err = s.UpdateGuarded(ctx, k, []byte("old holder"), rev2, g, grev)
	wantErr(t, "UpdateGuarded with its guard re-created", err, ErrConflict)
	unchanged("old holder's write", "b", rev2)
	rev3, err := s.UpdateGuarded(ctx, k, []byte("new holder"), rev2, g, grev2)
	if err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	unchanged("new holder's write", "new holder", rev3)

	// An update of the guard itself also ends the old revision.
	grev3, err := s.Update(ctx, g, []byte("worker-2 again"), grev2)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateGuarded(ctx, k, []byte("x"), rev3, g, grev2)
	wantErr(t, "UpdateGuarded with its guard updated", err, ErrConflict)
	unchanged("guard updated", "new holder", rev3)

	// Revision 0 never matches: no blind create of the key, no guard by an
	// absent key.
	_, err = s.UpdateGuarded(ctx, p+"absent", []byte("x"), 0, g, grev3)
	wantErr(t, "UpdateGuarded of an absent key", err, ErrConflict)
	if _, err := s.Get(ctx, p+"absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpdateGuarded at revision 0 created the key: %v", err)
	}
	_, err = s.UpdateGuarded(ctx, k, []byte("x"), rev3, p+"no-guard", 0)
	wantErr(t, "UpdateGuarded by an absent guard", err, ErrConflict)
	unchanged("absent guard", "new holder", rev3)
}

func testPrefixIsolation(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	ch := s.Watch(ctx, p+"t/", 0)
	// The write to the sibling prefix comes first: if the watch leaked it,
	// it would be the first event seen.
	mustCreate(t, s, p+"t2/x", "no", NoLease)
	mustCreate(t, s, p+"t", "no", NoLease)
	mustCreate(t, s, p+"t/x", "yes", NoLease)
	evs := nextEvents(t, ch, 1)
	if evs[0].KV.Key != p+"t/x" || evs[0].Type != EventPut {
		t.Fatalf("watch of t/ saw %+v", evs[0])
	}
	kvs, _, err := s.List(ctx, p+"t/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].Key != p+"t/x" {
		t.Fatalf("List of t/ = %+v", kvs)
	}
	// Escaped names keep the separation even when a name holds a "/".
	if k, k2 := Key("t"), Key("t/2"); strings.HasPrefix(k2, Prefix(k)) {
		t.Fatalf("Key(t/2)=%s falls under Prefix(Key(t))=%s", k2, Prefix(k))
	}
}

func testWatchFromRevision(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	r1 := mustCreate(t, s, p+"a", "1", NoLease)
	r2, err := s.Update(ctx, p+"a", []byte("2"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, p+"a", r2); err != nil {
		t.Fatal(err)
	}
	r4 := mustCreate(t, s, p+"b", "x", NoLease)

	evs := nextEvents(t, s.Watch(ctx, p, r1), 4)
	type seen struct {
		typ        EventType
		key, value string
		create     int64
	}
	want := []seen{{EventPut, "a", "1", r1}, {EventPut, "a", "2", r1}, {EventDelete, "a", "", 0}, {EventPut, "b", "x", r4}}
	for i, ev := range evs {
		got := seen{ev.Type, strings.TrimPrefix(ev.KV.Key, p), string(ev.KV.Value), ev.KV.CreateRevision}
		if got != want[i] {
			t.Fatalf("event %d = %+v, want %+v", i, got, want[i])
		}
		if i > 0 && ev.KV.ModRevision <= evs[i-1].KV.ModRevision {
			t.Fatalf("event revisions not increasing: %+v", evs)
		}
	}
	if evs[0].KV.ModRevision != r1 || evs[1].KV.ModRevision != r2 || evs[3].KV.ModRevision != r4 {
		t.Fatalf("event revisions %+v, want %d %d _ %d", evs, r1, r2, r4)
	}

	// From 0 means from now: only later changes.
	_, rev, err := s.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	now := s.Watch(ctx, p, 0)
	// A watch from a revision in the future waits for it.
	future := s.Watch(ctx, p, rev+2)
	rc := mustCreate(t, s, p+"c", "later", NoLease)
	ev := nextEvents(t, now, 1)[0]
	if ev.KV.Key != p+"c" || ev.KV.ModRevision <= rev {
		t.Fatalf("watch from now saw %+v (listed at %d)", ev, rev)
	}
	mustCreate(t, s, p+"d", "later", NoLease)
	// c is at rev+1 unless a write elsewhere in the store came between.
	wantKey := p + "d"
	if rc >= rev+2 {
		wantKey = p + "c"
	}
	ev = nextEvents(t, future, 1)[0]
	if ev.KV.Key != wantKey || ev.KV.ModRevision < rev+2 {
		t.Fatalf("watch from revision %d saw %+v first, want %s", rev+2, ev, wantKey)
	}
}

func testWatchCompacted(t *testing.T, h harness, s Store, p string) {
	ctx := ctxT(t)
	r1 := mustCreate(t, s, p+"a", "1", NoLease)
	r2, err := s.Update(ctx, p+"a", []byte("2"), r1)
	if err != nil {
		t.Fatal(err)
	}
	h.compact(t, s, r2)
	ch := s.Watch(ctx, p, r1)
	r := nextResp(t, ch)
	wantErr(t, "watch from compacted revision", r.Err, ErrCompacted)
	if _, ok := <-ch; ok {
		t.Fatal("watch channel open after ErrCompacted")
	}
	// From the compaction revision on, the history is there.
	ev := nextEvents(t, s.Watch(ctx, p, r2), 1)[0]
	if ev.KV.ModRevision != r2 || string(ev.KV.Value) != "2" {
		t.Fatalf("watch from compaction revision saw %+v", ev)
	}
}

func testLeaseRevoke(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	l1 := grant(t, s, ctx, 10*time.Second)
	l2 := grant(t, s, ctx, 10*time.Second)
	if l1.ID() == NoLease || l1.ID() == l2.ID() {
		t.Fatalf("lease ids %x, %x", l1.ID(), l2.ID())
	}
	r1 := mustCreate(t, s, p+"a", "1", l1.ID())
	mustCreate(t, s, p+"b", "1", l1.ID())
	mustCreate(t, s, p+"other", "1", l2.ID())
	// Update keeps the key's lease.
	if _, err := s.Update(ctx, p+"a", []byte("2"), r1); err != nil {
		t.Fatal(err)
	}
	if kv := mustGet(t, s, p+"a"); kv.Lease != l1.ID() {
		t.Fatalf("after Update the key's lease is %x, want %x", kv.Lease, l1.ID())
	}
	_, rev, err := s.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Revoke(ctx, l1.ID()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "Done of revoked lease", l1.Done())
	kvs, _, err := s.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].Key != p+"other" {
		t.Fatalf("after Revoke: %+v", kvs)
	}
	// Both deletes come in one revision.
	r := nextResp(t, s.Watch(ctx, p, rev+1))
	if len(r.Events) != 2 || r.Events[0].Type != EventDelete || r.Events[1].Type != EventDelete {
		t.Fatalf("revoke events: %+v", r)
	}
	if err := s.Revoke(ctx, l1.ID()); err != nil {
		t.Fatalf("second Revoke: %v", err)
	}
	_, err = s.Create(ctx, p+"c", nil, l1.ID())
	wantErr(t, "Create under revoked lease", err, ErrLeaseNotFound)
	if closed(l2.Done()) {
		t.Fatal("revoking one lease ended another")
	}

	// Lease.Revoke does the same through the lease.
	if err := l2.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "Done after Lease.Revoke", l2.Done())
	_, err = s.Get(ctx, p+"other")
	wantErr(t, "Get after Lease.Revoke", err, ErrNotFound)
}

// testMoveToLease: a key moves from one lease to another in one CAS, as a
// bundle handed to another broker does: from then on it lives and dies
// with the new lease, and a stale revision or a dead lease moves nothing.
func testMoveToLease(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	from := grant(t, s, ctx, 10*time.Second)
	to := grant(t, s, ctx, 10*time.Second)
	k := p + "bundle"
	rev := mustCreate(t, s, k, "broker-1", from.ID())
	unchanged := func(what, val string, modRev int64, lease LeaseID) {
		t.Helper()
		if kv := mustGet(t, s, k); string(kv.Value) != val || kv.ModRevision != modRev || kv.Lease != lease {
			t.Fatalf("%s: the key is %q at %d under %x, want %q at %d under %x",
				what, kv.Value, kv.ModRevision, kv.Lease, val, modRev, lease)
		}
	}

	ch := s.Watch(ctx, p, rev+1)
	rev2, err := s.MoveToLease(ctx, k, []byte("broker-2"), rev, to.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev {
		t.Fatalf("MoveToLease revision %d not after %d", rev2, rev)
	}
	unchanged("after the move", "broker-2", rev2, to.ID())
	if ev := nextEvents(t, ch, 1)[0]; ev.Type != EventPut || string(ev.KV.Value) != "broker-2" || ev.KV.Lease != to.ID() {
		t.Fatalf("move event %+v", ev)
	}

	// The loser of a race holds the old revision.
	_, err = s.MoveToLease(ctx, k, []byte("stale"), rev, from.ID())
	wantErr(t, "MoveToLease at a stale revision", err, ErrConflict)
	unchanged("stale revision", "broker-2", rev2, to.ID())
	_, err = s.MoveToLease(ctx, p+"absent", []byte("x"), 0, to.ID())
	wantErr(t, "MoveToLease of an absent key at revision 0", err, ErrConflict)
	if _, err := s.Get(ctx, p+"absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("MoveToLease at revision 0 created the key: %v", err)
	}

	// A lease that is gone takes nothing.
	gone := grant(t, s, ctx, 10*time.Second)
	if err := s.Revoke(ctx, gone.ID()); err != nil {
		t.Fatal(err)
	}
	_, err = s.MoveToLease(ctx, k, []byte("broker-3"), rev2, gone.ID())
	wantErr(t, "MoveToLease to a revoked lease", err, ErrLeaseNotFound)
	unchanged("revoked lease", "broker-2", rev2, to.ID())

	// The old lease no longer holds the key; the new one does.
	if err := s.Revoke(ctx, from.ID()); err != nil {
		t.Fatal(err)
	}
	unchanged("old lease revoked", "broker-2", rev2, to.ID())
	if err := s.Revoke(ctx, to.ID()); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(ctx, k)
	wantErr(t, "Get after the new lease's revoke", err, ErrNotFound)
}

func testLeaseExpiry(t *testing.T, h harness, s Store, p string) {
	ctx := ctxT(t)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	l := grant(t, s, lctx, h.ttl)
	rev := mustCreate(t, s, p+"k", "v", l.ID())
	ch := s.Watch(ctx, p, rev+1)

	stop() // the holder stops renewing
	waitClosed(t, "Done after keep-alive stopped", l.Done())
	h.elapse(h.ttl + time.Second)
	ev := nextEvents(t, ch, 1)[0]
	if ev.Type != EventDelete || ev.KV.Key != p+"k" || ev.KV.ModRevision <= rev {
		t.Fatalf("expiry event %+v", ev)
	}
	_, err := s.Get(ctx, p+"k")
	wantErr(t, "Get after expiry", err, ErrNotFound)
}

// testLeaseTimeToLive: a lease kept alive has about its TTL left; one
// whose keep-alive stopped counts down and then is not found.
func testLeaseTimeToLive(t *testing.T, h harness, s Store, _ string) {
	ctx := ctxT(t)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	l := grant(t, s, lctx, h.ttl)
	remaining, granted, err := s.TimeToLive(ctx, l.ID())
	if err != nil {
		t.Fatal(err)
	}
	// The server may raise a TTL to its minimum; etcd counts seconds.
	if granted < h.ttl || remaining <= 0 || remaining > granted+time.Second {
		t.Fatalf("TimeToLive of a live lease of %v: remaining %v, granted %v", h.ttl, remaining, granted)
	}

	stop()
	waitClosed(t, "Done after keep-alive stopped", l.Done())
	// Unrenewed, it counts down: on the memory store's clock at once, on
	// etcd's as real time passes.
	h.elapse(granted / 2)
	deadline := time.Now().Add(waitFor)
	for remaining, _, err = s.TimeToLive(ctx, l.ID()); err == nil && remaining > granted/2+time.Second; remaining, _, err = s.TimeToLive(ctx, l.ID()) {
		if time.Now().After(deadline) {
			t.Fatalf("TimeToLive after the keep-alive stopped: remaining %v of %v, not counting down", remaining, granted)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.elapse(granted)
	for ; err == nil; _, _, err = s.TimeToLive(ctx, l.ID()) {
		if time.Now().After(deadline) {
			t.Fatalf("TimeToLive still finds the lease %v after it should have lapsed", waitFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantErr(t, "TimeToLive of a lapsed lease", err, ErrLeaseNotFound)
	_, _, err = s.TimeToLive(ctx, LeaseID(0x7fff_0000_0000_0001))
	wantErr(t, "TimeToLive of a lease never granted", err, ErrLeaseNotFound)
}

// grant grants a lease kept alive while ctx lives and revokes it when the
// test ends, so that no lease of one test expires during another.
func grant(t *testing.T, s Store, ctx context.Context, ttl time.Duration) Lease {
	t.Helper()
	l, err := s.Grant(ctx, ttl)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := s.Revoke(ctx, l.ID()); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Revoke at cleanup: %v", err)
		}
	})
	return l
}

// campaignAsync campaigns in a goroutine; the result arrives on the channel.
func campaignAsync(ctx context.Context, s Store, prefix, value string, l Lease) <-chan Leadership {
	out := make(chan Leadership, 1)
	go func() {
		ld, err := s.Campaign(ctx, prefix, []byte(value), l)
		if err != nil {
			close(out)
			return
		}
		out <- ld
	}()
	return out
}

func testElection(t *testing.T, h harness, s Store, p string) {
	ctx := ctxT(t)
	election := p + "leader"
	var leases []Lease
	var stops []context.CancelFunc
	for range 3 {
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		l := grant(t, s, lctx, h.ttl)
		leases, stops = append(leases, l), append(stops, stop)
	}
	first, err := s.Campaign(ctx, election, []byte("one"), leases[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Key(), election+"/") {
		t.Fatalf("election key %s not under %s/", first.Key(), election)
	}
	// Queue the second candidate strictly before the third: wait until its
	// key exists.
	second := campaignAsync(ctx, s, election, "two", leases[1])
	waitKeys(t, s, election+"/", 2)
	third := campaignAsync(ctx, s, election, "three", leases[2])
	waitKeys(t, s, election+"/", 3)
	select {
	case <-second:
		t.Fatal("second candidate won while the first leads")
	case <-third:
		t.Fatal("third candidate won while the first leads")
	default:
	}
	// A campaign in another election that shares a name prefix is unaffected.
	other, err := s.Campaign(ctx, election+"2", []byte("x"), leases[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "Done after Resign", first.Done())
	var lead2 Leadership
	select {
	case lead2 = <-second:
		if lead2 == nil {
			t.Fatal("second candidate's campaign failed")
		}
	case <-third:
		t.Fatal("third candidate jumped the queue")
	case <-time.After(waitFor):
		t.Fatal("no leader after Resign")
	}
	if kv := mustGet(t, s, lead2.Key()); string(kv.Value) != "two" {
		t.Fatalf("leader's key holds %q", kv.Value)
	}

	// Failover: the leader's process stops renewing its lease.
	stops[1]()
	waitClosed(t, "Leadership.Done when the leader's lease stops", lead2.Done())
	h.elapse(h.ttl + time.Second)
	select {
	case lead3 := <-third:
		if lead3 == nil {
			t.Fatal("third candidate's campaign failed")
		}
		if closed(lead3.Done()) {
			t.Fatal("new leader's Done already closed")
		}
	case <-time.After(waitFor):
		t.Fatal("no failover after the leader's lease ended")
	}
	_, err = s.Campaign(ctx, election, nil, leases[1])
	wantErr(t, "Campaign under an ended lease", err, ErrLeaseNotFound)
}

// waitKeys waits until exactly n keys exist under prefix.
func waitKeys(t *testing.T, s Store, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	kvs, rev, err := s.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, prefix, rev+1)
	for len(kvs) != n {
		r := nextResp(t, ch)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if kvs, _, err = s.List(ctx, prefix); err != nil {
			t.Fatal(err)
		}
	}
}

func testCampaignCancelled(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	election := p + "e"
	l1 := grant(t, s, ctx, 10*time.Second)
	l2 := grant(t, s, ctx, 10*time.Second)
	if _, err := s.Campaign(ctx, election, nil, l1); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Campaign(cctx, election, nil, l2)
		errc <- err
	}()
	waitKeys(t, s, election+"/", 2)
	cancel()
	select {
	case err := <-errc:
		wantErr(t, "cancelled Campaign", err, context.Canceled)
	case <-time.After(waitFor):
		t.Fatal("Campaign ignored its context")
	}
	// The withdrawn candidate left no key behind.
	kvs, _, err := s.List(ctx, election+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].Lease != l1.ID() {
		t.Fatalf("after a cancelled campaign: %+v", kvs)
	}
}

func testRevokeStale(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	// The previous run registered under a lease that would outlive it.
	old := grant(t, s, context.WithoutCancel(ctx), time.Minute)
	mustCreate(t, s, p+"bookie", "old", old.ID())
	mustCreate(t, s, p+"owned", "old", old.ID())

	id, err := RevokeStale(ctx, s, p+"bookie")
	if err != nil || id != old.ID() {
		t.Fatalf("RevokeStale = %x, %v; want %x", id, err, old.ID())
	}
	for _, k := range []string{"bookie", "owned"} {
		_, err := s.Get(ctx, p+k)
		wantErr(t, "Get after RevokeStale", err, ErrNotFound)
	}
	if id, err := RevokeStale(ctx, s, p+"bookie"); err != nil || id != NoLease {
		t.Fatalf("RevokeStale of an absent key = %x, %v", id, err)
	}
	mustCreate(t, s, p+"plain", "x", NoLease)
	if id, err := RevokeStale(ctx, s, p+"plain"); err != nil || id != NoLease {
		t.Fatalf("RevokeStale of a key without lease = %x, %v", id, err)
	}
}

func testAfterClose(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	l := grant(t, s, ctx, 10*time.Second)
	ld, err := s.Campaign(ctx, p+"e", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	rev := mustCreate(t, s, p+"k", "v", NoLease)
	w := s.Watch(ctx, p, rev+1)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "Lease.Done after Close", l.Done())
	waitClosed(t, "Leadership.Done after Close", ld.Done())
	for r := range w {
		if r.Err == nil {
			t.Fatalf("event after Close: %+v", r)
		}
	}
	for name, err := range map[string]error{
		"Get":    func() error { _, err := s.Get(ctx, p+"k"); return err }(),
		"List":   func() error { _, _, err := s.List(ctx, p); return err }(),
		"Create": func() error { _, err := s.Create(ctx, p+"n", nil, NoLease); return err }(),
		"Update": func() error { _, err := s.Update(ctx, p+"k", nil, rev); return err }(),
		"UpdateGuarded": func() error {
			_, err := s.UpdateGuarded(ctx, p+"k", nil, rev, p+"k", rev)
			return err
		}(),
		"Delete": s.Delete(ctx, p+"k", rev),
		"Grant":  func() error { _, err := s.Grant(ctx, time.Second); return err }(),
		"Revoke": s.Revoke(ctx, l.ID()),
		"Campaign": func() error {
			_, err := s.Campaign(ctx, p+"e2", nil, l)
			return err
		}(),
	} {
		wantErr(t, fmt.Sprintf("%s after Close", name), err, ErrClosed)
	}
	r := nextResp(t, s.Watch(ctx, p, 0))
	wantErr(t, "Watch after Close", r.Err, ErrClosed)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testNextID(t *testing.T, _ harness, s Store, p string) {
	ctx := ctxT(t)
	const workers, each = 4, 10
	ids := make(chan int64, workers*each)
	errc := make(chan error, workers)
	for range workers {
		go func() {
			var last int64
			for range each {
				id, err := NextID(ctx, s, p+"ledger-id")
				if err == nil && id <= last {
					err = fmt.Errorf("id %d after %d from the same caller", id, last)
				}
				if err != nil {
					errc <- err
					return
				}
				last = id
				ids <- id
			}
			errc <- nil
		}()
	}
	for range workers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] || id < 1 || id > workers*each {
			t.Fatalf("id %d repeated or outside 1..%d", id, workers*each)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct ids, want %d", len(seen), workers*each)
	}
}
